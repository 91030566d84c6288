package replication

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// msgUpdateOld is an update carrying its old row: kind 'K' (the key) or
// 'O' (REPLICA IDENTITY FULL). A value of unchanged is an unchanged TOAST
// value ('u') in the new row.
func msgUpdateOld(rel uint32, kind byte, old [][]byte, new ...[]byte) []byte {
	b := []byte{'U'}
	b = binary.BigEndian.AppendUint32(b, rel)
	b = tuple(append(b, kind), old...)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(new)))
	for _, v := range new {
		switch {
		case v == nil:
			b = append(b, 'n')
		case string(v) == unchanged:
			b = append(b, 'u')
		default:
			b = append(b, 't')
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

const unchanged = "\x00unchanged"

// Under ChangeEvents the updates and deletes of the pipeline's tables are
// rows with their operation and old row; of other tables they are counted
// and skipped, and OnUpdate is not called.
func TestDecodeChangeEvents(t *testing.T) {
	cols := []schema.Column{{Name: "id", TypeOID: 23}, {Name: "name", TypeOID: 25}, {Name: "doc", TypeOID: 25}}
	counters := &Counters{}
	d := newDecoder(newRelations([]outbox.Table{{Schema: "public", Name: "customers"}}, nil, true), counters) // a publication of all tables
	d.changeEvents = true
	d.onUpdate = func(outbox.Table, pglogrepl.LSN) error { t.Error("OnUpdate called under ChangeEvents"); return nil }
	var got []outbox.Change
	for i, m := range [][]byte{
		msgRelation(1, "public", "customers", cols...),
		msgRelation(2, "public", "orders", schema.Column{Name: "id", TypeOID: 23}),
		msgBegin(0x200, 7),
		msgUpdate(1, []byte("1"), []byte("Kim"), []byte("d")),
		msgUpdateOld(1, 'O', [][]byte{[]byte("1"), []byte("Kim"), []byte("long")}, []byte("1"), nil, []byte(unchanged)),
		msgUpdateOld(1, 'K', [][]byte{[]byte("1"), nil, nil}, []byte("2"), []byte("Kim"), nil),
		msgDelete(1, []byte("2"), nil, nil),
		msgUpdate(2, []byte("9")),
		msgDelete(2, []byte("9")),
		msgCommit(0x200, 0x210),
	} {
		c, ok, err := d.decode(pglogrepl.LSN(0x100+i), m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if ok && c.Kind == outbox.KindRow {
			got = append(got, c)
		}
	}
	str := func(vs [][]byte) []string {
		if vs == nil {
			return nil
		}
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = "NULL"
			if v != nil {
				out[i] = string(v)
			}
		}
		return out
	}
	want := []struct {
		op        schema.Op
		values    []string
		old       []string
		full      bool
		unchanged []bool
	}{
		{schema.OpUpdate, []string{"1", "Kim", "d"}, nil, false, nil},
		{schema.OpUpdate, []string{"1", "NULL", "NULL"}, []string{"1", "Kim", "long"}, true, []bool{false, false, true}},
		{schema.OpUpdate, []string{"2", "Kim", "NULL"}, []string{"1", "NULL", "NULL"}, false, nil},
		{schema.OpDelete, []string{"2", "NULL", "NULL"}, []string{"2", "NULL", "NULL"}, false, nil},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Op != w.op || !slices.Equal(str(g.Values), w.values) || !slices.Equal(str(g.Old), w.old) || g.OldFull != w.full || !slices.Equal(g.Unchanged, w.unchanged) {
			t.Errorf("row %d: op %d values %v old %v full %v unchanged %v; want %+v", i, g.Op, str(g.Values), str(g.Old), g.OldFull, g.Unchanged, w)
		}
		if g.Relation.Name != "customers" || g.XID != 7 || g.FinalLSN != 0x200 || g.Ordinal != uint32(i+1) {
			t.Errorf("row %d: relation %s, xid %d, final %s, ordinal %d", i, g.Relation.Name, g.XID, g.FinalLSN, g.Ordinal)
		}
	}
	if n := counters.OtherTables.Load(); n != 2 {
		t.Errorf("%d changes of other tables counted, want 2", n)
	}
}

// An unchanged TOAST value is refused outside an update's new row: an
// insert sends every value.
func TestDecodeUnchangedToastInInsert(t *testing.T) {
	d := newDecoder(newRelations([]outbox.Table{{Schema: "public", Name: "customers"}}, nil, false), &Counters{})
	d.changeEvents = true
	b := []byte{'I'}
	b = binary.BigEndian.AppendUint32(b, 1)
	b = append(b, 'N', 0, 1, 'u')
	for i, m := range [][]byte{msgRelation(1, "public", "customers", schema.Column{Name: "id", TypeOID: 25}), msgBegin(0x200, 7), b} {
		_, _, err := d.decode(pglogrepl.LSN(0x100+i), m)
		if i < 2 && err != nil {
			t.Fatal(err)
		}
		if i == 2 && err == nil {
			t.Error("an insert with an unchanged TOAST value was taken")
		}
	}
}

// Under Truncates, a TRUNCATE of the pipeline's tables is a row per table
// (op t, its relation, every value null), in the order the message names
// them, the first returned and the others held in more for the stream;
// another table of the message is counted and skipped. Without it, the
// truncate is counted and reported, and yields no row.
func TestDecodeTruncates(t *testing.T) {
	for _, truncates := range []bool{true, false} {
		var counters Counters
		rels := newRelations([]outbox.Table{{Schema: "public", Name: "a"}, {Schema: "public", Name: "b"}}, nil, true)
		d := newDecoder(rels, &counters)
		d.changeEvents, d.truncates = true, truncates
		cols := []schema.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "note", TypeOID: 25}}
		for _, m := range [][]byte{msgRelation(1, "public", "a", cols...), msgRelation(2, "public", "b", cols...),
			msgRelation(3, "public", "other", cols...), msgBegin(0x300, 9)} {
			if _, _, err := d.decode(0x10, m); err != nil {
				t.Fatal(err)
			}
		}
		c, ok, err := d.decode(0x20, msgTruncate(2, 3, 1))
		if err != nil {
			t.Fatal(err)
		}
		if !truncates {
			if ok || len(d.more) != 0 || counters.Truncates.Load() != 2 || len(d.truncated) != 2 {
				t.Errorf("without Truncates: row %v, %d more, %d truncates counted", ok, len(d.more), counters.Truncates.Load())
			}
			continue
		}
		got := []outbox.Change{c}
		got = append(got, d.more...)
		if !ok || len(got) != 2 || counters.OtherTables.Load() != 1 {
			t.Fatalf("want two rows and the other table counted: ok %v, %d rows, %d other", ok, len(got), counters.OtherTables.Load())
		}
		for i, want := range []string{"b", "a"} {
			g := got[i]
			if g.Op != schema.OpTruncate || g.Relation.Name != want || len(g.Values) != 2 || g.Values[0] != nil || g.Ordinal != uint32(i+1) || g.FinalLSN != 0x300 || g.XID != 9 {
				t.Errorf("row %d: %+v, want public.%s truncated", i, g, want)
			}
		}
	}
}
