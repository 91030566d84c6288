package replication

import (
	"slices"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// What check finds wrong with a publication of a pipeline's outbox, and
// the statement for each: a partitioned outbox needs the partition root
// and the table itself named; a table that inherits needs naming; a table
// outside the pipeline has no fix pgoutbox may apply.
func TestPublicationCheck(t *testing.T) {
	root, part, child := outbox.Table{Schema: "public", Name: "outbox"}, outbox.Table{Schema: "public", Name: "outbox_2026"}, outbox.Table{Schema: "public", Name: "outbox_archive"}
	partitioned := []Member{{OID: 1, Root: root, Self: root, Kind: 'p'}, {OID: 2, Root: root, Self: part, Kind: 'r', Partition: true, Level: 1}}
	inherited := []Member{{OID: 1, Root: root, Self: root, Kind: 'r'}, {OID: 3, Root: root, Self: child, Kind: 'r', Level: 1}}
	for _, tt := range []struct {
		name    string
		p       Publication
		want    []string // the fixes' statements, in order
		extra   []outbox.Table
		problem string
	}{
		{"partitioned, through the root", Publication{Insert: true, ViaRoot: true, Rels: map[uint32]outbox.Table{1: root}, Members: partitioned}, nil, nil, ""},
		{"partitioned, not through the root", Publication{Insert: true, Rels: map[uint32]outbox.Table{1: root}, Members: partitioned},
			[]string{"ALTER PUBLICATION p SET (publish_via_partition_root = true);"}, nil, "publish_via_partition_root is off"},
		{"a partition named, not the table", Publication{Insert: true, ViaRoot: true, Rels: map[uint32]outbox.Table{2: part}, Members: partitioned},
			[]string{`ALTER PUBLICATION p ADD TABLE "public"."outbox";`}, nil, "publishes some partitions of public.outbox"},
		{"all tables, not through the root", Publication{Insert: true, AllTables: true, Members: partitioned},
			[]string{"ALTER PUBLICATION p SET (publish_via_partition_root = true);"}, nil, ""},
		{"a table that inherits, left out", Publication{Insert: true, Rels: map[uint32]outbox.Table{1: root}, Members: inherited},
			[]string{`ALTER PUBLICATION p ADD TABLE "public"."outbox_archive";`}, nil, "inherits from public.outbox"},
		{"the schema published whole", Publication{Insert: true, Schemas: map[string]bool{"public": true}, Members: inherited}, nil, nil, ""},
		{"another table named", Publication{Insert: true, Rels: map[uint32]outbox.Table{1: root, 3: child, 9: {Schema: "public", Name: "notes"}}, Members: inherited},
			nil, []outbox.Table{{Schema: "public", Name: "notes"}}, ""},
		{"no inserts", Publication{Rels: map[uint32]outbox.Table{1: root}, Members: inherited[:1]},
			[]string{"ALTER PUBLICATION p SET (publish = 'insert, truncate');"}, nil, "does not publish inserts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.Name = "p"
			fixes, extra := tt.p.check([]outbox.Table{root})
			var got []string
			var problems string
			for _, f := range fixes {
				got = append(got, f.sql)
				problems += f.problem + "; "
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(extra, tt.extra) || !strings.Contains(problems, tt.problem) {
				t.Fatalf("fixes %q (%s), extra %v; want %q (%s), %v", got, problems, extra, tt.want, tt.problem, tt.extra)
			}
		})
	}
}
