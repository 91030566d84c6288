package poll

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sequence is the sequence behind the seq column (identity or serial).
type Sequence struct {
	Name  string // regclass text, schema-qualified where needed
	Start int64
}

// Sequence finds the sequence the order column (seq) draws from. Only an increment
// of 1 is supported: every position between two values is then a row that
// was inserted, rolled back, or never used.
func (c *Census) Sequence(ctx context.Context) (Sequence, error) {
	var (
		name      *string
		start     int64
		increment int64
		readable  bool
	)
	err := c.conn.QueryRow(ctx, `
SELECT s.seqrelid::regclass::text, s.seqstart, s.seqincrement,
       has_sequence_privilege(s.seqrelid, 'SELECT') OR has_sequence_privilege(s.seqrelid, 'USAGE')
FROM pg_sequence s WHERE s.seqrelid = pg_get_serial_sequence($1, $2)::regclass`,
		c.table.Quoted(), c.cfg.Order).Scan(&name, &start, &increment, &readable)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || err == nil && name == nil:
		return Sequence{}, fmt.Errorf("%w: %s.%s is not an identity or serial column", ErrNoSequence, c.table, c.cfg.Order)
	case err != nil:
		return Sequence{}, fmt.Errorf("look up the sequence of %s.%s: %w", c.table, c.cfg.Order, err)
	case !readable:
		return Sequence{}, fmt.Errorf("%w: grant SELECT on %s", ErrNoSequence, *name)
	case increment != 1:
		return Sequence{}, fmt.Errorf("%w: its increment is %d, not 1", ErrNoSequence, increment)
	}
	return Sequence{Name: *name, Start: start}, nil
}

// Positions is one reading of where insertion stands, taken in one
// statement: the last seq handed out, the snapshot's xmin, the next
// transaction id, the table's delete counter, and the lowest unpublished
// visible seq above a given position.
type Positions struct {
	// Last is the last value the sequence handed out (Start-1 before the
	// first).
	Last int64
	// XMin is the statement's snapshot's xmin: every transaction below it
	// has finished. Next is the next transaction id to be assigned, read
	// after Last: once a later reading's XMin reaches it, every
	// transaction that drew a value up to Last with an id has finished.
	// (The snapshot's xmax is not that bound: it is one past the latest
	// transaction to finish, and a transaction that took its id later and
	// is still running lies at or above it.)
	XMin, Next uint64
	// Deletes is the table's n_tup_del statistic: deletes attempted on the
	// table, committed or not, as flushed to the statistics so far (each
	// backend flushes about once a second, up to 10 s late when idle). A
	// partitioned table keeps none of its own: it is the sum over Files.
	Deletes int64
	// MinUnpublished is the lowest seq above the given position of a
	// visible row not yet marked published (0: none).
	MinUnpublished int64
	// Files are the relations that hold the table's rows (the table, or
	// its partitions, and tables that inherit from it), each with its
	// file and its delete counter.
	Files Files
}

// File is a relation that holds rows of the outbox table, as one reading
// found it.
type File struct {
	OID uint32
	// Node is its relfilenode: TRUNCATE gives it a new one, as does a
	// rewrite (VACUUM FULL, CLUSTER, ALTER TABLE that rewrites).
	Node    uint32
	Deletes int64
}

// Files are a reading's relations, in OID order.
type Files []File

// Key names the relations and their files, so that two readings compare
// equal unless a relation came, went, or got a new file in between.
func (f Files) Key() string {
	var b strings.Builder
	for i, x := range f {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d", x.OID, x.Node)
	}
	return b.String()
}

// filesSQL lists the relations that hold the rows of the table $2 (itself
// unless partitioned, every table below it) as arrays: OIDs, files and
// delete counters, in OID order.
const filesSQL = `(WITH RECURSIVE tree AS (
    SELECT $2::regclass::oid AS relid UNION ALL SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.relid)
  SELECT array_agg(c.oid::bigint ORDER BY c.oid) AS oids, array_agg(c.relfilenode::bigint ORDER BY c.oid) AS nodes,
    array_agg(pg_stat_get_tuples_deleted(c.oid) ORDER BY c.oid) AS dels
  FROM tree JOIN pg_class c ON c.oid = tree.relid WHERE c.relkind <> 'p') AS f`

// nextXIDSQL is the next transaction id to be assigned, as a full (xid8)
// number, for a statement with the snapshot s that runs outside a
// transaction block and takes no id: age() measures from the next id,
// read once per transaction, and the snapshot's xmax (x, its low 32 bits
// lo) gives the epoch. age() is given a normal xid (3 or above) even where
// lo wrapped to 0, 1 or 2; the sum is the same.
const nextXIDSQL = `SELECT x + age(greatest(lo, 3)::text::xid) + greatest(lo, 3) - lo
  FROM (SELECT pg_snapshot_xmax(s)::text::bigint AS x, mod(pg_snapshot_xmax(s)::text::bigint, 4294967296) AS lo) AS v`

func filesOf(oids, nodes, dels []int64) (Files, int64) {
	files := make(Files, len(oids))
	var sum int64
	for i := range oids {
		files[i] = File{OID: uint32(oids[i]), Node: uint32(nodes[i]), Deletes: dels[i]}
		sum += dels[i]
	}
	return files, sum
}

