package migrations

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/schema"
)

// lockTimeout bounds how long one schema change waits for its brief lock on
// the outbox table. A waiting ALTER TABLE queues every insert behind it, so
// it gives up quickly and tries again rather than block the application
// behind a long transaction.
const (
	lockTimeout  = 500 * time.Millisecond
	lockAttempts = 60
)

// OutboxResult says what EnsureOutbox did.
type OutboxResult struct {
	// Created is set when the table did not exist and was created.
	Created bool
	// Added names the polling columns added to an existing table.
	Added []string
	// IndexBuilt is set when the partial index over unpublished rows was
	// built (concurrently, on an existing table; partition by partition,
	// on a partitioned one).
	IndexBuilt bool
	// Defaults names the partitions (or tables that inherit) given the
	// outbox table's defaults of seq and txid, which a table attached as
	// a partition lacks: without them, rows inserted into it directly
	// would never be polled.
	Defaults []string
}

// PollIndex is the partial index polling reads a table through: on the
// column it orders by, over the rows it has yet to read, so that a poll,
// and the marking of what the WAL published, reads those rows and not the
// table's history. The zero value is pgoutbox's own mapping: seq, and
// published_at unset. Order and Where are SQL, identifiers quoted
// (poll.Config.Index).
type PollIndex struct {
	Order, Where string
}

func (x PollIndex) orDefault() PollIndex {
	if x == (PollIndex{}) {
		return PollIndex{Order: "seq", Where: "published_at IS NULL AND seq IS NOT NULL"}
	}
	return x
}

// definition is the index's column and predicate, after ON table.
func (x PollIndex) definition() string {
	x = x.orDefault()
	return " (" + x.Order + ") WHERE " + x.Where
}

// suffix ends the index's name: _unpublished for pgoutbox's own mapping,
// and for another one a hash of its definition too, so that a mapping
// changed later (other pending values) gets an index of its own instead of
// keeping one it cannot read through.
func (x PollIndex) suffix() string {
	if x == (PollIndex{}) {
		return "_unpublished"
	}
	h := fnv.New32a()
	h.Write([]byte(x.definition()))
	return fmt.Sprintf("_unpublished_%08x", h.Sum32())
}

// OutboxColumns are the columns of the outbox table EnsureOutbox creates,
// in order, with their type OIDs: what a mapping is checked against before
// the table exists.
func OutboxColumns() []schema.Column {
	return []schema.Column{
		{Name: "id", TypeOID: 2950, TypMod: -1},           // uuid
		{Name: "aggregatetype", TypeOID: 25, TypMod: -1},  // text
		{Name: "aggregateid", TypeOID: 25, TypMod: -1},    // text
		{Name: "type", TypeOID: 25, TypMod: -1},           // text
		{Name: "payload", TypeOID: 3802, TypMod: -1},      // jsonb
		{Name: "headers", TypeOID: 3802, TypMod: -1},      // jsonb
		{Name: "created_at", TypeOID: 1184, TypMod: -1},   // timestamptz
		{Name: "seq", TypeOID: 20, TypMod: -1},            // bigint
		{Name: "txid", TypeOID: 5069, TypMod: -1},         // xid8
		{Name: "published_at", TypeOID: 1184, TypMod: -1}, // timestamptz
	}
}

