package poll

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// Config configures a Poller.
type Config struct {
	// Table is the outbox table, "schema.table".
	Table string
	// BatchSize is the most rows one poll reads (default 500).
	BatchSize int
	// Order is the column that gives insertion order: an integer assigned
	// at insert that only grows, seq (default) or a table's own bigserial
	// or identity id.
	Order string
	// Status, when set, is the table's own status column, as a team's
	// poller keeps it: rows whose Status is StatusPending (one value, or
	// several comma-separated: PENDING,FAILED) are unpublished, and
	// publishing sets it to StatusPublished (and ProcessedAt, when set, to
	// now()) instead of published_at.
	Status, StatusPending, StatusPublished string
	ProcessedAt                            string
	// Published, without a status column, is the column that marks a row
	// published: null until then, set to now() by polling. published_at
	// (default) is the one pgoutbox migrate adds; another, or published_at
	// with OwnPublished, is the table's own (a team's poller's
	// processed_at), and then, as with a status column, the rows written
	// before the polling columns are polled while it is null.
	Published    string
	OwnPublished bool
	// SnapshotAll makes a snapshot publish every row, also those Published
	// marks, as Debezium's snapshot does (a Debezium configuration).
	SnapshotAll bool
	// HistoryAfter, when set, bounds what a snapshot reads of the rows
	// that were in the table before its polling columns: those whose Order
	// value is above it. A poller that kept a cursor (WHERE id > last)
	// sent the rows up to its last value.
	HistoryAfter *int64
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Table == "" {
		c.Table = "public.outbox"
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.Order == "" {
		c.Order = outbox.SeqColumn
	}
	if c.Published == "" {
		c.Published = outbox.PublishedColumn
	}
}

// OwnMark tells that the table's own column marks published rows (a
// status column, or a published column other than published_at): its
// rows from before the polling columns are polled while it says pending.
func (c Config) OwnMark() bool { return c.Status != "" || c.ownPublished() }

// ownPublished tells that Published is the table's own column.
func (c Config) ownPublished() bool {
	return c.OwnPublished || c.Published != "" && c.Published != outbox.PublishedColumn
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if _, err := outbox.ParseTable(c.Table); err != nil {
		return err
	}
	if c.BatchSize < 1 || c.BatchSize > 100_000 {
		return fmt.Errorf("batch size %d: must be between 1 and 100000", c.BatchSize)
	}
	if c.Status == "" {
		if c.StatusPending != "" || c.StatusPublished != "" || c.ProcessedAt != "" {
			return errors.New("status values and the processed-at column need a status column (--column-status); a timestamp column that alone marks rows published, null until then, is --column-published")
		}
		return nil
	}
	if c.ownPublished() {
		return errors.New("--column-published is for a table without a status column; with one, --column-processed-at names the timestamp set with the published status")
	}
	if c.StatusPending == "" || c.StatusPublished == "" {
		return errors.New("a status column needs its pending and published values (--status-pending, --status-published)")
	}
	for _, v := range c.PendingValues() {
		if v == "" {
			return fmt.Errorf("status values: an empty pending value in %q", c.StatusPending)
		}
		if v == c.StatusPublished {
			return fmt.Errorf("status values: pending and published are both %q", v)
		}
	}
	return nil
}

// PendingValues are the status values of a row not yet published.
func (c Config) PendingValues() []string {
	vs := strings.Split(c.StatusPending, ",")
	for i := range vs {
		vs[i] = strings.TrimSpace(vs[i])
	}
	return vs
}

// pending is the SQL condition of a row not marked published, whatever
// its transaction. c has its defaults.
func (c Config) pending() string {
	if c.Status == "" {
		return "(" + pgx.Identifier{c.Published}.Sanitize() + " IS NULL)"
	}
	return "(" + c.isPending() + ")"
}

// Index is the partial index a poll and the marking of what the WAL
// published read through: on the order column, over the rows pending
// reads (a status column's pending values, or the published mark unset),
// whose conditions every such query carries word for word, so that the
// planner proves the index serves it. ok is false for pgoutbox's own
// mapping (seq, published_at), whose index migrate always builds.
func (c Config) Index() (order, where string, ok bool) {
	c.Defaults()
	if !c.OwnMark() && c.Order == outbox.SeqColumn {
		return "", "", false
	}
	order = pgx.Identifier{c.Order}.Sanitize()
	if c.OwnMark() {
		return order, c.pending(), true
	}
	return order, pgx.Identifier{c.Published}.Sanitize() + " IS NULL AND " + order + " IS NOT NULL", true
}

// isPending is the SQL condition of a status column holding a pending
// value.
func (c Config) isPending() string {
	vs := c.PendingValues()
	if len(vs) == 1 {
		return pgx.Identifier{c.Status}.Sanitize() + " = " + quoteLiteral(vs[0])
	}
	lits := make([]string, len(vs))
	for i, v := range vs {
		lits[i] = quoteLiteral(v)
	}
	return pgx.Identifier{c.Status}.Sanitize() + " IN (" + strings.Join(lits, ", ") + ")"
}

// columns are the columns polling reads or writes besides the event's.
func (c Config) columns() []string {
	cols := []string{c.Order, outbox.TxIDColumn}
	if c.Status != "" {
		cols = append(cols, c.Status)
		if c.ProcessedAt != "" {
			cols = append(cols, c.ProcessedAt)
		}
	} else {
		cols = append(cols, c.Published)
	}
	return cols
}

// floorParams binds a FloorSQL to Floor.params, from $1.
var floorParams = outbox.FloorSQL{XID: "$1::text::xid8", ForeignSeq: "$2::text::bigint", ForeignXID: "$3::text::xid8"}

// Unpublished is the SQL condition that selects the rows polling has yet to
// publish: not marked, and not covered by the floor (see Floor). Rows from
// before the polling columns were added have no txid: by the published
// mark they are history and never polled; by a status column they are
// polled when pending, which is how a team's own poller is taken over.
func (c Config) Unpublished(f outbox.FloorSQL) string {
	c.Defaults()
	txid := pgx.Identifier{outbox.TxIDColumn}.Sanitize()
	order := pgx.Identifier{c.Order}.Sanitize()
	uncovered := fmt.Sprintf("%[1]s >= %[3]s AND (%[4]s IS NULL OR %[2]s > %[4]s OR %[1]s >= %[5]s)",
		txid, order, f.XID, f.ForeignSeq, f.ForeignXID)
	if c.OwnMark() {
		return fmt.Sprintf("%s AND (%s IS NULL OR (%s))", c.pending(), txid, uncovered)
	}
	return fmt.Sprintf("%s IS NULL AND %s IS NOT NULL AND %s",
		pgx.Identifier{c.Published}.Sanitize(), order, uncovered)
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

// source is the outbox table a Poller, its Shape and its Census read, on
// a connection they use but do not own.
type source struct {
	conn  *pgx.Conn
	cfg   Config
	table outbox.Table
}

// Poller reads unpublished outbox rows in insertion order and marks them
// published. It never keeps a cursor: a row that is not visible yet (its
// transaction has not committed) simply stays unpublished and is read by a
// later poll, so nothing is skipped however transactions interleave. What
// the table must be for it is its Shape's to check; what the deleted-row
// detector counts, its Census's.
type Poller struct {
	source
	relation *outbox.Relation
	seqIdx   int
	txidIdx  int
	query    string
	fence    Fence
}

// Shape checks that the table fits polling as configured.
type Shape struct{ source }

// Shape is the poller's table's Shape.
func (p *Poller) Shape() *Shape { return &Shape{p.source} }

// Census reads the positions the deleted-row detector counts
// (positions.go).
type Census struct{ source }

// Census is the poller's table's Census.
func (p *Poller) Census() *Census { return &Census{p.source} }

// Fence guards the statements that mark rows published: Guard is a query
// that yields a row while the poller may write, with its arguments
// numbered from $n, and that keeps what it read from changing until the
// statement's transaction ends (the pipeline's lease, store.Lease).
type Fence interface {
	Guard(n int) (string, []any)
}

// SetFence makes every mark of the poller run under f; nil (the default)
// marks unguarded.
func (p *Poller) SetFence(f Fence) { p.fence = f }

// mark sets markSet on the table's rows where where holds, a condition
// with arguments args ($1 on), under the poller's fence when it has one,
// in one statement: the fence's query and the update share its
// transaction, so nothing is marked once another relay took over, and a
// takeover waits for a mark under way. It returns how many rows it
// marked, or ErrFenced.
func (p *Poller) mark(ctx context.Context, where string, args []any) (int64, error) {
	update := fmt.Sprintf("UPDATE %s SET %s WHERE (%s)", p.table.Quoted(), p.cfg.markSet(), where)
	if p.fence == nil {
		tag, err := p.conn.Exec(ctx, update, args...)
		return tag.RowsAffected(), err
	}
	guard, gargs := p.fence.Guard(len(args) + 1)
	q := fmt.Sprintf(`WITH fence AS (%s), marked AS (%s AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
SELECT EXISTS (SELECT 1 FROM fence), (SELECT count(*) FROM marked)`, guard, update)
	var (
		held bool
		n    int64
	)
	if err := p.conn.QueryRow(ctx, q, append(args, gargs...)...).Scan(&held, &n); err != nil {
		return 0, err
	}
	if !held {
		return 0, outbox.ErrFenced
	}
	return n, nil
}

// New prepares polling over conn, which it uses but does not own.
func New(ctx context.Context, conn *pgx.Conn, cfg Config) (*Poller, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	table, _ := outbox.ParseTable(cfg.Table)
	missing, err := cfg.missingColumns(ctx, conn)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s lacks %s", ErrNoPollingColumns, table, strings.Join(missing, ", "))
	}
	p := &Poller{source: source{conn: conn, cfg: cfg, table: table}}
	p.SetHistory(false)
	return p, nil
}

// Check checks what a poll session needs beyond the columns New checked,
// before it publishes anything: that the order column holds unique
// integers, that txid is the writing transaction, and that the statement
// marking rows published can run. A mark that fails after Kafka acked
// leaves the rows pending, to be sent again; a mark by an order value
// that is not unique marks rows that were never sent.
func (s *Shape) Check(ctx context.Context) error {
	if err := s.checkColumns(ctx); err != nil {
		return err
	}
	return s.checkMark(ctx)
}

// checkColumns checks the order column and txid, which may be a table's
// own columns of those names, not the ones pgoutbox migrate adds.
func (s *Shape) checkColumns(ctx context.Context) error {
	var (
		orderType, txidType string
		integer, unique     bool
	)
	err := s.conn.QueryRow(ctx, `SELECT format_type(a.atttypid, a.atttypmod), a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype),
  a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%', false)
    OR EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indnkeyatts = 1
      AND i.indkey[0] = a.attnum AND i.indpred IS NULL),
  (SELECT format_type(t.atttypid, t.atttypmod) FROM pg_attribute t WHERE t.attrelid = a.attrelid AND t.attname = $3 AND NOT t.attisdropped)
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped`,
		s.table.Quoted(), s.cfg.Order, outbox.TxIDColumn).Scan(&orderType, &integer, &unique, &txidType)
	if err != nil {
		return fmt.Errorf("look up the columns of %s: %w", s.table, err)
	}
	switch {
	case !integer:
		return fmt.Errorf("%w: its order column %s is %s; polling orders and marks rows by an integer that only grows: seq (the default), or the table's own bigserial or identity id (--column-order)",
			ErrColumnsUnfit, s.cfg.Order, orderType)
	case !unique:
		return fmt.Errorf("%w: its order column %s is neither an identity or serial column nor unique by an index of its own, and polling marks the rows it published by it: it would mark rows it never sent. "+
			"Poll by the table's own bigserial or identity id (--column-order), or, if %s is the table's own column and not the one pgoutbox migrate adds, rename it and run pgoutbox migrate",
			ErrColumnsUnfit, s.cfg.Order, s.cfg.Order)
	case txidType != "xid8":
		return fmt.Errorf("%w: its column %s is %s, not the writing transaction (xid8) pgoutbox migrate adds: the table's own %s must be renamed, then pgoutbox migrate run",
			ErrColumnsUnfit, outbox.TxIDColumn, txidType, outbox.TxIDColumn)
	}
	return nil
}

// checkMark plans, without running it, the statement that marks rows
// published: a column type the mark cannot set, a status value the column
// does not take, or a role that may not update the table fails here, and
// not after Kafka acked. (A CHECK constraint or a trigger is only met on
// a row.)
func (s *Shape) checkMark(ctx context.Context) error {
	q := fmt.Sprintf("EXPLAIN UPDATE %s SET %s WHERE %s = ANY('{}'::bigint[]) AND %s",
		s.table.Quoted(), s.cfg.markSet(), pgx.Identifier{s.cfg.Order}.Sanitize(), s.cfg.pending())
	_, err := s.conn.Exec(ctx, q)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &pgErr), !statementError(pgErr.Code):
		// The connection's trouble (terminated, the server shutting
		// down, out of resources) says nothing of the table: the caller
		// tries again.
		return fmt.Errorf("check marking rows of %s published: %w", s.table, err)
	case pgErr.Code == "42501": // insufficient_privilege
		return fmt.Errorf("%w: this role may not update %s, and polling marks the rows it published (GRANT UPDATE ON %s TO the role): %s",
			ErrColumnsUnfit, s.table, s.table.Quoted(), pgErr.Message)
	case s.cfg.Status != "":
		return fmt.Errorf("%w: marking a row published would fail: %s (check --column-status, --status-pending, --status-published and --column-processed-at against the table)",
			ErrColumnsUnfit, pgErr.Message)
	case s.cfg.OwnMark():
		return fmt.Errorf("%w: marking a row published would fail: %s (check --column-published against the table)", ErrColumnsUnfit, pgErr.Message)
	default:
		return fmt.Errorf("%w: marking a row published would fail: %s", ErrColumnsUnfit, pgErr.Message)
	}
}

