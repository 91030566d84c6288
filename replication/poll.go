package replication

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Polling columns: insertion order, the writing transaction, and the mark
// the poller sets once Kafka acknowledged a row.
const (
	SeqColumn       = "seq"
	TxIDColumn      = "txid"
	PublishedColumn = "published_at"
)

// ErrNoPollingColumns means the outbox table lacks seq, txid or
// published_at; pgoutbox migrate adds them.
var ErrNoPollingColumns = errors.New("outbox table lacks the polling columns (seq, txid, published_at): run pgoutbox migrate")

// PollConfig configures a Poller.
type PollConfig struct {
	// Table is the outbox table, "schema.table".
	Table string
	// BatchSize is the most rows one poll reads (default 500).
	BatchSize int
	// Order is the column that gives insertion order: an integer assigned
	// at insert that only grows, seq (default) or a table's own bigserial
	// or identity id.
	Order string
	// Status, when set, is the table's own status column, as a team's
	// poller keeps it: rows whose Status is StatusPending are unpublished,
	// and publishing sets it to StatusPublished (and ProcessedAt, when
	// set, to now()) instead of published_at.
	Status, StatusPending, StatusPublished string
	ProcessedAt                            string
}

// Defaults fills unset fields.
func (c *PollConfig) Defaults() {
	if c.Table == "" {
		c.Table = "public.outbox"
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.Order == "" {
		c.Order = SeqColumn
	}
}

// Validate reports the first invalid field.
func (c PollConfig) Validate() error {
	if _, err := ParseTable(c.Table); err != nil {
		return err
	}
	if c.BatchSize < 1 || c.BatchSize > 100_000 {
		return fmt.Errorf("batch size %d: must be between 1 and 100000", c.BatchSize)
	}
	if c.Status == "" {
		if c.StatusPending != "" || c.StatusPublished != "" || c.ProcessedAt != "" {
			return errors.New("status values and the processed-at column need a status column (--column-status)")
		}
		return nil
	}
	if c.StatusPending == "" || c.StatusPublished == "" {
		return errors.New("a status column needs its pending and published values (--status-pending, --status-published)")
	}
	if c.StatusPending == c.StatusPublished {
		return fmt.Errorf("status values: pending and published are both %q", c.StatusPending)
	}
	return nil
}

// columns are the columns polling reads or writes besides the event's.
func (c PollConfig) columns() []string {
	cols := []string{c.Order, TxIDColumn}
	if c.Status != "" {
		cols = append(cols, c.Status)
		if c.ProcessedAt != "" {
			cols = append(cols, c.ProcessedAt)
		}
	} else {
		cols = append(cols, PublishedColumn)
	}
	return cols
}

// Unpublished is the SQL condition that selects the rows polling has yet to
// publish, with floor the SQL expression of the published floor (an xid8).
// Rows from before the polling columns were added have no txid: by the
// published mark they are history and never polled; by a status column
// they are polled when pending, which is how a team's own poller is taken
// over.
func (c PollConfig) Unpublished(floor string) string {
	txid := pgx.Identifier{TxIDColumn}.Sanitize()
	if c.Status != "" {
		return fmt.Sprintf("%s = %s AND (%s IS NULL OR %s >= %s)",
			pgx.Identifier{c.Status}.Sanitize(), quoteLiteral(c.StatusPending), txid, txid, floor)
	}
	return fmt.Sprintf("%s IS NULL AND %s IS NOT NULL AND %s >= %s",
		pgx.Identifier{PublishedColumn}.Sanitize(), pgx.Identifier{c.Order}.Sanitize(), txid, floor)
}

// quoteLiteral quotes s as an SQL string literal whatever
// standard_conforming_strings is, as libpq's PQescapeLiteral does.
func quoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

// Poller reads unpublished outbox rows in insertion order and marks them
// published. It never keeps a cursor: a row that is not visible yet (its
// transaction has not committed) simply stays unpublished and is read by a
// later poll, so nothing is skipped however transactions interleave.
type Poller struct {
	conn     *pgx.Conn
	cfg      PollConfig
	table    Table
	relation *Relation
	seqIdx   int
	txidIdx  int
	query    string
}

// NewPoller prepares polling over conn, which it uses but does not own.
func NewPoller(ctx context.Context, conn *pgx.Conn, cfg PollConfig) (*Poller, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	table, _ := ParseTable(cfg.Table)
	ok, err := cfg.HasColumns(ctx, conn)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s needs %s", ErrNoPollingColumns, table, strings.Join(cfg.columns(), ", "))
	}
	p := &Poller{conn: conn, cfg: cfg, table: table}
	p.query = fmt.Sprintf(`SELECT * FROM %s WHERE %s ORDER BY %s LIMIT %d`,
		table.Quoted(), cfg.Unpublished("$1::text::xid8"), pgx.Identifier{cfg.Order}.Sanitize(), cfg.BatchSize)
	return p, nil
}