// EnsureOutbox creates the outbox table schema.table with the default shape
// when it is missing. An existing table, of any shape, is never rewritten:
// with polling it gets the columns polling needs as nullable columns whose
// defaults apply to new rows only (seq from a sequence of its own, txid
// from pg_current_xact_id(), published_at), each added under a lock held
// for milliseconds, and the partial index over unpublished rows is built
// concurrently (polling's, x: nil adds no polling columns). Rows that were
// in the table before have no seq and no txid: polling never publishes
// them, so a takeover does not send a team's history again. Idempotent.
func EnsureOutbox(ctx context.Context, conn *pgx.Conn, schema, table string, x *PollIndex) (OutboxResult, error) {
	var res OutboxResult
	t := pgx.Identifier{schema, table}.Sanitize()
	index := sanitizeIndexPrefix(table) + "_unpublished"
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t).Scan(&exists); err != nil {
		return res, fmt.Errorf("look up %s: %w", t, err)
	}
	if !exists {
		// A new, empty table: created whole, index included, at once.
		_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
  id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  aggregatetype text        NOT NULL,
  aggregateid   text        NOT NULL,
  type          text        NOT NULL,
  payload       jsonb       NOT NULL,
  headers       jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  seq           bigint      GENERATED ALWAYS AS IDENTITY,
  txid          xid8        NOT NULL DEFAULT pg_current_xact_id(),
  published_at  timestamptz
);
CREATE INDEX IF NOT EXISTS `+index+` ON `+t+` (seq) WHERE published_at IS NULL`)
		switch {
		case err == nil:
			res.Created = true
			return res, nil
		case !isDuplicate(err):
			return res, fmt.Errorf("create %s: %w", t, err)
		}
		// Another migration created it at the same time (IF NOT
		// EXISTS does not keep two from colliding): go on with it.
	}
	if x == nil {
		return res, nil
	}
	var err error
	if res.Added, err = addPollingColumns(ctx, conn, schema, table); err != nil {
		return res, err
	}
	if res.Defaults, err = childDefaults(ctx, conn, t); err != nil {
		return res, err
	}
	if res.IndexBuilt, err = ensureUnpublishedIndex(ctx, conn, schema, sanitizeIndexPrefix(table)+x.suffix(), t, *x); err != nil {
		return res, err
	}
	return res, nil
}

// childDefaults gives every table below t (a partition, at any level, or a
// table that inherits) the defaults of seq and txid that t has and it
// lacks. Setting a default on t sets it on the tables below it then, and
// CREATE TABLE ... PARTITION OF copies it; a table attached afterwards
// (ALTER TABLE ... ATTACH PARTITION) keeps its own, none.
func childDefaults(ctx context.Context, conn *pgx.Conn, t string) ([]string, error) {
	rows, err := conn.Query(ctx, `WITH RECURSIVE tree AS (
  SELECT inhrelid AS relid FROM pg_inherits WHERE inhparent = to_regclass($1)
  UNION ALL SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.relid)
