package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"time"
)

// The relay is a chain of goroutines (replication reader, publisher, the
// Kafka client's writer and reader), each woken by the one before. With an
// idle second P, every wake-up also wakes an OS thread to run it there, and
// at a steady load those cross-thread wake-ups cost more than the work
// (docs/benchmarks.md). One P runs the chain on one thread; a backlog needs
// the cores. procsAuto therefore runs on one P while the relay uses little
// CPU, and on up to maxAutoProcs when it uses most of that one.

// maxAutoProcs bounds auto: about as many goroutines as are busy at once in
// a drain; more Ps only spin looking for work.
const maxAutoProcs = 4

// procsInterval is how often auto looks at the CPU the process used.
const procsInterval = 500 * time.Millisecond

// Thresholds, in cores used over an interval: above procsUp of the current
// Ps auto goes to the most, below procsDown back to one. The gap between
// them keeps a load near either from flapping.
const (
	procsUp   = 0.7
	procsDown = 0.35
)

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

// nextProcs is auto's choice of Ps for the next interval, given the cores
// used in the last one.
func nextProcs(cur, most int, used float64) int {
	switch {
	case cur < most && used > procsUp*float64(cur):
		return most
	case cur > 1 && used < procsDown:
		return 1
	}
	return cur
}

// startProcs runs runProcs until the returned function is called.
func startProcs(ctx context.Context, n int, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runProcs(ctx, n, log)
	}()
	return func() { cancel(); <-done }
}

// procsUsage is --procs's help, for run and the bench's floor.
const procsUsage = "Go Ps (GOMAXPROCS): auto (one while the process uses little CPU, up to 4 when it needs them) or a number"

// runProcs sets the process's Ps as --procs says until ctx ends. A
// GOMAXPROCS in the environment wins over auto.
func runProcs(ctx context.Context, n int, log *slog.Logger) {
	if n > 0 {
		runtime.GOMAXPROCS(n)
		return
	}
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		log.Debug("GOMAXPROCS is set; --procs auto leaves it", "gomaxprocs", v)
		return
	}
	most := min(runtime.GOMAXPROCS(0), maxAutoProcs)
	last, ok := cpuTime()
	if most == 1 || !ok {
		return
	}
	cur := 1
	runtime.GOMAXPROCS(cur)
	defer runtime.GOMAXPROCS(most)
	t := time.NewTicker(procsInterval)
	defer t.Stop()
	at := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c, _ := cpuTime()
			used := (c - last).Seconds() / now.Sub(at).Seconds()
			last, at = c, now
			if next := nextProcs(cur, most, used); next != cur {
				runtime.GOMAXPROCS(next)
				log.Debug("Ps changed", "from", cur, "to", next, "cores_used", strconv.FormatFloat(used, 'f', 2, 64))
				cur = next
			}
		}
	}
}
