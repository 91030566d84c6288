package poll

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/pgcluster"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// The order a snapshot reads a table in, for the shapes a table has: its
// insertion order where every row has one; the rows without one first,
// by a time column where it has one, else as they lie on disk, which is
// how Debezium's snapshot reads a table: after VACUUM freed space a new
// row goes out first; partitions in the order of their bounds, not of
// their creation.
func TestSnapshotOrder(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// setup makes public.t, whose rows have a text column ev.
		setup      []string
		preferred  string
		timeColumn string
		where      string
		want       Order
		wantEvents []string
	}{
		{
			name: "an identity column: insertion order, whatever lies where",
			setup: append(reusedSpace("id bigint GENERATED ALWAYS AS IDENTITY, ev text, at timestamptz"),
				"UPDATE t SET ev = ev WHERE ev = 'b'"),
			preferred: "seq", timeColumn: "at",
			want:       Order{Column: "id"},
			wantEvents: []string{"a", "b", "c", "new"},
		},
		{
			name:       "no order column: as the rows lie, a new row in space VACUUM freed first",
			setup:      reusedSpace("id uuid PRIMARY KEY DEFAULT gen_random_uuid(), ev text, at timestamptz"),
			preferred:  "seq",
			want:       Order{},
			wantEvents: []string{"new", "a", "b", "c"},
		},
		{
			name: "no order column, an index that would read the pending rows in the order of their ids: as the rows lie",
			setup: []string{
				"CREATE TABLE t (id uuid PRIMARY KEY, ev text, at timestamptz, published_at timestamptz) WITH (autovacuum_enabled = off)",
				"CREATE INDEX ON t (id) WHERE published_at IS NULL",
				"INSERT INTO t (id, ev, at, published_at) SELECT gen_random_uuid(), 'filler', '2023-01-01', now() FROM generate_series(1, 1000)",
				"INSERT INTO t (id, ev, at) VALUES ('00000000-0000-0000-0000-000000000001', 'a', '2024-01-01'), ('00000000-0000-0000-0000-000000000002', 'b', '2024-01-02'), ('00000000-0000-0000-0000-000000000003', 'c', '2024-01-03')",
				"INSERT INTO t (id, ev, at, published_at) SELECT gen_random_uuid(), 'filler', '2023-01-01', now() FROM generate_series(1, 5000)",
				"DELETE FROM t WHERE ev = 'filler' AND ctid < '(3,0)'",
				"VACUUM ANALYZE t",
				"INSERT INTO t (id, ev, at) VALUES ('ffffffff-0000-0000-0000-000000000000', 'new', '2025-01-01')",
			},
			preferred:  "seq",
			where:      "published_at IS NULL",
			want:       Order{},
			wantEvents: []string{"new", "a", "b", "c"},
		},
		{
			name:       "a time column: by its values, then as the rows lie",
			setup:      reusedSpace("id uuid PRIMARY KEY DEFAULT gen_random_uuid(), ev text, at timestamptz"),
			preferred:  "seq",
			timeColumn: "at",
			want:       Order{Time: "at"},
			wantEvents: []string{"a", "b", "c", "new"},
		},
		{
			name:       "a time column of another type is not an order",
			setup:      reusedSpace("id uuid PRIMARY KEY DEFAULT gen_random_uuid(), ev text, at text"),
			preferred:  "seq",
			timeColumn: "at",
			want:       Order{},
			wantEvents: []string{"new", "a", "b", "c"},
		},
		{
			name: "an order column added later: the rows without it first, as they lie, then by it",
			setup: append(reusedSpace("id uuid PRIMARY KEY DEFAULT gen_random_uuid(), ev text, at timestamptz"),
				"ALTER TABLE t ADD COLUMN seq bigint",
				"CREATE SEQUENCE t_seq OWNED BY t.seq",
				"ALTER TABLE t ALTER COLUMN seq SET DEFAULT nextval('t_seq')",
				"INSERT INTO t (ev) VALUES ('s1'), ('s2')",
				// s0 has the lowest seq yet lies after s1 and s2.
				"INSERT INTO t (ev, seq) VALUES ('s0', 0)"),
			preferred:  "seq",
			want:       Order{Column: "seq", Partial: true},
			wantEvents: []string{"new", "a", "b", "c", "s0", "s1", "s2"},
		},
		{
			name: "partitions in the order of their bounds",
			setup: []string{
				"CREATE TABLE t (id uuid NOT NULL DEFAULT gen_random_uuid(), ev text, at timestamptz NOT NULL) PARTITION BY RANGE (at)",
				"CREATE TABLE t_2025 PARTITION OF t FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')",
				"CREATE TABLE t_2024 PARTITION OF t FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')",
				"INSERT INTO t (ev, at) VALUES ('2025-a', '2025-02-01'), ('2024-a', '2024-02-01'), ('2024-b', '2024-01-15'), ('2025-b', '2025-01-15')",
			},
			preferred:  "seq",
			want:       Order{},
			wantEvents: []string{"2024-a", "2024-b", "2025-a", "2025-b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := pgx.Connect(ctx, pgcluster.NewDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			for _, q := range tc.setup {
				// A session that inserted keeps the page it inserted into:
				// the row "new" comes from another, which asks the free
				// space map.
				c := conn
				if strings.Contains(q, "'new'") {
					if c, err = pgx.ConnectConfig(ctx, conn.Config()); err != nil {
						t.Fatal(err)
					}
					defer c.Close(ctx)
				}
				if _, err := c.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if strings.Contains(strings.Join(tc.setup, ";"), "'new'") {
				var first string
				if err := conn.QueryRow(ctx, "SELECT ev FROM t ORDER BY ctid LIMIT 1").Scan(&first); err != nil || first != "new" {
					t.Fatalf("the row new does not lie first (%q, %v): the case proves nothing", first, err)
				}
			}
			table := outbox.Table{Schema: "public", Name: "t"}
			o, err := SnapshotOrder(ctx, conn, table, tc.preferred, tc.timeColumn)
			if err != nil {
				t.Fatal(err)
			}
			if o != tc.want {
				t.Fatalf("order %+v, want %+v", o, tc.want)
			}
			if got := readSnapshot(t, conn, table, o, tc.where, 2); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("read %v, want %v", got, tc.wantEvents)
			}
		})
	}
}

