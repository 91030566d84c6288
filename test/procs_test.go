package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

const gomaxprocsMetric = "go_sched_gomaxprocs_threads"

// The relay runs on one P unless told otherwise, in a drain too, where it
// uses a whole core: one P took less CPU than more at every load measured,
// and drained no slower (docs/benchmarks.md, "Ps on 16 cores"). Seen as an
// operator sees it, through the binary's metrics endpoint, sampled while
// the relay drains a backlog long enough (a few seconds) for a process that
// adapted its Ps to the load to have done so.
func TestRunsOnOnePUnlessTold(t *testing.T) {
	e := testenv.New(t)
	cfg := e.Config()
	e.Setup(cfg)
	for _, tt := range []struct {
		name string
		args []string
		n    int // backlog
		want float64
	}{
		{"auto", nil, 300_000, 1},
		{"--procs 3", []string{"--procs", "3"}, 10_000, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := e.Conn.Exec(context.Background(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'bulk', 'agg-' || (g % 1000), 'Imported', '{}' FROM generate_series(1, $1) g`, tt.n); err != nil {
				t.Fatal(err)
			}
			addr := testenv.FreeAddr(t)
			p := e.Run(t, append(tt.args, "--metrics-addr", addr)...)
			base := "http://" + addr
			testenv.Eventually(t, 15*time.Second, "the metrics endpoint", func() bool { return testenv.HTTPStatus(base+"/metrics") == 200 })
			seen := map[float64]bool{}
			deadline := time.Now().Add(2 * time.Minute)
			for {
				m := testenv.Scrape(t, base)
				v, ok := m[gomaxprocsMetric]
				if !ok {
					t.Fatalf("no %s on the metrics endpoint", gomaxprocsMetric)
				}
				seen[v] = true
				var published float64
				for k, v := range m {
					if strings.HasPrefix(k, "pgoutbox_events_published_total{") {
						published += v
					}
				}
				if published >= float64(tt.n) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%v of %d events published in 2 minutes", published, tt.n)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(seen) != 1 || !seen[tt.want] {
				t.Fatalf("%s during the drain: %v, want only %v", gomaxprocsMetric, seen, tt.want)
			}
			p.Stop(t)
		})
	}
}
