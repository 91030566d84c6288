package test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// retentionCase runs one mode: old published rows go, a recent published
// row stays, and old rows the relay has not published (the broker is down)
// stay until they are published, then go. pre are old rows that must stay
// whatever happens.
func retentionCase(t *testing.T, e *testenv.Env, broker *kafkatest.Devbroker, cfg relay.Config, waitPublished func(ids []string), pre []string) {
	cfg.Operations.Retention = 24 * time.Hour
	cfg.Operations.RetentionInterval = 100 * time.Millisecond
	cfg.ShutdownTimeout = time.Second // polling: a batch the broker cannot take fails fast
	e.Start(cfg)

	published := testenv.InsertEach(e, 3, "a-")
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", published, 15*time.Second)
	waitPublished(published)

	broker.Kill()
	unpublished := testenv.InsertEach(e, 3, "b-")
	testenv.Backdate(e, append(published[:2], unpublished...)...)
	testenv.Eventually(t, 15*time.Second, "the old published rows deleted", func() bool {
		p := testenv.Present(e, published...)
		return !p[published[0]] && !p[published[1]]
	})
	time.Sleep(2 * time.Second) // many retention runs with the broker still down
	p := testenv.Present(e, append(append([]string{published[2]}, unpublished...), pre...)...)
	for _, id := range append(append([]string{published[2]}, unpublished...), pre...) {
		if !p[id] {
			t.Fatalf("retention deleted %s, a row that is recent or not published", id)
		}
	}

	broker.Start()
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", append(published, unpublished...), 60*time.Second)
	testenv.Eventually(t, 30*time.Second, "the old rows deleted once published", func() bool {
		p := testenv.Present(e, unpublished...)
		return len(p) == 0
	})
	p = testenv.Present(e, append([]string{published[2]}, pre...)...)
	if len(p) != 1+len(pre) {
		t.Fatalf("after the outage, %d of the recent and never-published rows are left, want %d", len(p), 1+len(pre))
	}
}

// Polling: a row is known published once published_at is set on it, if
// it was written since the polling columns.
func TestOpsRetentionPolling(t *testing.T) {
	e := testenv.New(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.Brokers = broker.Brokers
	cfg := testenv.PollConfig(e)
	// Rows from before the polling columns (no txid) that a team's own
	// poller marked with the table's published_at: not pgoutbox's to know
	// published, so they stay.
	history := testenv.InsertEach(e, 2, "h-")
	testenv.Backdate(e, history...)
	if _, err := e.Conn.Exec(context.Background(), `ALTER TABLE outbox ALTER COLUMN txid DROP NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Conn.Exec(context.Background(), `UPDATE outbox SET txid = NULL, published_at = now() - interval '29 days' WHERE id::text = ANY($1)`, history); err != nil {
		t.Fatal(err)
	}
	retentionCase(t, e, broker, cfg, func(ids []string) {
		testenv.Eventually(t, 10*time.Second, "rows marked published", func() bool {
			var n int
			e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE published_at IS NULL AND id::text = ANY($1)", ids).Scan(&n)
			return n == 0
		})
	}, history)
}

// WAL mode: a row is known published once its transaction is below the
// persisted floor, and at or above wal_start_xid. A row committed before
// the slot existed was never published by the WAL and must stay, even
// below the floor.
func TestOpsRetentionWAL(t *testing.T) {
	e := testenv.New(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.Brokers = broker.Brokers
	cfg := e.Config()
	cfg.Mode = relay.ModeWAL
	preSlot := e.Insert(testenv.NewRow("order", "pre", "Placed", `{}`))
	testenv.Backdate(e, preSlot...)
	e.Setup(cfg)
	retentionCase(t, e, broker, cfg, func(ids []string) {
		testenv.Eventually(t, 15*time.Second, "the floor passing the rows", func() bool {
			var below bool
			e.Conn.QueryRow(context.Background(), `SELECT bool_and(o.txid < s.floor_xid AND o.txid >= s.wal_start_xid)
FROM outbox o, pgoutbox_state s WHERE s.pipeline = 'pgoutbox' AND o.id::text = ANY($1)`, ids).Scan(&below)
			return below
		})
	}, preSlot)
}

// TestRetentionOffByDefault runs the binary as a user would, without
// --retention, over a table that holds old published rows: they are the
// user's and stay. The same run with --retention deletes them, so the
// test would see a deletion if the default made one.
func TestRetentionOffByDefault(t *testing.T) {
	e := testenv.New(t)
	ids := testenv.InsertEach(e, 20, "keep-")
	testenv.Backdate(e, ids...)
	if _, err := e.Conn.Exec(context.Background(), "UPDATE outbox SET published_at = now() - interval '29 days' WHERE id::text = ANY($1)", ids); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--mode", "poll", "--poll-interval", "50ms", "--retention-interval", "100ms")
	fresh := testenv.InsertEach(e, 3, "fresh-")
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", fresh, 30*time.Second)
	time.Sleep(time.Second) // ten retention intervals
	if got := testenv.Present(e, ids...); len(got) != len(ids) {
		t.Fatalf("without --retention, %d of %d old published rows were deleted", len(ids)-len(got), len(ids))
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("pgoutbox run: %v", err)
	}

	e.Run(t, "--mode", "poll", "--poll-interval", "50ms", "--retention", "24h", "--retention-interval", "100ms")
	testenv.Eventually(t, 30*time.Second, "--retention 24h to delete the old published rows", func() bool {
		return len(testenv.Present(e, ids...)) == 0
	})
}
