//go:build !unix

package main

import "time"

// cpuTime is not read here: --procs auto keeps Go's default.
func cpuTime() (time.Duration, bool) { return 0, false }
