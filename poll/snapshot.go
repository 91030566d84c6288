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

// Order is the order a snapshot reads a table's rows in. Rows with a
// Column value go out in its order, after the rows without one (all of
// them when Column is ""): those go by Time when the table has that
// column, then as they lie in the table, which is how Debezium's snapshot
// reads a table (a SELECT without ORDER BY).
//
// Only Column is an insertion order. Time orders an aggregate's events as
// their times do. The physical order is the insertion order of a table
// that one session at a time appended to; concurrent writers fill pages
// side by side, an UPDATE moves a row, and an INSERT may take space VACUUM
// freed anywhere in the table.
type Order struct {
	// Column is the table's insertion order: the order column polling
	// reads, or the table's own identity or serial column; "" for none.
	Column string
	// Partial: rows may lack Column (it was added to a table that had
	// rows); they go first.
	Partial bool
	// Time is the timestamp column the rows without Column are read by;
	// "" for none.
	Time string
}

// String names the order, for the log.
func (o Order) String() string {
	rest := "physical"
	if o.Time != "" {
		rest = o.Time + ", then physical"
	}
	switch {
	case o.Column == "":
		return rest
	case o.Partial:
		return "rows without " + o.Column + " first (" + rest + "), then " + o.Column
	}
	return o.Column
}

// Kept tells whether the order is an insertion order for every row: an
// aggregate's events then go out in the order they were inserted.
func (o Order) Kept() bool { return o.Column != "" && !o.Partial }

// Promise says what the order means for an aggregate's events, for the
// log.
func (o Order) Promise() string {
	switch {
	case o.Kept():
		return "insertion order"
	case o.Time != "":
		return "the order of their " + o.Time + " values (events of one transaction as stored); not their commit order where a transaction began before the one it waited for committed"
	}
	return "not promised: the order they were inserted in only where one session at a time inserted them and no row was updated or written into space VACUUM freed"
}

