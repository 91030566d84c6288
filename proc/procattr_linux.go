package proc

import "syscall"

// dieWithParent makes the kernel kill the child when this process dies, for
// instance on a test timeout or a kill -9, so no broker or relay is left
// running. cred, when not nil, is the user the child runs as.
func dieWithParent(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}
