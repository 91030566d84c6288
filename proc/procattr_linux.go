package proc

import "syscall"

// dieWithParent makes the kernel kill the child when this process dies, for
// instance on a test timeout or a kill -9, so no broker or relay is left
// running.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