// statementError tells an error of the statement planned against the
// table (classes 42, syntax error or access rule violation, and 22, data
// exception: a missing column, a type or a status value it does not take,
// no UPDATE privilege) from one of the connection or the server.
func statementError(code string) bool {
	return strings.HasPrefix(code, "42") || strings.HasPrefix(code, "22")
}

// history is the condition of the rows that were in the table before its
// polling columns were added (no txid) and that polling has not marked:
// the table's history, which polling leaves alone unless a snapshot
// (--snapshot-mode initial) asks for it. Rows without an order value are
// not among them: they could not be published in order, or marked.
func (c Config) history() string {
	h := fmt.Sprintf("%s IS NULL AND %s IS NOT NULL AND %s IS NULL", pgx.Identifier{c.Published}.Sanitize(),
		pgx.Identifier{c.Order}.Sanitize(), pgx.Identifier{outbox.TxIDColumn}.Sanitize())
	if c.HistoryAfter != nil {
		h += fmt.Sprintf(" AND %s > %d", pgx.Identifier{c.Order}.Sanitize(), *c.HistoryAfter)
	}
	return h
}

// SetHistory makes Poll read the table's history too (on), in insertion
// order with the other unpublished rows, or not (off, the default). With a
// status column the pending rows of the history are always read, and this
// changes nothing.
func (p *Poller) SetHistory(on bool) {
	where := p.cfg.Unpublished(floorParams)
	if on && !p.cfg.OwnMark() {
		where = "(" + where + ") OR (" + p.cfg.history() + ")"
	}
	p.query = fmt.Sprintf(`SELECT * FROM %s WHERE %s ORDER BY %s LIMIT %d`,
		p.table.Quoted(), where, pgx.Identifier{p.cfg.Order}.Sanitize(), p.cfg.BatchSize)
}

