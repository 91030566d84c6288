package test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// backdate moves rows' created_at a month into the past.
func (e *env) backdate(ids ...string) {
	e.t.Helper()
	if _, err := e.conn.Exec(context.Background(), "UPDATE outbox SET created_at = now() - interval '30 days' WHERE id::text = ANY($1)", ids); err != nil {
		e.t.Fatal(err)
	}
}

// present returns which of ids are still in the table.
func (e *env) present(ids ...string) map[string]bool { return e.idsWhere("true", ids...) }

// idsWhere returns which of ids are in the table with cond true.
func (e *env) idsWhere(cond string, ids ...string) map[string]bool {
	e.t.Helper()
	rows, err := e.conn.Query(context.Background(), "SELECT id::text FROM outbox WHERE ("+cond+") AND id::text = ANY($1)", ids)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func insertEach(e *env, n int, agg string) []string {
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, e.insert(row{"order", fmt.Sprint(agg, i), "Placed", `{}`})...)
	}
	return ids
}

// retentionCase runs one mode: old published rows go, a recent published
// row stays, and old rows the relay has not published (the broker is down)
// stay until they are published, then go. pre are old rows that must stay
// whatever happens.
func retentionCase(t *testing.T, e *env, broker *kafkatest.Devbroker, cfg relay.Config, waitPublished func(ids []string), pre []string) {
	cfg.Operations.Retention = 24 * time.Hour
	cfg.Operations.RetentionInterval = 100 * time.Millisecond
	cfg.ShutdownTimeout = time.Second // polling: a batch the broker cannot take fails fast
	e.start(cfg)

	published := insertEach(e, 3, "a-")
	awaitIDs(t, e.brokers, "outbox.event.order", published, 15*time.Second)
	waitPublished(published)

	broker.Kill()
	unpublished := insertEach(e, 3, "b-")
	e.backdate(append(published[:2], unpublished...)...)
	eventually(t, 15*time.Second, "the old published rows deleted", func() bool {
		p := e.present(published...)
		return !p[published[0]] && !p[published[1]]
	})
	time.Sleep(2 * time.Second) // many retention runs with the broker still down
	p := e.present(append(append([]string{published[2]}, unpublished...), pre...)...)
	for _, id := range append(append([]string{published[2]}, unpublished...), pre...) {
		if !p[id] {
			t.Fatalf("retention deleted %s, a row that is recent or not published", id)
		}
	}

	broker.Start()
	awaitIDs(t, e.brokers, "outbox.event.order", append(published, unpublished...), 60*time.Second)
	eventually(t, 30*time.Second, "the old rows deleted once published", func() bool {
		p := e.present(unpublished...)
		return len(p) == 0
	})
	p = e.present(append([]string{published[2]}, pre...)...)
	if len(p) != 1+len(pre) {
		t.Fatalf("after the outage, %d of the recent and never-published rows are left, want %d", len(p), 1+len(pre))
	}
}

// Polling: a row is known published once published_at is set on it, if
// it was written since the polling columns.
func TestOpsRetentionPolling(t *testing.T) {
	e := newEnv(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.brokers = broker.Brokers
	cfg := pollConfig(e)
	// Rows from before the polling columns (no txid) that a team's own
	// poller marked with the table's published_at: not pgoutbox's to know
	// published, so they stay.
	history := insertEach(e, 2, "h-")
	e.backdate(history...)
	if _, err := e.conn.Exec(context.Background(), `ALTER TABLE outbox ALTER COLUMN txid DROP NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Exec(context.Background(), `UPDATE outbox SET txid = NULL, published_at = now() - interval '29 days' WHERE id::text = ANY($1)`, history); err != nil {
		t.Fatal(err)
	}
	retentionCase(t, e, broker, cfg, func(ids []string) {
		eventually(t, 10*time.Second, "rows marked published", func() bool {
			var n int
			e.conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE published_at IS NULL AND id::text = ANY($1)", ids).Scan(&n)
			return n == 0
		})
	}, history)
}

// WAL mode: a row is known published once its transaction is below the
// persisted floor, and at or above wal_start_xid. A row committed before
// the slot existed was never published by the WAL and must stay, even
// below the floor.
func TestOpsRetentionWAL(t *testing.T) {
	e := newEnv(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.brokers = broker.Brokers
	cfg := e.config()
	cfg.Mode = relay.ModeWAL
	preSlot := e.insert(row{"order", "pre", "Placed", `{}`})
	e.backdate(preSlot...)
	e.setup(cfg)
	retentionCase(t, e, broker, cfg, func(ids []string) {
		eventually(t, 15*time.Second, "the floor passing the rows", func() bool {
			var below bool
			e.conn.QueryRow(context.Background(), `SELECT bool_and(o.txid < s.floor_xid AND o.txid >= s.wal_start_xid)
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
	e := newEnv(t)
	ids := insertEach(e, 20, "keep-")
	e.backdate(ids...)
	if _, err := e.conn.Exec(context.Background(), "UPDATE outbox SET published_at = now() - interval '29 days' WHERE id::text = ANY($1)", ids); err != nil {
		t.Fatal(err)
	}
	p := e.runProcess(t, "--mode", "poll", "--poll-interval", "50ms", "--retention-interval", "100ms")
	fresh := insertEach(e, 3, "fresh-")
	awaitIDs(t, e.brokers, "outbox.event.order", fresh, 30*time.Second)
	time.Sleep(time.Second) // ten retention intervals
	if got := e.present(ids...); len(got) != len(ids) {
		t.Fatalf("without --retention, %d of %d old published rows were deleted", len(ids)-len(got), len(ids))
	}
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("pgoutbox run: %v", err)
	}

	e.runProcess(t, "--mode", "poll", "--poll-interval", "50ms", "--retention", "24h", "--retention-interval", "100ms")
	eventually(t, 30*time.Second, "--retention 24h to delete the old published rows", func() bool {
		return len(e.present(ids...)) == 0
	})
}
