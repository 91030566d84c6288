package main

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"
)

func TestNextProcs(t *testing.T) {
	tests := []struct {
		name      string
		cur, most int
		used      float64
		want      int
	}{
		{"steady load stays on one", 1, 2, 0.3, 1},
		{"between the thresholds stays", 1, 2, 0.6, 1},
		{"most of one P goes to the most", 1, 4, 0.8, 4},
		{"busy on the most stays", 4, 4, 2.5, 4},
		{"little on the most stays above down", 2, 2, 0.5, 2},
		{"idle on the most goes back to one", 4, 4, 0.2, 1},
		{"one core machine", 1, 1, 1.0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextProcs(tt.cur, tt.most, tt.used); got != tt.want {
				t.Errorf("nextProcs(%d, %d, %.2f) = %d, want %d", tt.cur, tt.most, tt.used, got, tt.want)
			}
		})
	}
}

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

// A number fixes the Ps; auto with GOMAXPROCS in the environment leaves them.
func TestRunProcsFixedAndEnvironment(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	runProcs(context.Background(), 3, log)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("--procs 3: GOMAXPROCS %d", got)
	}
	t.Setenv("GOMAXPROCS", "3")
	stop := startProcs(context.Background(), 0, log)
	time.Sleep(2 * procsInterval)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("auto with GOMAXPROCS=3 set: GOMAXPROCS %d", got)
	}
	stop()
}