// HistoryLeft tells whether any row of the table's history is unmarked
// (see SetHistory).
func (p *Poller) HistoryLeft(ctx context.Context) (bool, error) {
	var left bool
	if err := p.conn.QueryRow(ctx, fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s WHERE %s)", p.table.Quoted(), p.cfg.history())).Scan(&left); err != nil {
		return false, fmt.Errorf("look for unpublished history in %s: %w", p.table, err)
	}
	return left, nil
}

// Unordered counts the unmarked rows without an order value: polling can
// neither order nor mark them. Rows that were in the table before its
// polling columns have no seq; the table's own bigserial or identity id
// (--column-order) orders them.
func (s *Shape) Unordered(ctx context.Context) (int64, error) {
	var n int64
	if err := s.conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s IS NULL AND %s IS NULL", s.table.Quoted(),
		pgx.Identifier{s.cfg.Published}.Sanitize(), pgx.Identifier{s.cfg.Order}.Sanitize())).Scan(&n); err != nil {
		return 0, fmt.Errorf("look for rows without %s in %s: %w", s.cfg.Order, s.table, err)
	}
	return n, nil
}

// HasColumns tells whether the table has the columns polling needs: the
// order column, txid, and published_at or the status column.
func (c Config) HasColumns(ctx context.Context, conn *pgx.Conn) (bool, error) {
	missing, err := c.missingColumns(ctx, conn)
	return len(missing) == 0, err
}

