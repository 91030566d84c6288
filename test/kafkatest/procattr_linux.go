package kafkatest

import "syscall"

// dieWithParent makes the kernel kill the child when the test binary dies,
// for instance on a test timeout, so no broker is left listening.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
