//go:build !linux

package proc

import "syscall"

// dieWithParent has no equivalent outside Linux: there, a child outlives a
// parent that dies without stopping it. cred, when not nil, is the user the
// child runs as.
func dieWithParent(cred *syscall.Credential) *syscall.SysProcAttr {
	if cred == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: cred}
}
