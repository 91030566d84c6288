package test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// insertOpen begins a transaction on its own connection and inserts a row;
// the caller commits or rolls back.
func insertOpen(e *testenv.Env, r testenv.Row) (id string, commit, rollback func()) {
	e.T.Helper()
	ctx := context.Background()
	conn := e.Connect()
	tx, err := conn.Begin(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, $4) RETURNING id::text`,
		r.AggType, r.AggID, r.Type, r.Payload).Scan(&id); err != nil {
		e.T.Fatal(err)
	}
	return id, func() {
		if err := tx.Commit(ctx); err != nil {
			e.T.Fatal(err)
		}
	}, func() { tx.Rollback(ctx) }
}

// Transactions commit out of insertion order and one rolls back: polling
// publishes every committed row, later commits included, and nothing of the
// rolled-back transaction. The long transaction does not hold back the
// rows of one that committed while it was open.
func TestPollCommitOrderRollbackAndLongTransaction(t *testing.T) {
	e := testenv.New(t)
	e.Start(testenv.PollConfig(e))

	a, commitA, _ := insertOpen(e, testenv.NewRow("order", "a", "Placed", `{"tx":"A"}`))   // lowest seq, commits last
	c, _, rollbackC := insertOpen(e, testenv.NewRow("order", "c", "Placed", `{"tx":"C"}`)) // rolls back
	b := e.Insert(testenv.NewRow("order", "b", "Placed", `{"tx":"B"}`))[0]                 // highest seq, commits first
	first := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 1, 10*time.Second)
	if id := testenv.DecodeEvent(t, first[0]).ID; id != b {
		t.Fatalf("first published %s, want B %s (A and C are still open)", id, b)
	}
	time.Sleep(300 * time.Millisecond) // several polls while A is open
	commitA()
	rollbackC()
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", []string{a, b}, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	recs := testenv.Drain(t, e.Brokers, "outbox.event.order", 0)
	if len(recs) != 2 {
		t.Fatalf("%d records, want exactly B then A", len(recs))
	}
	for _, r := range recs {
		if testenv.DecodeEvent(t, r).ID == c {
			t.Fatal("a row of the rolled-back transaction was published")
		}
	}
	var unpublished int
	e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&unpublished)
	if unpublished != 0 {
		t.Fatalf("%d rows left unmarked", unpublished)
	}
}

// Many writers lock their aggregate (an UPDATE of its row) and then insert
// several events; unrelated transactions take transaction ids meanwhile, so
// xid order differs from commit order. Polling delivers each aggregate's
// events in commit order across thousands of events.
func TestPollOrderUnderContention(t *testing.T) {
	e := testenv.New(t)
	e.Start(testenv.PollConfig(e))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		conn := e.Connect()
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Take an xid, hold it a moment, commit: shifts xids
				// against the commit order of the writers.
				tx, err := conn.Begin(ctx)
				if err != nil {
					return
				}
				tx.Exec(ctx, "SELECT pg_current_xact_id()")
				time.Sleep(2 * time.Millisecond)
				tx.Commit(ctx)
			}
		}()
	}
	load := e.StartLoad(t, 4)
	time.Sleep(4 * time.Second)
	committed := load.Finish()
	close(stop)
	wg.Wait()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	t.Logf("%v", rep)
	if rep.Committed < 1000 {
		t.Fatalf("only %d events; the test needs thousands", rep.Committed)
	}
	// The same rows in transaction-id order, as an xid-ordered poller would
	// publish them: a writer takes its xid before it waits for the lock,
	// so xid order and commit order differ.
	var xidMisordered int
	if err := e.Conn.QueryRow(context.Background(), `SELECT count(*) FROM (
  SELECT (payload->>'seq')::int AS s,
         lag((payload->>'seq')::int) OVER (PARTITION BY aggregateid ORDER BY txid, seq) AS prev
  FROM outbox WHERE aggregatetype = 'account') x WHERE s < prev`).Scan(&xidMisordered); err != nil {
		t.Fatal(err)
	}
	t.Logf("in transaction-id order, %d events would have been out of commit order", xidMisordered)
	if rep.Lost != 0 || rep.OrderViolations != 0 || rep.Duplicates != 0 {
		t.Fatalf("lost %d, order violations %d, duplicates %d", rep.Lost, rep.OrderViolations, rep.Duplicates)
	}
}
