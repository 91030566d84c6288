package replication

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// Member is a relation that holds a pipeline's outbox rows: an outbox
// table itself, or a table below it (a partition at any level, or a table
// that inherits from it). Rows of a member are rows of Root: polling reads
// them through Root, and the stream publishes them as Root's.
type Member struct {
	OID  uint32
	Root outbox.Table // the outbox table
	Self outbox.Table // the member's own name
	// Kind is pg_class.relkind: 'r' a table, 'p' a partitioned table
	// (which holds no rows of its own).
	Kind byte
	// Partition says Self is a partition of its parent; false for Root
	// and for a table that inherits.
	Partition bool
	Level     int // 0 for Root
}

// IsRoot tells the outbox table itself.
func (m Member) IsRoot() bool { return m.Level == 0 }

// Members lists the outbox tables and every relation below them, by
// pg_inherits, which records both partitions and inheritance. A table that
// does not exist has no members.
func Members(ctx context.Context, conn *pgx.Conn, tables []outbox.Table) ([]Member, error) {
	var out []Member
	for _, t := range tables {
		rows, err := conn.Query(ctx, `
WITH RECURSIVE tree AS (
  SELECT c.oid AS relid, 0 AS level FROM pg_class c WHERE c.oid = to_regclass($1)
  UNION ALL
  SELECT i.inhrelid, tree.level + 1 FROM pg_inherits i JOIN tree ON i.inhparent = tree.relid
)
SELECT tree.relid::oid::bigint, n.nspname::text, c.relname::text, c.relkind::text, c.relispartition, tree.level
FROM tree JOIN pg_class c ON c.oid = tree.relid JOIN pg_namespace n ON n.oid = c.relnamespace
ORDER BY tree.level, c.oid`, t.Quoted())
		if err != nil {
			return nil, fmt.Errorf("read the relations of %s: %w", t, err)
		}
		for rows.Next() {
			var (
				m    Member
				oid  int64
				kind string
			)
			if err := rows.Scan(&oid, &m.Self.Schema, &m.Self.Name, &kind, &m.Partition, &m.Level); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read the relations of %s: %w", t, err)
			}
			m.OID, m.Root = uint32(oid), t
			if kind != "" {
				m.Kind = kind[0]
			}
			out = append(out, m)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read the relations of %s: %w", t, err)
		}
	}
	return out, nil
}

// Leaves are the members that hold rows (all but partitioned tables).
func Leaves(members []Member) []Member {
	var out []Member
	for _, m := range members {
		if m.Kind != 'p' {
			out = append(out, m)
		}
	}
	return out
}

// relationClass is what a relation of the stream is to the pipeline.
type relationClass uint8

const (
	// classUnknown: not known to be an outbox table; looked up again at
	// its first row.
	classUnknown relationClass = iota
	// classOutbox: an outbox table, or a member below one.
	classOutbox
	// classRenamed: an outbox table under a name other than the one the
	// pipeline is configured for (renamed, or moved to another schema,
	// since the stream started); its rows are the table's.
	classRenamed
	// classOther: a table the publication publishes by design (FOR ALL
	// TABLES, or TABLES IN SCHEMA) that is not an outbox table: its rows
	// are counted and skipped.
	classOther
	// classGone: a table the publication does not publish any more (or
	// that no longer exists), whose rows from before are still in the
	// slot: they are counted, reported and skipped.
	classGone
)

// relations tells, for the stream, which relations are outbox tables: by
// the name a Relation message gives (the name at that point of the
// stream), and by OID for the relations below an outbox table, whose rows
// pgoutput sends under their own names when the publication does not
// publish through the partition root.
type relations struct {
	names map[outbox.Table]bool
	byOID map[uint32]Member
	// broad: the publication publishes tables other than the outbox
	// tables by design; their rows are counted and skipped.
	broad bool
	// named are the relations the publication names, as last read.
	named map[uint32]bool
	// tables are the pipeline's tables, with those captured since the
	// stream started (Config.Captures), which decides on each table that
	// is none of theirs; nil captures none.
	tables   []outbox.Table
	captures func(outbox.Table) bool
	// load reads the publication and the members of tables again from
	// the catalog; nil in tests.
	load func(tables []outbox.Table) (*Publication, error)
}

func newRelations(tables []outbox.Table, members []Member, broad bool) *relations {
	r := &relations{names: make(map[outbox.Table]bool, len(tables)), byOID: membersByOID(members), broad: broad, tables: slices.Clone(tables)}
	for _, t := range tables {
		r.names[t] = true
	}
	return r
}

// classify says what the relation of a Relation message is, and the
// outbox table its rows belong to.
func (r *relations) classify(oid uint32, name outbox.Table) (relationClass, outbox.Table) {
	if r.names[name] {
		return classOutbox, name
	}
	if m, ok := r.byOID[oid]; ok {
		if m.IsRoot() {
			return classRenamed, m.Root
		}
		return classOutbox, m.Root
	}
	return classUnknown, outbox.Table{}
}

// reload reads the publication and the members again (a partition
// attached, a table that inherits created, a table taken out of the
// publication since the stream started), then classifies oid, under name,
// for good: what is still unknown is another table of a broad
// publication, a table the publication no longer publishes, or (left
// unknown) one it names without being the pipeline's; unless captures
// takes it as the pipeline's, from then on.
func (r *relations) reload(oid uint32, name outbox.Table) (relationClass, outbox.Table, error) {
	if r.load != nil {
		p, err := r.load(r.tables)
		if err != nil {
			return classUnknown, outbox.Table{}, err
		}
		r.byOID, r.broad, r.named = membersByOID(p.Members), p.Broad(), make(map[uint32]bool, len(p.Rels))
		for id := range p.Rels {
			r.named[id] = true
		}
	}
	class, root := r.classify(oid, name)
	switch {
	case class != classUnknown:
	case r.captures != nil && r.captures(name):
		class, root = classOutbox, name
		r.names[name] = true
		r.tables = append(r.tables, name)
		r.byOID[oid] = Member{OID: oid, Root: name, Self: name}
	case r.broad:
		class = classOther
	case r.named != nil && !r.named[oid]:
		class = classGone
	}
	return class, root, nil
}

func membersByOID(members []Member) map[uint32]Member {
	out := make(map[uint32]Member, len(members))
	for _, m := range members {
		out[m.OID] = m
	}
	return out
}
