package test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/test/faultproxy"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A polled batch whose produce request is on its way when the broker goes
// silent cannot be failed by the Kafka client (an idempotent producer
// never fails a batch that may have been written), so the poll session
// waits for it. While it waits, the relay still runs retention and records
// that it is alive; once the broker answers, the batch is acked and marked
// without a duplicate; and a stop during the wait ends within
// ShutdownTimeout, leaving the unacked row unpublished for the next start.
func TestPollingWaitsForAnUnansweredBatch(t *testing.T) {
	e := testenv.New(t)
	proxy, ln, err := faultproxy.Listener()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	e.Kafka = kafkatest.InProcess(t, kfake.NumBrokers(1), kfake.ListenFn(func(string, string) (net.Listener, error) { return ln, nil }))
	e.Brokers = e.Kafka.Brokers

	cfg := testenv.PollConfig(e)
	cfg.Operations.Retention = 24 * time.Hour
	cfg.Operations.RetentionInterval = 100 * time.Millisecond
	cfg.ShutdownTimeout = time.Second
	r := e.Start(cfg)

	published := testenv.InsertEach(e, 3, "a-")
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", published, 15*time.Second)
	testenv.Eventually(t, 10*time.Second, "rows marked published", func() bool { return len(testenv.Unpublished(e, published...)) == 0 })
	sessions := r.Stats.Sessions.Load()

	// The request carrying these rows reaches the link and goes no further.
	proxy.Blackhole()
	waiting := testenv.InsertEach(e, 3, "b-")
	time.Sleep(500 * time.Millisecond) // polled and produced
	aliveBefore := aliveAt(e)
	testenv.Backdate(e, published...)
	testenv.Eventually(t, 8*time.Second, "retention to run while the batch waits", func() bool { return len(testenv.Present(e, published...)) == 0 })
	testenv.Eventually(t, 8*time.Second, "alive_at to advance while the batch waits", func() bool { return aliveAt(e).After(aliveBefore) })
	if got := testenv.Unpublished(e, waiting...); len(got) != len(waiting) {
		t.Fatalf("%d rows marked published before Kafka answered", len(waiting)-len(got))
	}
	if n := r.Stats.Sessions.Load(); n != sessions {
		t.Fatalf("the poll session restarted (%d sessions, was %d): the batch failed instead of waiting", n, sessions)
	}

	proxy.Heal()
	testenv.Eventually(t, 30*time.Second, "the waiting rows marked published", func() bool { return len(testenv.Unpublished(e, waiting...)) == 0 })
	counts := testenv.CountIDs(t, e.Brokers, "outbox.event.order")
	for _, id := range waiting {
		if counts[id] != 1 {
			t.Fatalf("event %s arrived %d times, want once", id, counts[id])
		}
	}

	// A stop while a batch waits: abandoned after ShutdownTimeout, its row
	// kept for the next start.
	proxy.Blackhole()
	last := testenv.InsertEach(e, 1, "c-")
	time.Sleep(500 * time.Millisecond)
	stopAt := time.Now()
	r.Stop()
	took := time.Since(stopAt)
	t.Logf("stopped %s after the signal with a batch waiting", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Fatalf("stopping took %s with a batch waiting, ShutdownTimeout is %s", took.Round(time.Millisecond), cfg.ShutdownTimeout)
	}
	if got := testenv.Unpublished(e, last...); len(got) != 1 {
		t.Fatal("the abandoned row was marked published")
	}
	proxy.Heal()
	e.Start(cfg)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", last, 30*time.Second)
}

// aliveAt reads when the relay last recorded that it is alive.
func aliveAt(e *testenv.Env) time.Time {
	e.T.Helper()
	var at *time.Time
	if err := e.Conn.QueryRow(context.Background(), "SELECT alive_at FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&at); err != nil {
		e.T.Fatal(err)
	}
	if at == nil {
		return time.Time{}
	}
	return *at
}

// The connection is lost while a poll waits for its answer (here: its
// backend ended while the table is locked; in the nemesis, seed 3
// at-least-once auto, the primary stopped for a failover). The relay
// reconnects and polls on; it used to stop for good with "outbox table lacks
// the polling columns", reading the failed query's missing columns as the
// table's shape.
func TestPollConnectionLostMidPoll(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	p := e.Run(t, "--mode", "poll", "--poll-interval", "50ms")
	first := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"i":1}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", first, 15*time.Second)
	// The row is marked after Kafka's ack, which a consumer can see
	// first: locked before that, the table would hold the mark, not the
	// next poll, and the poll this test ends would never come.
	testenv.Eventually(t, 10*time.Second, "the first row marked published", func() bool { return len(testenv.Unpublished(e, first...)) == 0 })

	// Every backend the lock holds is ended, whatever its statement. The
	// relay may reach the locked table first with another one (a mark,
	// the count of deleted rows); the session it starts again opens with
	// statements of its own on the table, which would meet the lock
	// before any poll, so the lock is let go until the relay polls again,
	// and taken again. The test goes on once a poll was ended.
	conn := e.Connect()
	var ended []string
	pollEnded := func() bool {
		lock, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lock.Rollback(ctx) }() // the lock goes with the transaction
		if _, err := lock.Exec(ctx, "LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		var holder int32
		if err := lock.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&holder); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			rows, err := e.Conn.Query(ctx, `WITH b AS MATERIALIZED (SELECT pid, query FROM pg_stat_activity
WHERE $1 = ANY(pg_blocking_pids(pid))) SELECT query FROM b WHERE pg_terminate_backend(pid)`, holder)
			if err != nil {
				t.Fatal(err)
			}
			queries, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			ended = append(ended, queries...)
			for _, q := range queries {
				if strings.HasPrefix(q, "SELECT * FROM") {
					return true
				}
			}
			if len(queries) > 0 {
				return false // another statement met the lock first
			}
		}
		return false
	}
	for attempt := 1; !pollEnded(); attempt++ {
		if attempt == 5 {
			t.Fatalf("no poll met the lock in %d attempts; ended: %q\n%s", attempt, ended, p.Out)
		}
		polls := strings.Count(p.Out.String(), `"msg":"polling"`)
		testenv.Eventually(t, 30*time.Second, "the relay polling again", func() bool {
			return strings.Count(p.Out.String(), `"msg":"polling"`) > polls
		})
		time.Sleep(200 * time.Millisecond) // past the session's first statements
	}
	t.Logf("ended while waiting for the lock: %q", ended)
	second := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"i":2}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", second, 15*time.Second)
	select {
	case <-p.Done():
		t.Fatalf("the relay exited (%v) after its poll's connection was lost:\n%s", p.Err(), p.Out)
	default:
	}
	if !strings.Contains(p.Out.String(), `"msg":"reconnecting"`) {
		t.Errorf("no reconnect in the log:\n%s", p.Out)
	}
}
