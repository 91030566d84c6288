package replication

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
}

// Defaults fills unset fields.
func (c *PollConfig) Defaults() {
	if c.Table == "" {
		c.Table = "public.outbox"
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
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
	return nil
}

// Poller reads unpublished outbox rows in insertion order and marks them
// published. It never keeps a cursor: a row that is not visible yet (its
// transaction has not committed) simply stays unpublished and is read by a
// later poll, so nothing is skipped however transactions interleave.
type Poller struct {
	conn     *pgx.Conn
	table    Table
	batch    int
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
	ok, err := HasPollingColumns(ctx, conn, table)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoPollingColumns, table)
	}
	p := &Poller{conn: conn, table: table, batch: cfg.BatchSize}
	// Rows from before the polling columns were added have no seq and no
	// txid: they are not polled (and the partial index leaves them out).
	p.query = fmt.Sprintf(`SELECT * FROM %s WHERE %s IS NULL AND %s IS NOT NULL AND %s >= $1::text::xid8 ORDER BY %s LIMIT %d`,
		table.Quoted(), PublishedColumn, SeqColumn, TxIDColumn, SeqColumn, cfg.BatchSize)
	return p, nil
}

// HasPollingColumns tells whether the table has seq, txid and published_at.
func HasPollingColumns(ctx context.Context, conn *pgx.Conn, t Table) (bool, error) {
	// pg_attribute, not information_schema, which hides the columns a
	// role has no privilege on and would blame the table's shape.
	var n int
	err := conn.QueryRow(ctx, `
SELECT count(*) FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = ANY($2) AND attnum > 0 AND NOT attisdropped`,
		t.Quoted(), []string{SeqColumn, TxIDColumn, PublishedColumn}).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up polling columns: %w", err)
	}
	return n == 3, nil
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
		case SeqColumn:
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

// MarkPublished sets published_at on the rows with these seqs.
func (p *Poller) MarkPublished(ctx context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	_, err := p.conn.Exec(ctx, fmt.Sprintf("UPDATE %s SET %s = now() WHERE %s = ANY($1)", p.table.Quoted(), PublishedColumn, SeqColumn), seqs)
	if err != nil {
		return fmt.Errorf("mark published: %w", err)
	}
	return nil
}

// Pending tells whether any unpublished row of a transaction in [floor,
// below) is visible: the handoff back to the WAL waits until there is none.
func (p *Poller) Pending(ctx context.Context, floor, below uint64) (bool, error) {
	var pending bool
	err := p.conn.QueryRow(ctx, fmt.Sprintf(
		`SELECT EXISTS (SELECT 1 FROM %s WHERE %s IS NULL AND %s >= $1::text::xid8 AND %s < $2::text::xid8)`,
		p.table.Quoted(), PublishedColumn, TxIDColumn, TxIDColumn),
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
