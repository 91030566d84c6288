package main

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
)

func TestParseProcs(t *testing.T) {
	for in, want := range map[string]int{"auto": 0, "1": 1, "8": 8} {
		if got, err := parseProcs(in); err != nil || got != want {
			t.Errorf("parseProcs(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "x", ""} {
		if _, err := parseProcs(in); err == nil {
			t.Errorf("parseProcs(%q) accepted", in)
		}
	}
}

// Auto is one P; a number fixes the Ps; auto with GOMAXPROCS in the
// environment leaves them.
func TestSetProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	runtime.GOMAXPROCS(4)
	setProcs(0, log)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("--procs auto: GOMAXPROCS %d, want 1", got)
	}
	setProcs(3, log)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("--procs 3: GOMAXPROCS %d", got)
	}
	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3)
	setProcs(0, log)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("auto with GOMAXPROCS=3 set: GOMAXPROCS %d", got)
	}
}