// SnapshotOrder picks the order a snapshot reads the table in: the
// insertion order polling uses (preferred) when every row has it, else the
// table's own identity or serial column, else preferred with the rows
// that lack it first (they were there before it was added). Rows without
// an insertion order are read by timeColumn when the table has it as a
// timestamp ("" for none), then physically.
func SnapshotOrder(ctx context.Context, conn *pgx.Conn, t outbox.Table, preferred, timeColumn string) (Order, error) {
	rows, err := conn.Query(ctx, `
SELECT attname::text, attnotnull, attidentity <> '' OR pg_get_serial_sequence($1, attname) IS NOT NULL,
  atttypid IN ('timestamp'::regtype, 'timestamptz'::regtype)
FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, t.Quoted())
	if err != nil {
		return Order{}, fmt.Errorf("look up the columns of %s: %w", t, err)
	}
	type column struct {
		name                   string
		notNull, ordered, time bool
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.name, &c.notNull, &c.ordered, &c.time)
	})
	if err != nil {
		return Order{}, fmt.Errorf("look up the columns of %s: %w", t, err)
	}
	var o Order
	var pref *column
	for i, c := range cols {
		if c.name == preferred {
			pref = &cols[i]
		}
		if c.name == timeColumn && c.time {
			o.Time = c.name
		}
	}
	if pref != nil && pref.notNull {
		return Order{Column: pref.name}, nil
	}
	for _, c := range cols {
		if c.ordered && c.notNull {
			return Order{Column: c.name}, nil
		}
	}
	if pref != nil {
		o.Column, o.Partial = pref.name, true
	}
	return o, nil
}

// SnapshotReader reads a table's rows as an exported snapshot sees them, in
// an Order, a batch at a time, through cursors: memory holds one batch
// whatever the table's size.
type SnapshotReader struct {
	tx       pgx.Tx
	table    outbox.Table
	order    string
	fetches  []string // one per cursor, read in turn
	relation *outbox.Relation
	orderIdx int
	n        int64
}

// OpenSnapshot imports snapshot on conn, which it uses for one transaction
// and does not own, and opens cursors over the table's rows where the SQL
// condition where holds ("": all of them; see Unmarked), in order. The
// transaction only reads: it takes no lock but the one every SELECT takes,
// which blocks only DDL. Close ends it.
func OpenSnapshot(ctx context.Context, conn *pgx.Conn, snapshot string, t outbox.Table, order Order, where string, batch int) (*SnapshotReader, error) {
	if batch < 1 {
		batch = 500
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", t, err)
	}
	rd := &SnapshotReader{tx: tx, table: t, order: order.Column}
	if err := rd.declare(ctx, snapshot, order, where, batch); err != nil {
		tx.Rollback(context.Background())
		return nil, fmt.Errorf("snapshot of %s: %w", t, err)
	}
	return rd, nil
}

// physicalScan makes the plans made after it in the transaction read a
// table as it lies on disk, from its first page: a sequential scan (no
// index decides the order) that does not join another scan of the table
// midway (synchronize_seqscans); partitions one after the other, in the
// order of their bounds.
var physicalScan = []string{"synchronize_seqscans", "enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan", "enable_tidscan"}

// declare imports the snapshot and declares the cursors, read in turn:
// the rows without an insertion order, then those with one. The ordered
// cursor is declared first, so that it is planned with the server's
// settings.
func (s *SnapshotReader) declare(ctx context.Context, snapshot string, o Order, where string, batch int) error {
	if _, err := s.tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapshot)); err != nil {
		return fmt.Errorf("import snapshot: %w", err)
	}
	if where == "" {
		where = "true"
	}
	rows := fmt.Sprintf("SELECT * FROM %s WHERE (%s)", s.table.Quoted(), where)
	col := pgx.Identifier{o.Column}.Sanitize()
	if o.Column != "" {
		q := rows
		if o.Partial {
			q += " AND " + col + " IS NOT NULL"
		}
		fetch, err := s.cursor(ctx, "pgoutbox_snapshot", q+" ORDER BY "+col, batch)
		if err != nil {
			return err
		}
		s.fetches = append(s.fetches, fetch)
	}
	if o.Column != "" && !o.Partial {
		return nil
	}
	q := rows
	if o.Partial {
		q += " AND " + col + " IS NULL"
	}
	if o.Time != "" {
		q += fmt.Sprintf(" ORDER BY %s NULLS FIRST, ctid", pgx.Identifier{o.Time}.Sanitize())
	}
	for _, name := range physicalScan {
		if _, err := s.tx.Exec(ctx, "SELECT set_config($1, 'off', true)", name); err != nil {
			return err
		}
	}
	fetch, err := s.cursor(ctx, "pgoutbox_snapshot_first", q, batch)
	if err != nil {
		return err
	}
	s.fetches = append([]string{fetch}, s.fetches...)
	return nil
}

// cursor declares the cursor name over query and returns the statement
// that reads its next batch rows.
func (s *SnapshotReader) cursor(ctx context.Context, name, query string, batch int) (string, error) {
	if _, err := s.tx.Exec(ctx, "DECLARE "+name+" NO SCROLL CURSOR FOR "+query); err != nil {
		return "", err
	}
	return fmt.Sprintf("FETCH FORWARD %d FROM %s", batch, name), nil
}

// Next returns the next batch of rows; none at the end. A row's Seq is its
// order value when that is an integer, else its place in the snapshot.
func (s *SnapshotReader) Next(ctx context.Context) ([]Row, error) {
	for len(s.fetches) > 0 {
		rows, err := s.next(ctx, s.fetches[0])
		if err != nil || len(rows) > 0 {
			return rows, err
		}
		s.fetches = s.fetches[1:]
	}
	return nil, nil
}

func (s *SnapshotReader) next(ctx context.Context, fetch string) ([]Row, error) {
	res := s.tx.Conn().PgConn().ExecParams(ctx, fetch, nil, nil, nil, nil)
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
// again; "" (every row) for a table without the column or with
// SnapshotAll. With HistoryAfter,
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
	if !has || cfg.SnapshotAll {
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
