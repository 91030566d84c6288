package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
)

// The relay is a chain of goroutines (replication reader, publisher, the
// Kafka client's writer and reader), each woken by the one before. On one
// P a hand-off is a goroutine switch on the same thread; with a second P
// idle, it also wakes an OS thread to run the woken goroutine there, which
// costs more than the work. One P measured cheaper than two to sixteen at
// every load tried, and no slower beyond the spread between runs: a
// steady 2,000 events/s on 2 cores, 20,000 events/s and drains on 16
// cores, 4 KB payloads, exactly-once (docs/benchmarks.md, "Ps").

// procsUsage is --procs's help, for run and the bench's floor.
const procsUsage = "Go Ps (GOMAXPROCS): auto (one, unless GOMAXPROCS is set in the environment) or a number"

// parseProcs reads --procs: "auto" (0) or a number of Ps.
func parseProcs(s string) (int, error) {
	if s == "auto" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("--procs %q: use auto or a number of at least 1", s)
	}
	return n, nil
}

// setProcs sets the process's Ps as --procs says: n, or for auto (0) one,
// unless GOMAXPROCS in the environment already chose.
func setProcs(n int, log *slog.Logger) {
	if n == 0 {
		if v := os.Getenv("GOMAXPROCS"); v != "" {
			log.Debug("GOMAXPROCS is set; --procs auto leaves it", "gomaxprocs", v)
			return
		}
		n = 1
	}
	runtime.GOMAXPROCS(n)
}
