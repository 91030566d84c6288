package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
	"github.com/pgoutbox/pgoutbox/test/redistest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// TestBenchBrokers runs `pgoutbox bench --rabbitmq-url` and `pgoutbox
// bench --redis-address` briefly against a real rabbitmq-server and
// redis-server: the relay publishes with --sink rabbitmq or --sink redis
// in WAL and polling mode and from a backlog, and every event arrives once
// to the bench's consumer of that broker, in order per aggregate.
func TestBenchBrokers(t *testing.T) {
	bin := testenv.Bin(t)
	for _, tc := range []struct {
		name  string
		flags func(t *testing.T) []string
	}{
		{"rabbitmq", func(t *testing.T) []string {
			return []string{"--rabbitmq-url", rabbitmqtest.Start(t, rabbitmqtest.Options{}).URL}
		}},
		{"redis", func(t *testing.T) []string { return []string{"--redis-address", redistest.Start(t).Addr} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := pgcluster.New(t)
			jsonPath := filepath.Join(t.TempDir(), "r.json")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			args := append([]string{"bench", "--database-url", pg.URL,
				"--modes", "wal,poll", "--poll-interval", "200ms", "--rate", "300", "--duration", "2s", "--writers", "2",
				"--aggregates", "20", "--events-per-tx", "1-3", "--drain-events", "2000", "--no-floor", "--json", jsonPath},
				tc.flags(t)...)
			cmd := exec.CommandContext(ctx, bin, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("pgoutbox bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			t.Logf("stdout:\n%s", stdout.String())
			if !strings.Contains(stdout.String(), "into "+tc.name) {
				t.Errorf("the table does not say it measured %s", tc.name)
			}
			type counts struct {
				Mode    string `json:"mode"`
				Events  int    `json:"events"`
				Missing int    `json:"missing"`
				Dups    int    `json:"duplicates"`
				Order   int    `json:"order_violations"`
			}
			var rep struct {
				Runs  []counts `json:"runs"`
				Drain counts   `json:"drain"`
			}
			b, err := os.ReadFile(jsonPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if len(rep.Runs) != 2 {
				t.Fatalf("runs: %s", b)
			}
			// 300 events/s for 2 s, at 2 events per transaction on
			// average: 300 transactions of 1, 2, 3, 1, ... events.
			check := func(what string, r counts, want int) {
				if r.Events != want || r.Missing != 0 || r.Dups != 0 || r.Order != 0 {
					t.Errorf("%s: %+v, want %d events, none missing, duplicated or out of order", what, r, want)
				}
			}
			for _, r := range rep.Runs {
				check(r.Mode, r, 600)
			}
			check("drain", rep.Drain, 2000)
		})
	}
}
