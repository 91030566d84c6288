//go:build !linux

package proc

import "syscall"

// dieWithParent has no equivalent outside Linux: there, a child outlives a
// parent that dies without stopping it.
func dieWithParent() *syscall.SysProcAttr { return nil }