// missingColumns are the columns polling needs that the table lacks.
func (c Config) missingColumns(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	c.Defaults()
	t, err := outbox.ParseTable(c.Table)
	if err != nil {
		return nil, err
	}
	// pg_attribute, not information_schema, which hides the columns a
	// role has no privilege on and would blame the table's shape.
	var missing []string
	err = conn.QueryRow(ctx, `
SELECT coalesce(array_agg(w ORDER BY o), '{}')
FROM (SELECT w, min(o) AS o FROM unnest($2::text[]) WITH ORDINALITY AS want(w, o) GROUP BY w) want
WHERE NOT EXISTS (SELECT 1 FROM pg_attribute
  WHERE attrelid = to_regclass($1) AND attname = w AND attnum > 0 AND NOT attisdropped)`,
		t.Quoted(), c.columns()).Scan(&missing)
	if err != nil {
		return nil, fmt.Errorf("look up polling columns: %w", err)
	}
	return missing, nil
}

// HasColumns tells whether the table has seq, txid and published_at.
func HasColumns(ctx context.Context, conn *pgx.Conn, t outbox.Table) (bool, error) {
	return Config{Table: t.String()}.HasColumns(ctx, conn)
}

// Row is a row read by Poll: a Change of KindRow plus what marking it
// published needs.
type Row struct {
	outbox.Change
	Seq int64
}

