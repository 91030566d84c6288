package test

import (
	"context"
	"strconv"
	"testing"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A poll phase counts a position no row holds as unseen only once every
// transaction that may have drawn it has finished. The bound Positions
// reads for that is the next transaction id: the snapshot's xmax is one
// past the last transaction to finish, and a transaction that took its id
// after that and still runs lies at or above it. With xmax, positions of
// rows still being inserted were settled at once, and rows dropped with
// their partition (or truncated) before a poll read them went uncounted.
func TestPositionsNextCoversRunningTransactions(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE outbox (
	id bigserial PRIMARY KEY, aggregatetype text, aggregateid text, type text, payload jsonb,
	seq bigserial, txid xid8 DEFAULT pg_current_xact_id(), published_at timestamptz)`)
	ctx := context.Background()
	p, err := poll.New(ctx, e.Conn, poll.Config{Table: "public.outbox"})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Census()
	seq, err := c.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writer := e.Connect()
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var xidText string
	if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'order', 'o-1', 'Placed', '{}' FROM generate_series(1, 3) RETURNING pg_current_xact_id()::text`).Scan(&xidText); err != nil {
		t.Fatal(err)
	}
	xid, _ := strconv.ParseUint(xidText, 10, 64)
	running, err := c.Positions(ctx, seq, 0)
	if err != nil {
		t.Fatal(err)
	}
	if running.Last != 3 || running.XMin > xid || running.Next <= xid {
		t.Fatalf("positions read while transaction %d runs with seq 1-3: last %d, xmin %d, next %d; want last 3, xmin <= %d < next",
			xid, running.Last, running.XMin, running.Next, xid)
	}
	if again, err := c.Positions(ctx, seq, 0); err != nil || again.XMin >= running.Next {
		t.Fatalf("the transaction runs on, yet a later reading's xmin %d reaches %d (err %v)", again.XMin, running.Next, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if after, err := c.Positions(ctx, seq, 0); err != nil || after.XMin < running.Next {
		t.Fatalf("after the commit, xmin %d, want at least %d (err %v)", after.XMin, running.Next, err)
	}
}