SELECT DISTINCT n.nspname::text, c.relname::text, a.attname::text, pg_get_expr(d.adbin, d.adrelid)
FROM tree JOIN pg_class c ON c.oid = tree.relid JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname IN ('seq', 'txid') AND NOT a.attisdropped
JOIN pg_attribute pa ON pa.attrelid = to_regclass($1) AND pa.attname = a.attname
JOIN pg_attrdef d ON d.adrelid = pa.attrelid AND d.adnum = pa.attnum
WHERE c.relkind = 'r' AND NOT a.atthasdef AND a.attidentity = '' AND pa.attidentity = ''
ORDER BY 1, 2, 3`, t)
	if err != nil {
		return nil, fmt.Errorf("read the defaults of the partitions of %s: %w", t, err)
	}
	type missing struct{ schema, table, column, expr string }
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (missing, error) {
		var m missing
		return m, r.Scan(&m.schema, &m.table, &m.column, &m.expr)
	})
	if err != nil {
		return nil, fmt.Errorf("read the defaults of the partitions of %s: %w", t, err)
	}
	var done []string
	for _, m := range list {
		child := pgx.Identifier{m.schema, m.table}.Sanitize()
		if err := briefly(ctx, conn, child, []string{"ALTER TABLE " + child + " ALTER COLUMN " + pgx.Identifier{m.column}.Sanitize() + " SET DEFAULT " + m.expr}); err != nil {
			return done, err
		}
		done = append(done, m.schema+"."+m.table+"."+m.column)
	}
	return done, nil
}

// AddPollingColumns gives an existing outbox table what polling needs, as
// EnsureOutbox does: insertion order (seq), the writing transaction (txid),
// the published mark, and the partial index over unpublished rows, without
// rewriting the table. Columns that exist are left alone.
func AddPollingColumns(ctx context.Context, conn *pgx.Conn, schema, table string) error {
	t := pgx.Identifier{schema, table}.Sanitize()
	if _, err := addPollingColumns(ctx, conn, schema, table); err != nil {
		return err
	}
	_, err := ensureUnpublishedIndex(ctx, conn, schema, sanitizeIndexPrefix(table)+"_unpublished", t, PollIndex{})
	return err
}

func addPollingColumns(ctx context.Context, conn *pgx.Conn, schema, table string) ([]string, error) {
	t := pgx.Identifier{schema, table}.Sanitize()
	rows, err := conn.Query(ctx, `SELECT attname FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = ANY('{seq,txid,published_at}') AND attnum > 0 AND NOT attisdropped`, t)
	if err != nil {
		return nil, fmt.Errorf("look up the columns of %s: %w", t, err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("look up the columns of %s: %w", t, err)
	}
	has := map[string]bool{}
	for _, c := range have {
		has[c] = true
	}
	var added []string
	// txid before seq: a row that gets a seq must get its txid too, or
	// polling, which judges a row by its txid, would never publish it.
	if !has["txid"] {
		if err := briefly(ctx, conn, t, []string{
			"ALTER TABLE " + t + " ADD COLUMN IF NOT EXISTS txid xid8",
			"ALTER TABLE " + t + " ALTER COLUMN txid SET DEFAULT pg_current_xact_id()",
		}); err != nil {
			return added, err
		}
		added = append(added, "txid")
	}
	if !has["seq"] {
		// An identity or a default in ADD COLUMN would fill every existing
		// row: a rewrite. A plain column whose default is set afterwards
		// numbers new rows only.
		seq := pgx.Identifier{schema, sanitizeIndexPrefix(table) + "_pgoutbox_seq"}.Sanitize()
		if _, err := conn.Exec(ctx, "CREATE SEQUENCE IF NOT EXISTS "+seq+" AS bigint"); err != nil {
			return added, fmt.Errorf("add polling columns to %s: %w", t, err)
		}
		// Every role that inserts into the table draws from the sequence
		// once the default is set: grant it first.
		if err := grantSequence(ctx, conn, t, seq); err != nil {
			return added, err
		}
		err := briefly(ctx, conn, t, []string{
			"ALTER TABLE " + t + " ADD COLUMN IF NOT EXISTS seq bigint",
			"ALTER TABLE " + t + " ALTER COLUMN seq SET DEFAULT nextval('" + seq + "')",
			"ALTER SEQUENCE " + seq + " OWNED BY " + t + ".seq",
		})
		if err != nil {
			return added, err
		}
		added = append(added, "seq")
	}
	if !has["published_at"] {
		if err := briefly(ctx, conn, t, []string{"ALTER TABLE " + t + " ADD COLUMN IF NOT EXISTS published_at timestamptz"}); err != nil {
			return added, err
		}
		added = append(added, "published_at")
	}
	return added, nil
}

// briefly runs stmts in one transaction that waits at most lockTimeout for
// its lock on table t, and tries again while another transaction holds it.
func briefly(ctx context.Context, conn *pgx.Conn, t string, stmts []string) error {
	var err error
	for attempt := 0; attempt < lockAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(min(attempt, 10)) * 100 * time.Millisecond):
			}
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", lockTimeout.Milliseconds())); err != nil {
				return err
			}
			for _, s := range stmts {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" { // lock_not_available
			break
		}
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
			return fmt.Errorf("add polling columns to %s: a long transaction kept the table locked through %d tries; run migrate again when it has finished: %w", t, lockAttempts, err)
		}
		return fmt.Errorf("add polling columns to %s: %w", t, err)
	}
	return nil
}

// grantSequence lets every role that may insert into table t use seq, as
// the default of t's new seq column needs.
func grantSequence(ctx context.Context, conn *pgx.Conn, t, seq string) error {
	rows, err := conn.Query(ctx, `SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