// HasColumns tells whether the table has the columns polling needs: the
// order column, txid, and published_at or the status column.
func (c PollConfig) HasColumns(ctx context.Context, conn *pgx.Conn) (bool, error) {
	c.Defaults()
	t, err := ParseTable(c.Table)
	if err != nil {
		return false, err
	}
	// pg_attribute, not information_schema, which hides the columns a
	// role has no privilege on and would blame the table's shape.
	want := c.columns()
	var n int
	err = conn.QueryRow(ctx, `
SELECT count(DISTINCT attname) FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = ANY($2) AND attnum > 0 AND NOT attisdropped`,
		t.Quoted(), want).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up polling columns: %w", err)
	}
	return n == len(uniq(want)), nil
}

func uniq(s []string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, v := range s {
		m[v] = true
	}
	return m
}

// HasPollingColumns tells whether the table has seq, txid and published_at.
func HasPollingColumns(ctx context.Context, conn *pgx.Conn, t Table) (bool, error) {
	return PollConfig{Table: t.String()}.HasColumns(ctx, conn)
}

// PolledRow is a row read by Poll: a Change of KindRow plus what marking it
// published needs.
type PolledRow struct {
	Change
	Seq int64
}

// Poll reads up to BatchSize visible, unpublished rows written by
// transactions at or above floor (the WAL mode's published floor), in
// insertion order. Values are copied: they stay valid after the next Poll.
func (p *Poller) Poll(ctx context.Context, floor uint64) ([]PolledRow, error) {
	res := p.conn.PgConn().ExecParams(ctx, p.query, [][]byte{[]byte(strconv.FormatUint(floor, 10))}, nil, nil, nil)
	fields := res.FieldDescriptions()
	if err := p.bind(fields); err != nil {
		res.Close()
		return nil, err
	}
	now := time.Now()
	var rows []PolledRow
	for res.NextRow() {
		raw := res.Values()
		size := 0
		for _, v := range raw {
			size += len(v)
		}
		buf := make([]byte, 0, size)
		values := make([][]byte, len(raw))
		for i, v := range raw {
			if v == nil {
				continue
			}
			off := len(buf)
			buf = append(buf, v...)
			values[i] = buf[off:len(buf):len(buf)]
		}
		seq, err := strconv.ParseInt(string(values[p.seqIdx]), 10, 64)
		if err != nil {
			res.Close()
			return nil, fmt.Errorf("poll: seq %q: %w", values[p.seqIdx], err)
		}
		txid, _ := strconv.ParseUint(string(values[p.txidIdx]), 10, 64)
		rows = append(rows, PolledRow{
			Change: Change{Kind: KindRow, XID: uint32(txid), CommitTime: now, Relation: p.relation, Values: values},
			Seq:    seq,
		})
	}
	if _, err := res.Close(); err != nil {
		return nil, fmt.Errorf("poll %s: %w", p.table, err)
	}
	return rows, nil
}

