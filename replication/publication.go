package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// publicationMark is the comment pgoutbox puts on a publication it creates:
// such a publication is pgoutbox's to fix.
const publicationMark = "pgoutbox"

// PublicationSetup says what EnsurePublicationFor did.
type PublicationSetup struct {
	// Created is set when the publication did not exist and was created;
	// AllTables when it was created FOR ALL TABLES (Publishes.AllTables).
	Created, AllTables bool
	// Fixed are the statements run to fix a publication of pgoutbox's
	// that did not publish every outbox row as it must.
	Fixed []string
	// Problems are what was wrong with it before the fix.
	Problems []string
	// Warnings are what keeps the publication from carrying the updates
	// and deletes change events want, where that is no error: a
	// publication not pgoutbox's that publishes inserts only (Debezium
	// reads no more from it either), or tables whose UPDATE and DELETE
	// would fail once published, for want of a replica identity.
	Warnings []string
}

// Publication is what the catalog says of a publication and of the
// pipeline's tables in it.
type Publication struct {
	Name   string
	Exists bool
	// AllTables: FOR ALL TABLES; Schemas: it publishes whole schemas
	// (TABLES IN SCHEMA, PostgreSQL 15 and later). Either way it
	// publishes tables besides the outbox tables by design.
	AllTables bool
	Schemas   map[string]bool
	Insert    bool
	// Update and Delete are pubupdate and pubdelete.
	Update, Delete bool
	// ViaRoot is publish_via_partition_root.
	ViaRoot bool
	// Ours: pgoutbox created it (its comment says so), or it has the shape
	// pgoutbox gave its publications before it marked them: owned by this
	// role, inserts only, the pipeline's tables only.
	Ours bool
	// Rels are the tables it names (FOR TABLE), by OID.
	Rels map[uint32]outbox.Table
	// Members are the outbox tables and the relations below them.
	Members []Member
}

// Broad tells a publication that publishes other tables by design.
func (p *Publication) Broad() bool { return p.AllTables || len(p.Schemas) > 0 }

// InspectPublication reads the publication and the pipeline's tables.
func InspectPublication(ctx context.Context, conn *pgx.Conn, name string, tables []outbox.Table) (*Publication, error) {
	if err := ValidateName("publication", name); err != nil {
		return nil, err
	}
	p := &Publication{Name: name, Schemas: map[string]bool{}, Rels: map[uint32]outbox.Table{}}
	var (
		oid         uint32
		owner, mark bool
	)
	err := conn.QueryRow(ctx, `SELECT p.oid, p.puballtables, p.pubinsert, p.pubupdate, p.pubdelete, p.pubviaroot,
  p.pubowner = (SELECT oid FROM pg_roles WHERE rolname = current_user),
  coalesce(obj_description(p.oid, 'pg_publication'), '') = $2
FROM pg_publication p WHERE p.pubname = $1`, name, publicationMark).Scan(&oid, &p.AllTables, &p.Insert, &p.Update, &p.Delete, &p.ViaRoot, &owner, &mark)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("look up publication %s: %w", name, err)
	default:
		p.Exists = true
	}
	if p.Members, err = Members(ctx, conn, tables); err != nil {
		return nil, err
	}
	if !p.Exists {
		return p, nil
	}
	rows, err := conn.Query(ctx, `SELECT c.oid::bigint, n.nspname::text, c.relname::text FROM pg_publication_rel r
JOIN pg_class c ON c.oid = r.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE r.prpubid = $1`, oid)
	if err != nil {
		return nil, fmt.Errorf("look up publication %s: %w", name, err)
	}
	for rows.Next() {
		var (
			rel int64
			t   outbox.Table
		)
		if err := rows.Scan(&rel, &t.Schema, &t.Name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("look up publication %s: %w", name, err)
		}
		p.Rels[uint32(rel)] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up publication %s: %w", name, err)
	}
	rows, err = schemasOf(ctx, conn, oid)
	if err != nil {
		return nil, fmt.Errorf("look up publication %s: %w", name, err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return nil, fmt.Errorf("look up publication %s: %w", name, err)
		}
		p.Schemas[s] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up publication %s: %w", name, err)
	}
	extra := false
	for rel := range p.Rels {
		if !p.member(rel) {
			extra = true
		}
	}
	p.Ours = mark || (owner && p.Insert && !p.Update && !p.Delete && !p.Broad() && !extra)
	return p, nil
}