// floorArgs binds floor to floorParams.
func floorArgs(f outbox.Floor) [][]byte {
	p := [][]byte{[]byte(strconv.FormatUint(f.XID, 10)), nil, nil}
	if f.Foreign != nil {
		p[1] = []byte(strconv.FormatInt(f.Foreign.Seq, 10))
		p[2] = []byte(strconv.FormatUint(f.Foreign.XID, 10))
	}
	return p
}

// ScanRows is the size from which ScansWholeTable counts a poll that
// reads the whole table as a cost: below it, a sequential scan is the
// planner's cheaper choice.
const ScanRows = 50_000

// ScansWholeTable tells whether a poll reads the whole table (the plan
// the server makes for it has a sequential scan) and the table holds
// ScanRows rows or more by its statistics: it has no index fit for the
// mapping (migrations.PollIndex, built by migrate given run's mapping).
func (p *Poller) ScansWholeTable(ctx context.Context, floor outbox.Floor) (rows int64, scans bool, err error) {
	err = p.conn.QueryRow(ctx, `SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::bigint FROM pg_class c
WHERE c.oid = to_regclass($1) OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass($1))`, p.table.Quoted()).Scan(&rows)
	if err != nil {
		return 0, false, fmt.Errorf("read the size of %s: %w", p.table, err)
	}
	if rows < ScanRows {
		return rows, false, nil
	}
	res := p.conn.PgConn().ExecParams(ctx, "EXPLAIN "+p.query, floorArgs(floor), nil, nil, nil)
	for res.NextRow() {
		scans = scans || strings.Contains(string(res.Values()[0]), "Seq Scan")
	}
	if _, err := res.Close(); err != nil {
		return rows, false, fmt.Errorf("explain the poll of %s: %w", p.table, err)
	}
	return rows, scans, nil
}

// Poll reads up to BatchSize visible, unpublished rows that floor does not
// cover, in insertion order. Values are copied: they stay valid after the
// next Poll.
func (p *Poller) Poll(ctx context.Context, floor outbox.Floor) ([]Row, error) {
	res := p.conn.PgConn().ExecParams(ctx, p.query, floorArgs(floor), nil, nil, nil)
	fields := res.FieldDescriptions()
	if fields == nil {
		// The query failed before its first row (the connection was
		// lost, the server shut down): that error, not the table's
		// shape, is the reason.
		_, err := res.Close()
		if err == nil {
			err = errors.New("no row description")
		}
		return nil, fmt.Errorf("poll %s: %w", p.table, err)
	}
	if err := p.bind(fields); err != nil {
		res.Close()
		return nil, err
	}
	now := time.Now()
	var rows []Row
	for res.NextRow() {
		values := copyValues(res.Values())
		if values[p.seqIdx] == nil {
			// A row to publish without an order value: polling can
			// neither order nor mark it, now or at any later poll.
			res.Close()
			return nil, p.Shape().unordered(ctx)
		}
		seq, err := strconv.ParseInt(string(values[p.seqIdx]), 10, 64)
		if err != nil {
			res.Close()
			return nil, fmt.Errorf("poll: %s %q: %w", p.cfg.Order, values[p.seqIdx], err)
		}
		txid, _ := strconv.ParseUint(string(values[p.txidIdx]), 10, 64)
		rows = append(rows, Row{
			Change: outbox.Change{Kind: outbox.KindRow, XID: uint32(txid), CommitTime: now, Relation: p.relation, Values: values},
			Seq:    seq,
		})
	}
	if _, err := res.Close(); err != nil {
		return nil, fmt.Errorf("poll %s: %w", p.table, err)
	}
	return rows, nil
}