// bind (re)builds the relation from the result's columns, by name, so an
// ALTER TABLE between polls is picked up like a Relation message.
func (p *Poller) bind(fields []pgconn.FieldDescription) error {
	if p.relation != nil && len(p.relation.Columns) == len(fields) {
		same := true
		for i, f := range fields {
			if p.relation.Columns[i].Name != f.Name || p.relation.Columns[i].TypeOID != f.DataTypeOID {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	rel := &Relation{Schema: p.table.Schema, Name: p.table.Name, Columns: make([]Column, len(fields))}
	p.seqIdx, p.txidIdx = -1, -1
	for i, f := range fields {
		rel.Columns[i] = Column{Name: f.Name, TypeOID: f.DataTypeOID}
		switch f.Name {
		case p.cfg.Order:
			p.seqIdx = i
		case TxIDColumn:
			p.txidIdx = i
		}
	}
	if p.seqIdx < 0 || p.txidIdx < 0 {
		return fmt.Errorf("%w: %s", ErrNoPollingColumns, p.table)
	}
	p.relation = rel
	return nil
}

// MarkPublished marks the rows with these order values published: it sets
// published_at, or the status column (and processed-at) of a pending row.
func (p *Poller) MarkPublished(ctx context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	order := pgx.Identifier{p.cfg.Order}.Sanitize()
	q := fmt.Sprintf("UPDATE %s SET %s = now() WHERE %s = ANY($1)", p.table.Quoted(), pgx.Identifier{PublishedColumn}.Sanitize(), order)
	if c := p.cfg; c.Status != "" {
		set := pgx.Identifier{c.Status}.Sanitize() + " = " + quoteLiteral(c.StatusPublished)
		if c.ProcessedAt != "" {
			set += ", " + pgx.Identifier{c.ProcessedAt}.Sanitize() + " = now()"
		}
		q = fmt.Sprintf("UPDATE %s SET %s WHERE %s = ANY($1) AND %s = %s", p.table.Quoted(), set, order,
			pgx.Identifier{c.Status}.Sanitize(), quoteLiteral(c.StatusPending))
	}
	if _, err := p.conn.Exec(ctx, q, seqs); err != nil {
		return fmt.Errorf("mark published: %w", err)
	}
	return nil
}

// Pending tells whether any unpublished row of a transaction in [floor,
// below) is visible: the handoff back to the WAL waits until there is none.
// Pending rows from before the polling columns (no txid) count too.
func (p *Poller) Pending(ctx context.Context, floor, below uint64) (bool, error) {
	var pending bool
	txid := pgx.Identifier{TxIDColumn}.Sanitize()
	err := p.conn.QueryRow(ctx, fmt.Sprintf(
		`SELECT EXISTS (SELECT 1 FROM %s WHERE %s AND (%s IS NULL OR %s < $2::text::xid8))`,
		p.table.Quoted(), p.cfg.Unpublished("$1::text::xid8"), txid, txid),
		strconv.FormatUint(floor, 10), strconv.FormatUint(below, 10)).Scan(&pending)
	if err != nil {
		return false, fmt.Errorf("check pending rows: %w", err)
	}
	return pending, nil
}

// Snapshot reads the current snapshot's xmin and xmax, and the WAL insert
// position read after them: every transaction below xmin had finished
// before that position.
func Snapshot(ctx context.Context, conn *pgx.Conn) (xmin, xmax uint64, lsn string, err error) {
	var smin, smax string
	err = conn.QueryRow(ctx, `SELECT pg_snapshot_xmin(s)::text, pg_snapshot_xmax(s)::text, pg_current_wal_insert_lsn()::text
FROM pg_current_snapshot() AS s`).Scan(&smin, &smax, &lsn)
	if err != nil {
		return 0, 0, "", fmt.Errorf("read snapshot: %w", err)
	}
	if xmin, err = strconv.ParseUint(smin, 10, 64); err != nil {
		return 0, 0, "", err
	}
	if xmax, err = strconv.ParseUint(smax, 10, 64); err != nil {
		return 0, 0, "", err
	}
	return xmin, xmax, lsn, nil
}