// Positions reads insertion's progress in one cheap statement: the
// sequence, the snapshot, a statistics row, and one probe of the partial
// index on unpublished rows.
func (c *Census) Positions(ctx context.Context, seq Sequence, above int64) (Positions, error) {
	var (
		pos               Positions
		last              *int64
		xmin, next        string
		minUnpub          *int64
		oids, nodes, dels []int64
	)
	// The target list is evaluated in order: the next transaction id is
	// read after the sequence.
	q := fmt.Sprintf(`SELECT pg_sequence_last_value($1::regclass), pg_snapshot_xmin(s)::text, (%[5]s)::text,
  f.oids, f.nodes, f.dels,
  (SELECT min(%[2]s) FROM %[1]s WHERE %[3]s AND %[2]s > $3)
FROM pg_current_snapshot() AS s, %[4]s`, c.table.Quoted(), pgx.Identifier{c.cfg.Order}.Sanitize(), c.cfg.pending(), filesSQL, nextXIDSQL)
	if err := c.conn.QueryRow(ctx, q, seq.Name, c.table.Quoted(), above).Scan(&last, &xmin, &next, &oids, &nodes, &dels, &minUnpub); err != nil {
		return pos, fmt.Errorf("read insertion positions: %w", err)
	}
	pos.Files, pos.Deletes = filesOf(oids, nodes, dels)
	pos.Last = seq.Start - 1
	if last != nil {
		pos.Last = *last
	}
	var err error
	if pos.XMin, err = strconv.ParseUint(xmin, 10, 64); err != nil {
		return pos, err
	}
	if pos.Next, err = strconv.ParseUint(next, 10, 64); err != nil {
		return pos, err
	}
	if minUnpub != nil {
		pos.MinUnpublished = *minUnpub
	}
	return pos, nil
}

// CountKnown counts the rows with seq at or below upTo or without one, and
// the rows not pending: the rows a poll phase started with or published, less
// those deleted since. It reads the whole table, so callers run it rarely: once when a
// poll phase starts, and when a loss is suspected.
func (c *Census) CountKnown(ctx context.Context, upTo int64) (int64, error) {
	var n int64
	// Rows from before the polling columns were added have no seq.
	err := c.conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %[1]s WHERE %[2]s IS NULL OR %[2]s <= $1 OR NOT coalesce(%[3]s, false)`,
		c.table.Quoted(), pgx.Identifier{c.cfg.Order}.Sanitize(), c.cfg.pending()), upTo).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count rows of %s: %w", c.table, err)
	}
	return n, nil
}

// GapCount is what one scan finds for the positions a poll phase did not
// see drawn: those drawn while no phase ran.
type GapCount struct {
	// Known is CountKnown(upTo).
	Known int64
	// Present counts the rows with a seq in (from, upTo].
	Present int64
	// PresentPending counts the rows with a seq in (knownFrom, upTo] not
	// marked published.
	PresentPending int64
	// BatchPending counts those of them in [batchFrom, batchTo].
	BatchPending int64
}

// CountGap counts, in one read of the table, the rows CountKnown(upTo)
// counts, the rows present with a seq in (from, upTo], and those of
// (knownFrom, upTo] not yet published, in all and in [batchFrom, batchTo]. Like CountKnown it reads the whole
// table; a poll phase runs it once, at its start, instead of CountKnown.
func (c *Census) CountGap(ctx context.Context, upTo, from, knownFrom, batchFrom, batchTo int64) (GapCount, error) {
	var g GapCount
	order := pgx.Identifier{c.cfg.Order}.Sanitize()
	err := c.conn.QueryRow(ctx, fmt.Sprintf(`SELECT
  count(*) FILTER (WHERE %[2]s IS NULL OR %[2]s <= $1 OR NOT coalesce(%[3]s, false)),
  count(*) FILTER (WHERE %[2]s > $2 AND %[2]s <= $1),
  count(*) FILTER (WHERE %[2]s > $3 AND %[2]s <= $1 AND coalesce(%[3]s, true)),
  count(*) FILTER (WHERE %[2]s > $3 AND %[2]s <= $1 AND %[2]s BETWEEN $4 AND $5 AND coalesce(%[3]s, true))
FROM %[1]s`, c.table.Quoted(), order, c.cfg.pending()), upTo, from, knownFrom, batchFrom, batchTo).Scan(&g.Known, &g.Present, &g.PresentPending, &g.BatchPending)
	if err != nil {
		return g, fmt.Errorf("count rows of %s: %w", c.table, err)
	}
	return g, nil
}

// ReadKnown counts the rows CountKnown(upTo) counts and then reads the
// table's delete counter and files (Positions.Files), in one statement: a
// delete that lands between the count and the counter is taken as one
// before the reading, which can only make a later loss figure smaller. It
// reads the whole table; the WAL session runs it rarely (its cost sets how
// rarely). The server ends it after limit (statement_timeout), so that a
// slow count fails alone instead of a cancelled context closing the
// connection.
func (c *Census) ReadKnown(ctx context.Context, upTo int64, limit time.Duration) (known, deletes int64, files Files, err error) {
	tx, err := c.conn.Begin(ctx)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("read known rows of %s: %w", c.table, err)
	}
	defer tx.Rollback(context.Background()) // read only: nothing to keep
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", max(1, limit.Milliseconds()))); err != nil {
		return 0, 0, nil, fmt.Errorf("read known rows of %s: %w", c.table, err)
	}
	var oids, nodes, dels []int64
	q := fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s WHERE %[2]s IS NULL OR %[2]s <= $1 OR NOT coalesce(%[3]s, false)),
  f.oids, f.nodes, f.dels FROM %[4]s`, c.table.Quoted(), pgx.Identifier{c.cfg.Order}.Sanitize(), c.cfg.pending(), filesSQL)
	if err := tx.QueryRow(ctx, q, upTo, c.table.Quoted()).Scan(&known, &oids, &nodes, &dels); err != nil {
		return 0, 0, nil, fmt.Errorf("read known rows of %s: %w", c.table, err)
	}
	files, deletes = filesOf(oids, nodes, dels)
	return known, deletes, files, nil
}