FROM pg_class c, aclexplode(c.relacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = to_regclass($1) AND a.privilege_type = 'INSERT'`, t)
	if err != nil {
		return fmt.Errorf("read the grants of %s: %w", t, err)
	}
	grantees, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read the grants of %s: %w", t, err)
	}
	for _, g := range grantees {
		if _, err := conn.Exec(ctx, "GRANT USAGE ON SEQUENCE "+seq+" TO "+g); err != nil {
			return fmt.Errorf("grant the new sequence %s to %s: %w", seq, g, err)
		}
	}
	return nil
}

// unpublishedIndex is the definition of the partial index polling reads
// through. Rows from before the polling columns have no seq; they are never
// polled, and the index leaves them out.
// ensureUnpublishedIndex builds the partial index polling reads through,
// concurrently, so inserts go on while it is built. A build that failed
// earlier leaves an invalid index behind; it is dropped and built again. On
// a partitioned table, which cannot be indexed concurrently, it builds the
// index the way PostgreSQL allows without a long lock (see
// partitionedIndex).
func ensureUnpublishedIndex(ctx context.Context, conn *pgx.Conn, schema, index, t string, x PollIndex) (bool, error) {
	var kind string
	if err := conn.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", t).Scan(&kind); err != nil {
		return false, fmt.Errorf("look up %s: %w", t, err)
	}
	if kind == "p" {
		return partitionedIndex(ctx, conn, schema, index, t, x)
	}
	var valid *bool
	err := conn.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, index).Scan(&valid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("look up index %s: %w", index, err)
	}
	qualified := pgx.Identifier{schema, index}.Sanitize()
	if valid != nil && *valid {
		return false, nil
	}
	if valid != nil {
		if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+qualified); err != nil {
			return false, fmt.Errorf("drop invalid index %s: %w", index, err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE INDEX CONCURRENTLY IF NOT EXISTS "+pgx.Identifier{index}.Sanitize()+" ON "+t+x.definition()); err != nil {
		return false, fmt.Errorf("build index %s on %s: %w", index, t, err)
	}
	return true, nil
}

// partitionedIndex builds the index over unpublished rows on the
// partitioned table t: the index on t alone (CREATE INDEX ... ON ONLY,
// which takes a moment's lock and stays invalid), then each partition's
// concurrently, attached to it as it is built (ALTER INDEX ... ATTACH
// PARTITION); a partition that is partitioned itself is done the same way,
// first. Once every partition's is attached, PostgreSQL marks t's valid. A
// run cut short leaves t's index invalid, with some partitions attached:
// the next run builds and attaches the rest. Partitions created later
// (CREATE TABLE ... PARTITION OF) get the index from PostgreSQL.
func partitionedIndex(ctx context.Context, conn *pgx.Conn, schema, index, t string, x PollIndex) (bool, error) {
	var (
		oid   uint32
		valid bool
	)
	err := conn.QueryRow(ctx, `SELECT c.oid, i.indisvalid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_index i ON i.indexrelid = c.oid WHERE n.nspname = $1 AND c.relname = $2`, schema, index).Scan(&oid, &valid)
	switch {
	case err == nil && valid:
		return false, nil
	case errors.Is(err, pgx.ErrNoRows):
		if err := briefly(ctx, conn, t, []string{"CREATE INDEX IF NOT EXISTS " + pgx.Identifier{index}.Sanitize() + " ON ONLY " + t + x.definition()}); err != nil {
			return false, fmt.Errorf("build index %s on %s: %w", index, t, err)
		}
	case err != nil:
		return false, fmt.Errorf("look up index %s: %w", index, err)
	}
	qualified := pgx.Identifier{schema, index}.Sanitize()
	// The partitions whose index is not attached yet (foreign tables
	// cannot have one).
	rows, err := conn.Query(ctx, `SELECT n.nspname::text, c.relname::text, c.relkind::text, c.oid FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.inhparent = to_regclass($1) AND c.relkind IN ('r', 'p')
  AND NOT EXISTS (SELECT 1 FROM pg_inherits ii JOIN pg_index x ON x.indexrelid = ii.inhrelid
                  WHERE ii.inhparent = to_regclass($2) AND x.indrelid = c.oid)
ORDER BY c.oid`, t, qualified)
	if err != nil {
		return false, fmt.Errorf("list the partitions of %s: %w", t, err)
	}
	type part struct {
		schema, name, kind string
		oid                uint32
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (part, error) {
		var p part
		return p, r.Scan(&p.schema, &p.name, &p.kind, &p.oid)
	})
	if err != nil {
		return false, fmt.Errorf("list the partitions of %s: %w", t, err)
	}
	for _, p := range parts {
		pt := pgx.Identifier{p.schema, p.name}.Sanitize()
		name, err := partitionIndexName(ctx, conn, p.schema, p.name, p.oid, x.suffix())
		if err != nil {
			return false, err
		}
		if p.kind == "p" {
			_, err = partitionedIndex(ctx, conn, p.schema, name, pt, x)
		} else {
			_, err = ensureUnpublishedIndex(ctx, conn, p.schema, name, pt, x)
		}
		if err != nil {
			return false, err
		}
		if err := briefly(ctx, conn, t, []string{"ALTER INDEX " + qualified + " ATTACH PARTITION " + pgx.Identifier{p.schema, name}.Sanitize()}); err != nil {
			return false, fmt.Errorf("attach index %s to %s: %w", name, index, err)
		}
	}
	return true, nil
}

// partitionIndexName names a partition's index over unpublished rows after
// the partition, or after its OID too where that name is another
// relation's (a long name cut short, or a name taken).
func partitionIndexName(ctx context.Context, conn *pgx.Conn, schema, table string, oid uint32, suffix string) (string, error) {
	name := sanitizeIndexPrefix(table) + suffix
	var other bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indexrelid = c.oid AND i.indrelid = $3))`,
		schema, name, oid).Scan(&other)
	if err != nil {
		return "", fmt.Errorf("name the index of %s: %w", table, err)
	}
	if other {
		name = fmt.Sprintf("%s_%d%s", sanitizeIndexPrefix(table)[:min(len(table), 30)], oid, suffix)
	}
	return name, nil
}
