//go:build !linux

package kafkatest

import "syscall"

// dieWithParent has no equivalent outside Linux: there, a broker outlives a
// test binary that dies without running its cleanups.
func dieWithParent() *syscall.SysProcAttr { return nil }