// copyValues copies a row's values into one allocation: what the result
// reader returns is reused by its next row.
func copyValues(raw [][]byte) [][]byte {
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
	return values
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
	rel := &outbox.Relation{Schema: p.table.Schema, Name: p.table.Name, Columns: make([]schema.Column, len(fields))}
	p.seqIdx, p.txidIdx = -1, -1
	for i, f := range fields {
		rel.Columns[i] = schema.Column{Name: f.Name, TypeOID: f.DataTypeOID, TypMod: f.TypeModifier}
		switch f.Name {
		case p.cfg.Order:
			p.seqIdx = i
		case outbox.TxIDColumn:
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
	// Only rows not marked yet: the index of unpublished rows finds them,
	// where the order values alone would read the whole table, years of
	// published rows, for every batch.
	where := pgx.Identifier{p.cfg.Order}.Sanitize() + " = ANY($1) AND " + p.cfg.pending()
	if _, err := p.mark(ctx, where, []any{seqs}); err != nil {
		return fmt.Errorf("mark published: %w", err)
	}
	return nil
}

// Pending tells whether any visible, unpublished row that floor does not
// cover was written by a transaction below xmax, or has an order value at
// or below maxSeq: the handoff back to the WAL waits until there is none.
// maxSeq catches rows copied from another cluster, whose transaction ids
// may lie above this cluster's xmax. Pending rows from before the polling
// columns (no txid) count too.
func (p *Poller) Pending(ctx context.Context, floor outbox.Floor, xmax uint64, maxSeq int64) (bool, error) {
	args := floorArgs(floor)
	args = append(args, []byte(strconv.FormatUint(xmax, 10)), []byte(strconv.FormatInt(maxSeq, 10)))
	txid := pgx.Identifier{outbox.TxIDColumn}.Sanitize()
	res := p.conn.PgConn().ExecParams(ctx, fmt.Sprintf(
		`SELECT EXISTS (SELECT 1 FROM %s WHERE %s AND (%s IS NULL OR %s < $4::text::xid8 OR %s <= $5::text::bigint))`,
		p.table.Quoted(), p.cfg.Unpublished(floorParams), txid, txid, pgx.Identifier{p.cfg.Order}.Sanitize()), args, nil, nil, nil)
	var pending bool
	for res.NextRow() {
		pending = string(res.Values()[0]) == "t"
	}
	if _, err := res.Close(); err != nil {
		return false, fmt.Errorf("check pending rows: %w", err)
	}
	return pending, nil
}

// FloorCandidate is what a published floor is made of: the snapshot's xmin
// and xmax, a lower bound of the outbox sequence's value, and the WAL insert
// position, read in that order by one statement.
type FloorCandidate struct {
	XMin, XMax uint64
	Seq        int64
	LSN        pglogrepl.LSN
}

// ReadFloorCandidate reads one for the polled table, which has the polling
// columns. Every transaction below XMin had finished before LSN. Every row
// inserted later has an order value above Seq: Seq is the last value of
// the order column's sequence, or, where the role may not read it (or the
// column has none), the highest order value of an unpublished row (through
// the poller's index), or of any row with a status column, or 0.
func ReadFloorCandidate(ctx context.Context, conn *pgx.Conn, cfg Config) (FloorCandidate, error) {
	cfg.Defaults()
	var pos FloorCandidate
	table, err := outbox.ParseTable(cfg.Table)
	if err != nil {
		return pos, err
	}
	order := pgx.Identifier{cfg.Order}.Sanitize()
	highest := fmt.Sprintf("SELECT max(%s) FROM %s WHERE %s IS NULL", order, table.Quoted(), pgx.Identifier{cfg.Published}.Sanitize())
	if cfg.OwnMark() {
		highest = fmt.Sprintf("SELECT max(%s) FROM %s", order, table.Quoted())
	}
	var smin, smax, lsn string
	err = conn.QueryRow(ctx, fmt.Sprintf(`SELECT pg_snapshot_xmin(s)::text, pg_snapshot_xmax(s)::text,
  coalesce(CASE WHEN has_sequence_privilege(q, 'SELECT, USAGE') THEN pg_sequence_last_value(q) END, (%s), 0),
  pg_current_wal_insert_lsn()::text
FROM pg_current_snapshot() AS s, to_regclass(pg_get_serial_sequence($1, $2)) AS q`, highest),
		table.Quoted(), cfg.Order).Scan(&smin, &smax, &pos.Seq, &lsn)
	if err != nil {
		return pos, fmt.Errorf("read position: %w", err)
	}
	if pos.XMin, err = strconv.ParseUint(smin, 10, 64); err != nil {
		return pos, err
	}
	if pos.XMax, err = strconv.ParseUint(smax, 10, 64); err != nil {
		return pos, err
	}
	if pos.LSN, err = pglogrepl.ParseLSN(lsn); err != nil {
		return pos, err
	}
	return pos, nil
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

// markSet is the SET clause that marks a row published.
func (c Config) markSet() string {
	if c.Status != "" {
		set := pgx.Identifier{c.Status}.Sanitize() + " = " + quoteLiteral(c.StatusPublished)
		if c.ProcessedAt != "" {
			set += ", " + pgx.Identifier{c.ProcessedAt}.Sanitize() + " = now()"
		}
		return set
	}
	return pgx.Identifier{c.Published}.Sanitize() + " = now()"
}

// Streamed names the rows a WAL session published by the transaction
// that wrote them (the txid column): those at or above Start and below
// Floor (xid8 values as text, both or neither), and those of the
// transactions in XIDs, named as the WAL names them (the low 32 bits of
// their id).
type Streamed struct {
	Start, Floor *string
	XIDs         []uint32
}

// MarkStreamed marks published up to limit rows that the table's own
// column (OwnMark) still says are pending and that s names: rows a WAL
// session published, which the stream does not mark. Rows are picked by
// ctid in one short statement, and a row whose mark changed meanwhile is
// left as it is. It returns how many rows it marked.
func (c Config) MarkStreamed(ctx context.Context, conn *pgx.Conn, s Streamed, limit int) (int64, error) {
	c.Defaults()
	if !c.OwnMark() {
		return 0, errors.New("poll: only a table's own column is marked for what the WAL published")
	}
	table, err := outbox.ParseTable(c.Table)
	if err != nil {
		return 0, err
	}
	txid := pgx.Identifier{outbox.TxIDColumn}.Sanitize()
	var (
		arms []string
		args []any
	)
	if s.Start != nil && s.Floor != nil {
		args = append(args, *s.Start, *s.Floor)
		arms = append(arms, fmt.Sprintf("(%[1]s >= $%[2]d::text::xid8 AND %[1]s < $%[3]d::text::xid8)", txid, len(args)-1, len(args)))
	}
	if len(s.XIDs) > 0 {
		list := make([]int64, len(s.XIDs))
		for i, x := range s.XIDs {
			list[i] = int64(x)
		}
		args = append(args, list)
		// A transaction the WAL names by its low 32 bits is the one id
		// with those bits among the last 2^31 (no older one can still be
		// running or have just committed); a row of a year-old transaction
		// with the same low bits is not it.
		arms = append(arms, fmt.Sprintf(`(%[1]s::text::bigint > (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint) - 2147483648
    AND %[2]s)`, txid, lowXIDIn(txid, fmt.Sprintf("$%d::bigint[]", len(args)))))
	}
	if len(arms) == 0 {
		return 0, nil
	}
	tag, err := conn.Exec(ctx, fmt.Sprintf(`UPDATE %[1]s SET %[2]s WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM %[1]s WHERE %[3]s AND (%[4]s) LIMIT %[5]d)) AND %[3]s`,
		table.Quoted(), c.markSet(), c.pending(), strings.Join(arms, " OR "), limit), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// lowXIDIn is the SQL condition of a row whose transaction (the xid8
// column txid) the WAL names among list, an array of bigints: the WAL
// names a transaction by the low 32 bits of its id.
func lowXIDIn(txid, list string) string {
	return fmt.Sprintf("(%s::text::bigint %% 4294967296) IN (SELECT unnest(%s))", txid, list)
}

// MarkTransactions marks published the rows polling would read (floor
// does not cover them, not marked) of the transactions below xid below, or
// whose transaction id's low 32 bits (what the WAL names a transaction by)
// are among xids: rows that reached Kafka another way (the WAL), which
// polling must not send again. It returns how many rows it marked.
func (p *Poller) MarkTransactions(ctx context.Context, floor outbox.Floor, below uint64, xids []uint32) (int64, error) {
	if below == 0 && len(xids) == 0 {
		return 0, nil
	}
	var list strings.Builder
	list.WriteByte('{')
	for i, x := range xids {
		if i > 0 {
			list.WriteByte(',')
		}
		list.WriteString(strconv.FormatUint(uint64(x), 10))
	}
	list.WriteByte('}')
	txid := pgx.Identifier{outbox.TxIDColumn}.Sanitize()
	// IN (SELECT unnest(...)) and not = ANY(...): PostgreSQL hashes the
	// list of a subquery, while ANY of a parameter is searched element by
	// element for every row; with thousands of listed transactions over
	// tens of thousands of rows the WAL left unmarked, that took minutes.
	where := fmt.Sprintf(`%s AND (%s < $4::text::xid8 OR %s)`,
		p.cfg.Unpublished(floorParams), txid, lowXIDIn(txid, "$5::text::bigint[]"))
	var args []any
	for _, a := range append(floorArgs(floor), []byte(strconv.FormatUint(below, 10)), []byte(list.String())) {
		if a == nil {
			args = append(args, nil)
		} else {
			args = append(args, string(a))
		}
	}
	n, err := p.mark(ctx, where, args)
	if err != nil {
		return 0, fmt.Errorf("mark rows the WAL published: %w", err)
	}
	return n, nil
}

// Published returns the order values of up to limit rows marked published
// whose transaction is at or above floor's XID, newest first: rows polling
// may have published that a WAL session can still replay.
func (p *Poller) Published(ctx context.Context, floor outbox.Floor, limit int) ([]int64, error) {
	cond := pgx.Identifier{p.cfg.Published}.Sanitize() + " IS NOT NULL"
	if c := p.cfg; c.Status != "" {
		cond = pgx.Identifier{c.Status}.Sanitize() + " = " + quoteLiteral(c.StatusPublished)
	}
	order := pgx.Identifier{p.cfg.Order}.Sanitize()
	q := fmt.Sprintf(`SELECT %s FROM %s WHERE %s AND %s >= $1::text::xid8 ORDER BY %s DESC LIMIT %d`,
		order, p.table.Quoted(), cond, pgx.Identifier{outbox.TxIDColumn}.Sanitize(), order, limit)
	rows, err := p.conn.Query(ctx, q, strconv.FormatUint(floor.XID, 10))
	if err != nil {
		return nil, fmt.Errorf("read published rows: %w", err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read published rows: %w", err)
	}
	return seqs, nil
}

// UnorderedError is rows polling must publish that have no value in the
// column polling orders and marks them by: rows written before
// pgoutbox migrate added seq to a table whose own status column says they
// are pending. It says what to run.
type UnorderedError struct {
	Table outbox.Table
	Order string // the order column
	Rows  int64  // how many rows lack it
	Where string // the SQL condition of those rows
	// OrderBy is an integer column that gives the table's insertion
	// order (identity or serial), which polling can order by instead;
	// NumberBy is a column to number the rows by (OrderBy, or else
	// created_at). "" when none was found.
	OrderBy, NumberBy string
}

func (e *UnorderedError) Error() string {
	by := e.NumberBy
	if by == "" {
		by = "<a column in insertion order>"
	}
	t := e.Table.Quoted()
	order := pgx.Identifier{e.Order}.Sanitize()
	instead := "Number them before every other row, in their insertion order: "
	if e.OrderBy != "" {
		instead = fmt.Sprintf("Poll in the table's own insertion order instead (--column-order %s), or number them before every other row, in their insertion order: ", e.OrderBy)
	}
	return fmt.Sprintf("poll: %d rows of %s that polling must publish have no %s (%s): they were written before %s was added, and polling can neither order nor mark them. "+
		instead+
		"UPDATE %s AS o SET %s = m.lo - n.rn FROM (SELECT ctid, row_number() OVER (ORDER BY %s DESC) AS rn FROM %s WHERE %s) AS n, (SELECT coalesce(min(%s), 0) AS lo FROM %s) AS m WHERE o.ctid = n.ctid",
		e.Rows, e.Table, e.Order, e.Where, e.Order,
		t, order, pgx.Identifier{strings.Trim(by, "<>")}.Sanitize(), t, e.Where, order, t)
}

// Permanent: the rows stay as they are until someone numbers them.
func (e *UnorderedError) Permanent() bool { return true }

// CheckOrdered returns an *UnorderedError when rows polling must publish
// have no order value (rows written before migrate added seq that the
// table's own mark says are pending), and nil when there are none:
// polling stops on them, and migrate says so first.
func (s *Shape) CheckOrdered(ctx context.Context) error {
	err := s.unordered(ctx)
	if e := (*UnorderedError)(nil); errors.As(err, &e) && e.Rows == 0 {
		return nil
	}
	return err
}

// unordered counts the rows to publish that lack an order value and finds
// the columns that may give their insertion order: an integer identity or
// serial column, to order by or number by; or else created_at, to number
// by.
func (s *Shape) unordered(ctx context.Context) error {
	where := fmt.Sprintf("%s IS NULL AND %s", pgx.Identifier{s.cfg.Order}.Sanitize(), s.cfg.pending())
	e := &UnorderedError{Table: s.table, Order: s.cfg.Order, Where: where}
	if err := s.conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", s.table.Quoted(), where)).Scan(&e.Rows); err != nil {
		return fmt.Errorf("poll %s: count the rows without %s: %w", s.table, s.cfg.Order, err)
	}
	var sequenced bool
	_ = s.conn.QueryRow(ctx, `SELECT attname::text, (a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%', false))
  AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped AND a.attname <> $2
  AND (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%' OR a.attname = 'created_at')
ORDER BY 2 DESC, a.attnum
LIMIT 1`, s.table.Quoted(), s.cfg.Order).Scan(&e.NumberBy, &sequenced)
	if sequenced {
		e.OrderBy = e.NumberBy
	}
	return e
}
