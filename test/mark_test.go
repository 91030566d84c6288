package test

import (
	"context"
	"testing"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// When an exactly-once relay falls back from the WAL to polling, it marks
// the rows the WAL published, named by the transactions its last Kafka
// transaction lists (up to 20,000), among every row the WAL left
// unmarked since the floor. That statement must not grow with rows ×
// transactions: searched element by element it took 4 s for 40,000 rows
// and 2,200 transactions on an idle machine, and a stuck relay at larger
// sizes (its 30 s timeout, again at every retry). Here 100,000 rows and
// 5,000 transactions, under a statement timeout two orders of magnitude
// above what the statement needs when the list is hashed.
func TestMarkTransactionsManyListed(t *testing.T) {
	const rows, listed = 100_000, 5_000
	// Two rows per transaction; transactions from 1,000,000 up.
	e, p := markedTable(t, `SELECT 'order', 'o-' || g % 100, 'placed', '{}', g, (1000000 + g / 2)::text::xid8, NULL::timestamptz
FROM generate_series(0, $1 - 1) g`, rows)
	ctx := context.Background()
	// Every other transaction of the last 2*listed, as the WAL lists them
	// (the transaction id's low 32 bits).
	xids := make([]uint32, 0, listed)
	last := uint32(1000000 + (rows-1)/2)
	for i := 0; i < listed; i++ {
		xids = append(xids, last-uint32(2*i))
	}
	if _, err := e.Conn.Exec(ctx, `SET statement_timeout = '10s'`); err != nil {
		t.Fatal(err)
	}
	n, err := p.MarkTransactions(ctx, outbox.Floor{XID: 1000000}, 0, xids)
	if err != nil {
		t.Fatalf("mark %d listed transactions among %d rows: %v", listed, rows, err)
	}
	if n != 2*listed {
		t.Errorf("marked %d rows, want %d (two per listed transaction)", n, 2*listed)
	}
	var left int
	if err := e.Conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != rows-2*listed {
		t.Errorf("%d rows left unmarked, want %d", left, rows-2*listed)
	}
}

// Polling marks each batch by its order values. A ledger keeps years of
// published rows beside the few it polls: the mark must find the batch
// through the index of unpublished rows, not read the whole table for
// every batch (100 ms a batch at a million rows, growing with the table).
func TestMarkPublishedReadsOnlyUnpublished(t *testing.T) {
	const rows, unpublished, batch = 200_000, 1_000, 500
	e, p := markedTable(t, `SELECT 'order', 'o-' || g % 100, 'placed', '{}', g, (1000000 + g)::text::xid8, CASE WHEN g < $1 - $2 THEN now() END
FROM generate_series(0, $1 - 1) g`, rows, unpublished)
	ctx := context.Background()
	seqs := make([]int64, batch)
	for i := range seqs {
		seqs[i] = int64(rows - unpublished + i)
	}
	// pg_stat_xact_user_tables counts this session's scans not yet
	// reported (the index build's among them): the mark's are the
	// difference across it, in one transaction.
	scans := func() (seq, idx int64) {
		t.Helper()
		if err := e.Conn.QueryRow(ctx, `SELECT seq_scan, coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables WHERE relid = 'outbox'::regclass`).Scan(&seq, &idx); err != nil {
			t.Fatal(err)
		}
		return seq, idx
	}
	if _, err := e.Conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	seq0, idx0 := scans()
	if err := p.MarkPublished(ctx, seqs); err != nil {
		t.Fatal(err)
	}
	seq1, idx1 := scans()
	if _, err := e.Conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	seqScans, idxScans := seq1-seq0, idx1-idx0
	if seqScans != 0 || idxScans == 0 {
		t.Errorf("marking %d of %d rows: %d scans of the whole table, %d index scans; want none and at least one", batch, rows, seqScans, idxScans)
	}
	var left int
	if err := e.Conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != unpublished-batch {
		t.Errorf("%d rows left unmarked, want %d", left, unpublished-batch)
	}
}

// markedTable is an outbox table with the polling columns and the index
// migrate builds, filled by rows (a SELECT of its columns from aggregatetype
// to published_at, with args) and analyzed, and a poller over it.
func markedTable(t *testing.T, rows string, args ...any) (*testenv.Env, *poll.Poller) {
	t.Helper()
	e := testenv.NewBare(t, `CREATE TABLE outbox (
	id bigserial PRIMARY KEY, aggregatetype text, aggregateid text, type text, payload jsonb,
	seq bigint, txid xid8, published_at timestamptz)`)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, seq, txid, published_at) `+rows, args...); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Conn.Exec(ctx, `CREATE INDEX ON outbox (seq) WHERE published_at IS NULL; ANALYZE outbox`); err != nil {
		t.Fatal(err)
	}
	p, err := poll.New(ctx, e.Conn, poll.Config{Table: "public.outbox"})
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}
