package test

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// make demo, as a newcomer runs it: the binary starts a throwaway
// PostgreSQL and the bundled broker, writes, relays and consumes, prints
// each event with its latency and a summary in which every committed event
// arrived once, and exits 0.
func TestDemoCommand(t *testing.T) {
	bin := testenv.Bin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--duration", "3s", "--rate", "40")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgoutbox demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	m := regexp.MustCompile(`summary: (\d+) events committed, (\d+) consumed, (\d+) missing, (\d+) duplicates; relay published (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary:\n%s", out)
	}
	n := make([]int, 5)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	if committed, consumed, missing, dups := n[0], n[1], n[2], n[3]; committed < 50 || consumed != committed || missing != 0 || dups != 0 {
		t.Errorf("summary: %s; want every committed event (at least 50) consumed once", m[0])
	}
	if !regexp.MustCompile(`commit-to-consume latency: p50 [0-9.]+ ?ms`).MatchString(out) {
		t.Errorf("no latency line:\n%s", out)
	}
	if lines := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} +outbox\.event\.\S+ .* \d+\.\d+ ?ms$`).FindAllString(out, -1); len(lines) == 0 {
		t.Errorf("no event printed with its latency:\n%s", out)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
}
