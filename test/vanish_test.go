package test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Insert-then-delete in one transaction under WAL mode: the WAL carries
// the insert, so every event is delivered, and nothing is reported lost.
func TestInsertThenDeleteWAL(t *testing.T) {
	e := testenv.New(t)
	p := e.Run(t, "--mode", "wal")
	testenv.Eventually(t, 15*time.Second, "streaming", func() bool { return strings.Contains(p.Out.String(), `"msg":"streaming"`) })
	ids := testenv.InsertThenDelete(e, 300, "order")
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 30*time.Second)
	if strings.Contains(p.Out.String(), "deleted before polling") {
		t.Fatalf("WAL mode reported a loss:\n%s", p.Out.String())
	}
}

// Insert-then-delete while polling, in --mode poll and in auto mode on a
// server without logical replication: polling cannot see those rows, and
// pgoutbox says so: an ERROR line with the count and the seq range, the
// metric, and status exits non-zero naming the loss. The rows it can see
// are still published.
func TestInsertThenDeletePollingIsReported(t *testing.T) {
	for _, tc := range []struct {
		name     string
		walLevel string
		args     []string
		advice   string
	}{
		{"poll", "logical", []string{"--mode", "poll"}, "--mode poll cannot relay this table"},
		{"auto without logical replication", "replica", []string{"--mode", "auto"}, "polling cannot relay this table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testenv.New(t, pgcluster.Options{WALLevel: tc.walLevel})
			addr := testenv.FreeAddr(t)
			p := e.Run(t, append(tc.args, "--poll-interval", "100ms", "--metrics-addr", addr)...)
			testenv.Eventually(t, 15*time.Second, "polling", func() bool { return strings.Contains(p.Out.String(), `"msg":"polling"`) })
			kept := e.Insert(testenv.NewRow("order", "o-kept", "Placed", `{}`))
			testenv.InsertThenDelete(e, 300, "order")
			kept = append(kept, e.Insert(testenv.NewRow("order", "o-kept", "Placed", `{}`))...)
			testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", kept, 30*time.Second)

			var lost *testenv.LostStatus
			var problems []string
			var ok bool
			testenv.Eventually(t, 60*time.Second, "status reporting 300 rows lost", func() bool {
				lost, problems, ok = testenv.LostStatusOf(t, e)
				return lost != nil && lost.Rows >= 300
			})
			if lost.Rows != 300 {
				t.Errorf("status reports up to %d rows lost, want 300 (no rollbacks, no other deletes)", lost.Rows)
			}
			if ok || !strings.Contains(strings.Join(problems, "\n"), "deleted before polling published them") {
				t.Errorf("status exit ok=%t, problems %q: want a non-zero exit naming the loss", ok, problems)
			}
			out := p.Out.String()
			if !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "deleted before polling published them") ||
				!strings.Contains(out, `"lost_up_to":`) || !strings.Contains(out, `"seq_from":`) {
				t.Errorf("no ERROR line with the count and range:\n%s", out)
			}
			if !strings.Contains(out, tc.advice) {
				t.Errorf("the log does not say %q:\n%s", tc.advice, out)
			}
			m := testenv.Scrape(t, "http://"+addr)
			if got := m[`pgoutbox_events_lost_deleted_total{table="public.outbox"}`]; got != 300 {
				t.Errorf("pgoutbox_events_lost_deleted_total = %v, want 300", got)
			}
			t.Logf("status: up to %d rows lost, seq %d-%d", lost.Rows, lost.FromSeq, lost.ToSeq)
		})
	}
}