// schemasOf lists the schemas a publication publishes whole (none before
// PostgreSQL 15, which has no pg_publication_namespace).
func schemasOf(ctx context.Context, conn *pgx.Conn, pub uint32) (pgx.Rows, error) {
	var has bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('pg_catalog.pg_publication_namespace') IS NOT NULL").Scan(&has); err != nil {
		return nil, err
	}
	if !has {
		return conn.Query(ctx, "SELECT ''::text WHERE false")
	}
	return conn.Query(ctx, `SELECT n.nspname::text FROM pg_publication_namespace pn JOIN pg_namespace n ON n.oid = pn.pnnspid WHERE pn.pnpubid = $1`, pub)
}

func (p *Publication) member(oid uint32) bool {
	for _, m := range p.Members {
		if m.OID == oid {
			return true
		}
	}
	return false
}

// names tells whether the publication publishes a relation by itself: it
// names it, publishes all tables, or its schema.
func (p *Publication) names(m Member) bool {
	_, named := p.Rels[m.OID]
	return named || p.AllTables || p.Schemas[m.Self.Schema]
}

// fix is one thing wrong with a publication and the statement that puts it
// right.
type fix struct{ problem, sql string }

// check lists what keeps the publication from publishing every row of the
// pipeline's tables under a name the stream recognises, each with its fix,
// and the tables it publishes that are not the pipeline's (which have no
// fix pgoutbox may apply).
func (p *Publication) check(tables []outbox.Table) (fixes []fix, extra []outbox.Table) {
	name := p.Name
	partitioned := false
	for _, t := range tables {
		var root *Member
		for i := range p.Members {
			if m := &p.Members[i]; m.Root == t && m.IsRoot() {
				root = m
			}
		}
		if root == nil {
			continue // EnsurePublicationFor reports it
		}
		partitioned = partitioned || root.Kind == 'p'
		if !p.names(*root) {
			what := fmt.Sprintf("it does not publish %s", t)
			if root.Kind == 'p' && p.namesSomeBelow(t) {
				what = fmt.Sprintf("it publishes some partitions of %s, not the table: rows of the others are not published", t)
			}
			fixes = append(fixes, fix{what, fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s;", name, t.Quoted())})
		}
		// A table that inherits is published only when named itself:
		// one created after the publication is not.
		for _, m := range p.Members {
			if m.Root == t && !m.IsRoot() && !m.Partition && !p.names(m) {
				fixes = append(fixes, fix{fmt.Sprintf("%s inherits from %s and is not published: its rows are not streamed", m.Self, t),
					fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s;", name, m.Self.Quoted())})
			}
		}
	}
	if partitioned && !p.ViaRoot {
		fixes = append(fixes, fix{"publish_via_partition_root is off: the rows of a partitioned outbox table come under the names of its partitions",
			fmt.Sprintf("ALTER PUBLICATION %s SET (publish_via_partition_root = true);", name)})
	}
	if !p.Insert {
		fixes = append(fixes, fix{"it does not publish inserts", fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert, truncate');", name)})
	}
	for oid, t := range p.Rels {
		if !p.member(oid) {
			extra = append(extra, t)
		}
	}
	return fixes, extra
}

// namesSomeBelow tells whether the publication names a relation below t.
func (p *Publication) namesSomeBelow(t outbox.Table) bool {
	for _, m := range p.Members {
		if _, named := p.Rels[m.OID]; named && m.Root == t && !m.IsRoot() {
			return true
		}
	}
	return false
}

// Publishes is what a publication pgoutbox creates publishes besides the
// inserts and truncates of the pipeline's tables.
type Publishes struct {
	// Changes: their updates and deletes too (Config.ChangeEvents).
	Changes bool
	// AllTables: every table of the database, those created later too
	// (FOR ALL TABLES), where every table has a replica identity; with
	// one that has none, whose UPDATE and DELETE PostgreSQL would refuse
	// once published, the pipeline's tables only, with a warning. Only a
	// superuser may create it: a role that may not gets an error naming
	// the statement to run as one.
	AllTables bool
}

// EnsurePublication checks that the publication exists and publishes every
// row of the table; see EnsurePublicationFor.
func EnsurePublication(ctx context.Context, conn *pgx.Conn, name string, t outbox.Table, create bool) (PublicationSetup, error) {
	return EnsurePublicationFor(ctx, conn, name, []outbox.Table{t}, create, Publishes{})
}

// EnsurePublicationFor checks that the publication exists and publishes
// every row of the pipeline's outbox tables under a name the stream
// recognises: each table named, a table that inherits from one named too,
// and publish_via_partition_root on where a table is partitioned. With
// create, a missing publication is created for the tables' inserts and
// truncates only (the WAL sender ships nothing else), through the
// partition root, and marked as pgoutbox's with a comment. A publication of
// pgoutbox's that lacks something is fixed, and the fix returned; any
// other is left as it is (and so is pgoutbox's without create), and the
// error says what to run. A publication
// that also names tables outside the pipeline is refused: their rows
// would reach the relay, which does not relay them.
//
// With changes (change events: Config.ChangeEvents), the publication
// publishes updates and deletes too: one created does, and one of
// pgoutbox's is fixed to, unless a table (or a partition) has no replica
// identity, whose UPDATE and DELETE PostgreSQL refuses once a publication
// publishes them; that, and another's publication of inserts only, are
// warnings, not errors.
func EnsurePublicationFor(ctx context.Context, conn *pgx.Conn, name string, tables []outbox.Table, create bool, pub Publishes) (PublicationSetup, error) {
	var res PublicationSetup
	changes := pub.Changes
	p, err := InspectPublication(ctx, conn, name, tables)
	if err != nil {
		return res, err
	}
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = t.Quoted()
		found := false
		for _, m := range p.Members {
			found = found || (m.Root == t && m.IsRoot())
		}
		if !found {
			return res, fmt.Errorf("%w: %s (renamed, moved to another schema, or dropped?): pgoutbox relays the tables it is configured for (--table)", ErrNoTable, t)
		}
	}
	publish := "insert, truncate"
	if changes {
		bare, err := withoutIdentity(ctx, conn, p.Members)
		if err != nil {
			return res, err
		}
		switch {
		case len(bare) > 0 && (!p.Exists || !p.Update || !p.Delete):
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s ha%s no replica identity (no primary key, REPLICA IDENTITY DEFAULT or NOTHING): "+
				"PostgreSQL refuses an UPDATE or DELETE of a table a publication publishes those of, so publication %s does not, and their change events are not streamed; "+
				"to stream them, give each a primary key or run ALTER TABLE … REPLICA IDENTITY FULL, then ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate');",
				tablesString(bare), plural(len(bare), "s", "ve"), name, name))
		case p.Exists && (!p.Update || !p.Delete) && !(p.Ours && create):
			res.Warnings = append(res.Warnings, fmt.Sprintf("publication %s does not publish updates and deletes: their change events are not streamed (nor are they to Debezium); to stream them, run ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate');", name, name))
		default:
			publish = "insert, update, delete, truncate"
		}
	}
	createSQL := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = '%s', publish_via_partition_root = true)", name, strings.Join(quoted, ", "), publish)
	allTables := false
	if pub.AllTables && !p.Exists {
		bare, err := withoutIdentity(ctx, conn, nil)
		if err != nil {
			return res, err
		}
		if len(bare) == 0 {
			allTables = true
			createSQL = fmt.Sprintf("CREATE PUBLICATION %s FOR ALL TABLES WITH (publish = '%s', publish_via_partition_root = true)", name, publish)
		} else {
			res.Warnings = append(res.Warnings, fmt.Sprintf("publication %s publishes the pipeline's tables, not all tables: %s ha%s no replica identity, and PostgreSQL would refuse "+
				"its UPDATE and DELETE under a publication of all tables; a table created later is captured from the next start, its rows from before not streamed. "+
				"To capture one from its first row, run ALTER PUBLICATION %s ADD TABLE … in the transaction that creates it",
				name, tablesString(bare), plural(len(bare), "s", "ve"), name))
		}
	}
	if !p.Exists {
		if !create {
			return res, fmt.Errorf("%w: publication %s does not exist: run pgoutbox slot create, or %s;", ErrPublication, name, createSQL)
		}
		if _, err := conn.Exec(ctx, createSQL); err != nil {
			if isPrivilegeError(err) && allTables {
				return res, fmt.Errorf("%w: may not create publication %s FOR ALL TABLES, which captures the tables created later as Debezium's publication.autocreate.mode=all_tables does (only a superuser may): "+
					"run %s; as a superuser, or, to capture the tables that exist at start only, set publication.autocreate.mode=filtered (--publication-all-tables=false): %v", ErrNotReady, name, createSQL, err)
			}
			if isPrivilegeError(err) {
				return res, fmt.Errorf("%w: may not create publication %s (it needs CREATE on the database and ownership of %s): %v", ErrNotReady, name, strings.Join(quoted, ", "), err)
			}
			return res, fmt.Errorf("create publication %s: %w", name, err)
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("COMMENT ON PUBLICATION %s IS '%s'", name, publicationMark)); err != nil {
			return res, fmt.Errorf("mark publication %s: %w", name, err)
		}
		res.Created, res.AllTables = true, allTables
		return res, nil
	}
	fixes, extra := p.check(tables)
	if changes && publish != "insert, truncate" && (!p.Update || !p.Delete) {
		fixes = append(fixes, fix{"it does not publish updates and deletes, which change events carry",
			fmt.Sprintf("ALTER PUBLICATION %s SET (publish = '%s');", name, publish)})
	}
	if len(extra) > 0 {
		names := make([]string, len(extra))
		drops := make([]string, len(extra))
		for i, t := range extra {
			names[i], drops[i] = t.String(), t.Quoted()
		}
		return res, fmt.Errorf("%w: publication %s also publishes %s, which the pipeline (%s) does not relay: their rows would reach pgoutbox and stop it. "+
			"If they hold this pipeline's events, add them to it (--table); if another pipeline relays them through %s, give this one a publication of its own (--publication); "+
			"if neither, run ALTER PUBLICATION %s DROP TABLE %s;",
			ErrPublication, name, strings.Join(names, ", "), tablesString(tables), name, name, strings.Join(drops, ", "))
	}
	if len(fixes) == 0 {
		return res, nil
	}
	for _, f := range fixes {
		res.Problems = append(res.Problems, f.problem)
	}
	if !p.Ours || !create {
		sqls := make([]string, len(fixes))
		for i, f := range fixes {
			sqls[i] = f.sql
		}
		return res, fmt.Errorf("%w: publication %s: %s; %s: run %s",
			ErrPublication, name, strings.Join(res.Problems, "; "), notOurs(p.Ours), strings.Join(sqls, " "))
	}
	for _, f := range append(fixes, fix{sql: fmt.Sprintf("COMMENT ON PUBLICATION %s IS '%s';", name, publicationMark)}) {
		if _, err := conn.Exec(ctx, f.sql); err != nil {
			if isPrivilegeError(err) {
				return res, fmt.Errorf("%w: publication %s: %s; fixing it was refused (%v): run %s as its owner", ErrPublication, name, f.problem, err, f.sql)
			}
			return res, fmt.Errorf("fix publication %s: %s: %w", name, f.sql, err)
		}
		if f.problem != "" {
			res.Fixed = append(res.Fixed, f.sql)
		}
	}
	return res, nil
}

// withoutIdentity lists the members whose UPDATE and DELETE would fail
// under a publication publishing them: no replica identity (NOTHING, or
// DEFAULT without a primary key). A partitioned table holds no rows.
// With no members, it lists those of every table a publication of all
// tables publishes (the system's and unlogged and temporary tables aside).
func withoutIdentity(ctx context.Context, conn *pgx.Conn, members []Member) ([]outbox.Table, error) {
	oids := make([]uint32, 0, len(members))
	for _, m := range members {
		if m.Kind != 'p' {
			oids = append(oids, m.OID)
		}
	}
	rows, err := conn.Query(ctx, `SELECT n.nspname::text, c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE (CASE WHEN $2 THEN c.relkind = 'r' AND c.relpersistence = 'p' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
  ELSE c.oid = ANY($1::oid[]) END) AND (c.relreplident = 'n' OR (c.relreplident = 'd' AND NOT EXISTS
  (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))) ORDER BY 1, 2`, oids, members == nil)
	if err != nil {
		return nil, fmt.Errorf("look up replica identities: %w", err)
	}
	var out []outbox.Table
	for rows.Next() {
		var t outbox.Table
		if err := rows.Scan(&t.Schema, &t.Name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("look up replica identities: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up replica identities: %w", err)
	}
	return out, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func notOurs(ours bool) string {
	if ours {
		return "pgoutbox may not change it without --create-slot"
	}
	return "it is not pgoutbox's to change"
}

func tablesString(tables []outbox.Table) string {
	s := make([]string, len(tables))
	for i, t := range tables {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}