// reusedSpace makes public.t with columns, enough rows to fill its first
// pages, three rows of 2024 (a, b, c), deletes the first rows and
// vacuums: the row "new" of 2025, inserted last, lies in the first page.
func reusedSpace(columns string) []string {
	return []string{
		"CREATE TABLE t (" + columns + ") WITH (autovacuum_enabled = off)",
		"INSERT INTO t (ev, at) SELECT 'filler', '2023-01-01' FROM generate_series(1, 1000)",
		"INSERT INTO t (ev, at) VALUES ('a', '2024-01-01'), ('b', '2024-01-02'), ('c', '2024-01-03')",
		"DELETE FROM t WHERE ev = 'filler'",
		"VACUUM t",
		"INSERT INTO t (ev, at) VALUES ('new', '2025-01-01')",
	}
}

// readSnapshot reads the table's rows where where holds as an exported
// snapshot sees them, batch rows at a time, and returns their ev values
// in the order read.
func readSnapshot(t *testing.T, conn *pgx.Conn, table outbox.Table, o Order, where string, batch int) []string {
	t.Helper()
	ctx := context.Background()
	exporter, err := pgx.ConnectConfig(ctx, conn.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer exporter.Close(ctx)
	tx, err := exporter.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var snapshot string
	if err := tx.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&snapshot); err != nil {
		t.Fatal(err)
	}
	reader, err := pgx.ConnectConfig(ctx, conn.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	rd, err := OpenSnapshot(ctx, reader, snapshot, table, o, where, batch)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close(ctx)
	var got []string
	for {
		rows, err := rd.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			ev := column(r.Relation, r.Values, "ev")
			if !strings.HasPrefix(ev, "filler") {
				got = append(got, ev)
			}
		}
	}
	if int(rd.Read()) < len(got) {
		t.Errorf("Read %d, fewer than the %d rows returned", rd.Read(), len(got))
	}
	return got
}

func column(rel *outbox.Relation, values [][]byte, name string) string {
	for i, c := range rel.Columns {
		if c.Name == name {
			return string(values[i])
		}
	}
	return ""
}