// A cleanup job deletes rows a second after they commit while pgoutbox
// polls every 2 s, and writers roll back one transaction in ten: the rows
// deleted before a poll are lost, and the reported bound covers what the
// topic lacks without being far above it.
func TestCleanupJobLossIsBounded(t *testing.T) {
	e := testenv.New(t)
	p := e.Run(t, "--mode", "poll", "--poll-interval", "2s")
	testenv.Eventually(t, 15*time.Second, "polling", func() bool { return strings.Contains(p.Out.String(), `"msg":"polling"`) })

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var committed []string
	wconn := e.Connect()
	wg.Add(2)
	go func() { // writer
		defer wg.Done()
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			tx, err := wconn.Begin(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			var id string
			if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'Placed', '{}') RETURNING id::text`,
				fmt.Sprint("o-", i%7)).Scan(&id); err != nil {
				t.Error(err)
				return
			}
			if i%10 == 9 {
				tx.Rollback(ctx)
				continue
			}
			if err := tx.Commit(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			committed = append(committed, id)
			mu.Unlock()
		}
	}()
	cconn := e.Connect()
	go func() { // cleanup job: deletes rows a second after commit, published or not
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := cconn.Exec(context.Background(), "DELETE FROM outbox WHERE created_at < now() - interval '1 second'"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	time.Sleep(8 * time.Second)
	close(stop)
	wg.Wait()
	// Let the poller read what is left, then count what reached Kafka.
	testenv.Eventually(t, 30*time.Second, "no unpublished rows left", func() bool {
		var n int
		e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&n)
		return n == 0
	})
	delivered := map[string]bool{}
	for _, r := range testenv.Drain(t, e.Brokers, "outbox.event.order", 0) {
		delivered[testenv.DecodeEvent(t, r).ID] = true
	}
	lost := 0
	for _, id := range committed {
		if !delivered[id] {
			lost++
		}
	}
	t.Logf("committed %d, delivered %d, lost %d", len(committed), len(committed)-lost, lost)
	if lost == 0 {
		t.Fatal("the cleanup job deleted nothing before a poll; the test needs losses")
	}
	var st *testenv.LostStatus
	// The relay recounts at most every 10 s, and waits longer after a count
	// that found nothing new.
	testenv.Eventually(t, 150*time.Second, fmt.Sprintf("status reporting at least the %d rows lost", lost), func() bool {
		st, _, _ = testenv.LostStatusOf(t, e)
		return st != nil && st.Rows >= int64(lost)
	})
	t.Logf("reported up to %d rows lost (seq %d-%d), actually lost %d", st.Rows, st.FromSeq, st.ToSeq, lost)
	if slack := int64(lost)/10 + 5; st.Rows > int64(lost)+slack {
		t.Errorf("reported up to %d rows lost, %d actually: more than %d above", st.Rows, lost, slack)
	}
}

// No false alarm: writers roll back one transaction in ten (positions
// never seen, but no deletes), and a cleanup job deletes only published
// rows (deletes, but of rows polling saw). Neither is a loss.
func TestPollingReportsNoLossForRollbacksOrPublishedCleanup(t *testing.T) {
	for _, cleanup := range []bool{false, true} {
		name := "rollbacks only"
		if cleanup {
			name = "rollbacks and a cleanup of published rows"
		}
		t.Run(name, func(t *testing.T) {
			e := testenv.New(t)
			p := e.Run(t, "--mode", "poll", "--poll-interval", "100ms")
			testenv.Eventually(t, 15*time.Second, "polling", func() bool { return strings.Contains(p.Out.String(), `"msg":"polling"`) })
			// The check is on: a silence below means nothing was found,
			// not that nothing was looked for.
			if !regexp.MustCompile(`"deleted_rows_checked_from_seq":[1-9]`).MatchString(p.Out.String()) {
				t.Fatalf("polling does not check for deleted rows:\n%s", p.Out.String())
			}
			var deleted atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if cleanup {
				cconn := e.Connect()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						case <-time.After(150 * time.Millisecond):
						}
						tag, err := cconn.Exec(context.Background(), "DELETE FROM outbox WHERE published_at IS NOT NULL")
						if err != nil {
							t.Error(err)
							return
						}
						deleted.Add(tag.RowsAffected())
					}
				}()
			}
			load := e.StartLoad(t, 3)
			time.Sleep(5 * time.Second)
			committed := load.Finish()
			rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
			close(stop)
			wg.Wait()
			t.Logf("%v; %d rolled back; cleanup deleted %d published rows", rep, load.RolledBack(), deleted.Load())
			if rep.Lost != 0 {
				t.Fatalf("lost %d events", rep.Lost)
			}
			if load.RolledBack() == 0 || (cleanup && deleted.Load() == 0) {
				t.Fatal("the load had no rollbacks or the cleanup deleted nothing: the test would prove nothing")
			}
			// The delete counter reaches the statistics up to 10 s late;
			// wait until it has every delete, then past the relay's
			// recount interval, before judging.
			testenv.Eventually(t, 30*time.Second, "the statistics counting every delete", func() bool {
				var n int64
				e.Conn.QueryRow(context.Background(), "SELECT n_tup_del FROM pg_stat_user_tables WHERE relid = 'outbox'::regclass").Scan(&n)
				return n >= deleted.Load()
			})
			time.Sleep(12 * time.Second)
			lost, problems, ok := testenv.LostStatusOf(t, e)
			if lost != nil || !ok || strings.Contains(p.Out.String(), "deleted before polling") {
				t.Fatalf("a false report: status %+v, exit ok %t, problems %q\n%s", lost, ok, problems, p.Out.String())
			}
		})
	}
}

// TRUNCATE while pgoutbox polls. A truncate of rows already published
// takes nothing, and does not hide what follows: 20 rows deleted before
// a poll read them are reported (they were not, behind a truncate of
// published rows, before). 20 rows truncated before a poll read them are
// reported like deleted ones, in the log, the metric and status, and
// rows written after are published.
func TestTruncateUnderPolling(t *testing.T) {
	e := testenv.New(t)
	addr := testenv.FreeAddr(t)
	p := e.Run(t, "--mode", "poll", "--poll-interval", "100ms", "--metrics-addr", addr)
	testenv.Eventually(t, 15*time.Second, "polling", func() bool { return strings.Contains(p.Out.String(), `"msg":"polling"`) })
	var published []string
	for i := 0; i < 20; i++ {
		published = append(published, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%4), "Placed", `{}`))...)
	}
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", published, 30*time.Second)
	testenv.Eventually(t, 15*time.Second, "every row marked published", func() bool {
		var left int
		e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&left)
		return left == 0
	})
	e.Exec("TRUNCATE outbox")
	testenv.InsertThenDelete(e, 20, "order")
	testenv.FlushStats(e)
	if n := testenv.LostNow(t, e, 20); n != 20 {
		t.Errorf("after a truncate of published rows and 20 rows deleted before a poll: status reports %d rows lost, want 20", n)
	}

	tx, err := e.Conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'order', 'o-' || g, 'Placed', '{}' FROM generate_series(1, 20) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), "TRUNCATE outbox"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testenv.LostNow(t, e, 40); n != 40 {
		t.Errorf("after 20 rows truncated before a poll read them: status reports %d rows lost in all, want 40", n)
	}
	if m := testenv.Scrape(t, "http://"+addr); m[`pgoutbox_events_lost_deleted_total{table="public.outbox"}`] != 40 {
		t.Errorf("pgoutbox_events_lost_deleted_total = %v, want 40", m[`pgoutbox_events_lost_deleted_total{table="public.outbox"}`])
	}
	if out := p.Out.String(); !strings.Contains(out, "the outbox table was truncated") {
		t.Errorf("the truncate is not in the log:\n%s", out)
	}
	after := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", after, 30*time.Second)
}
