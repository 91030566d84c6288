package poll

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// SnapshotOrder picks the column a snapshot reads the table in: the
// insertion order polling uses (preferred) when every row has it, else the
// table's own identity or serial column, else preferred with the rows that
// lack it first (they were there before it was added). unordered says that
// rows without preferred are read in no particular order among themselves.
func SnapshotOrder(ctx context.Context, conn *pgx.Conn, t outbox.Table, preferred string) (col string, unordered bool, err error) {
	rows, err := conn.Query(ctx, `
SELECT attname::text, attnotnull, attidentity <> '' OR pg_get_serial_sequence($1, attname) IS NOT NULL
FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, t.Quoted())
	if err != nil {
		return "", false, fmt.Errorf("look up the columns of %s: %w", t, err)
	}
	type column struct {
		name             string
		notNull, ordered bool
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.name, &c.notNull, &c.ordered)
	})
	if err != nil {
		return "", false, fmt.Errorf("look up the columns of %s: %w", t, err)
	}
	var pref *column
	for i, c := range cols {
		if c.name == preferred {
			pref = &cols[i]
		}
	}
	if pref != nil && pref.notNull {
		return pref.name, false, nil
	}
	for _, c := range cols {
		if c.ordered && c.notNull {
			return c.name, false, nil
		}
	}
	if pref != nil {
		return pref.name, true, nil
	}
	return "", false, fmt.Errorf("%w: %s has no column %s and no identity or serial column; name its insertion order with --column-order",
		ErrNoSnapshotOrder, t, preferred)
}

// SnapshotReader reads a table's rows as an exported snapshot sees them, in
// insertion order, a batch at a time, through a cursor: memory holds one
// batch whatever the table's size.
type SnapshotReader struct {
	tx       pgx.Tx
	table    outbox.Table
	order    string
	fetch    string
	relation *outbox.Relation
	orderIdx int
	n        int64
}

const snapshotCursor = "pgoutbox_snapshot"

// OpenSnapshot imports snapshot on conn, which it uses for one transaction
// and does not own, and opens a cursor over the table's rows where the SQL
// condition where holds ("": all of them; see Unmarked), in order (rows
// without an order value first). Close ends the transaction.
func OpenSnapshot(ctx context.Context, conn *pgx.Conn, snapshot string, t outbox.Table, order, where string, batch int) (*SnapshotReader, error) {
	if batch < 1 {
		batch = 500
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", t, err)
	}
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapshot)); err != nil {
		tx.Rollback(context.Background())
		return nil, fmt.Errorf("snapshot of %s: import snapshot: %w", t, err)
	}
	if where == "" {
		where = "true"
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("DECLARE %s NO SCROLL CURSOR FOR SELECT * FROM %s WHERE %s ORDER BY %s NULLS FIRST",
		snapshotCursor, t.Quoted(), where, pgx.Identifier{order}.Sanitize())); err != nil {
		tx.Rollback(context.Background())
		return nil, fmt.Errorf("snapshot of %s: %w", t, err)
	}
	return &SnapshotReader{tx: tx, table: t, order: order, fetch: fmt.Sprintf("FETCH FORWARD %d FROM %s", batch, snapshotCursor)}, nil
}

// Next returns the next batch of rows; none at the end. A row's Seq is its
// order value when that is an integer, else its place in the snapshot.
func (s *SnapshotReader) Next(ctx context.Context) ([]Row, error) {
	res := s.tx.Conn().PgConn().ExecParams(ctx, s.fetch, nil, nil, nil, nil)
	s.bind(res.FieldDescriptions())
	now := time.Now()
	var rows []Row
	for res.NextRow() {
		values := copyValues(res.Values())
		s.n++
		seq := s.n
		if s.orderIdx >= 0 && values[s.orderIdx] != nil {
			if v, err := strconv.ParseInt(string(values[s.orderIdx]), 10, 64); err == nil {
				seq = v
			}
		}
		rows = append(rows, Row{
			Change: outbox.Change{Kind: outbox.KindRow, CommitTime: now, Relation: s.relation, Values: values},
			Seq:    seq,
		})
	}
	if _, err := res.Close(); err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", s.table, err)
	}
	return rows, nil
}

func (s *SnapshotReader) bind(fields []pgconn.FieldDescription) {
	if s.relation != nil || len(fields) == 0 {
		return
	}
	rel := &outbox.Relation{Schema: s.table.Schema, Name: s.table.Name, Columns: make([]schema.Column, len(fields))}
	s.orderIdx = -1
	for i, f := range fields {
		rel.Columns[i] = schema.Column{Name: f.Name, TypeOID: f.DataTypeOID, TypMod: f.TypeModifier}
		if f.Name == s.order {
			s.orderIdx = i
		}
	}
	s.relation = rel
}

// Read is how many rows Next returned.
func (s *SnapshotReader) Read() int64 { return s.n }

// Close ends the snapshot's transaction.
func (s *SnapshotReader) Close(ctx context.Context) error {
	return s.tx.Rollback(ctx)
}

// Unmarked is the condition of the rows a snapshot publishes: those
// without published_at, so that a table that had a published_at of its
// own, set by a team's poller, does not have its published rows sent
// again; "" (every row) for a table without the column. With HistoryAfter,
// only the rows above it of those written before the polling columns.
// (A snapshot with a status column is refused: the status says which rows
// go out.)
func Unmarked(ctx context.Context, conn *pgx.Conn, cfg Config) (string, error) {
	cfg.Defaults()
	t, err := outbox.ParseTable(cfg.Table)
	if err != nil {
		return "", err
	}
	var has bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $2 AND attnum > 0 AND NOT attisdropped)`,
		t.Quoted(), cfg.Published).Scan(&has); err != nil {
		return "", fmt.Errorf("look up the columns of %s: %w", t, err)
	}
	after := ""
	if cfg.HistoryAfter != nil {
		after = fmt.Sprintf("%s > %d", pgx.Identifier{cfg.Order}.Sanitize(), *cfg.HistoryAfter)
	}
	if !has {
		return after, nil
	}
	cond := pgx.Identifier{cfg.Published}.Sanitize() + " IS NULL"
	if after != "" {
		// Only the history is bounded: rows written since the polling
		// columns (a txid) were sent by no one.
		cond += fmt.Sprintf(" AND (%s IS NOT NULL OR %s)", pgx.Identifier{outbox.TxIDColumn}.Sanitize(), after)
	}
	return cond, nil
}
