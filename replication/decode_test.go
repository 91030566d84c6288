package replication

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// pgoutput protocol 1 messages, built as the server sends them.

func msgBegin(final pglogrepl.LSN, xid uint32) []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, uint64(final))
	b = binary.BigEndian.AppendUint64(b, uint64(time.Second.Microseconds()))
	return binary.BigEndian.AppendUint32(b, xid)
}

func msgCommit(commit, end pglogrepl.LSN) []byte {
	b := []byte{'C', 0}
	b = binary.BigEndian.AppendUint64(b, uint64(commit))
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	return binary.BigEndian.AppendUint64(b, uint64(time.Second.Microseconds()))
}

func msgRelation(id uint32, ns, name string, cols ...schema.Column) []byte {
	b := []byte{'R'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(append(b, ns...), 0)
	b = append(append(b, name...), 0)
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		flags := byte(0)
		if c.Key {
			flags = 1
		}
		b = append(b, flags)
		b = append(append(b, c.Name...), 0)
		b = binary.BigEndian.AppendUint32(b, c.TypeOID)
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

// tuple appends tuple data; a nil value is NULL.
func tuple(b []byte, values ...[]byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(values)))
	for _, v := range values {
		if v == nil {
			b = append(b, 'n')
			continue
		}
		b = append(b, 't')
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

func msgInsert(rel uint32, values ...[]byte) []byte {
	b := []byte{'I'}
	b = binary.BigEndian.AppendUint32(b, rel)
	return tuple(append(b, 'N'), values...)
}

func msgUpdate(rel uint32, values ...[]byte) []byte {
	b := []byte{'U'}
	b = binary.BigEndian.AppendUint32(b, rel)
	return tuple(append(b, 'N'), values...)
}

func msgDelete(rel uint32, values ...[]byte) []byte {
	b := []byte{'D'}
	b = binary.BigEndian.AppendUint32(b, rel)
	return tuple(append(b, 'K'), values...)
}

func msgTruncate(rels ...uint32) []byte {
	b := []byte{'T'}
	b = binary.BigEndian.AppendUint32(b, uint32(len(rels)))
	b = append(b, 0)
	for _, r := range rels {
		b = binary.BigEndian.AppendUint32(b, r)
	}
	return b
}

func msgMessage(lsn pglogrepl.LSN, transactional bool, prefix, content string) []byte {
	b := []byte{'M', 0}
	if transactional {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint64(b, uint64(lsn))
	b = append(append(b, prefix...), 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

var outboxCols = []schema.Column{{Name: "id", TypeOID: 2950}, {Name: "aggregatetype", TypeOID: 25}, {Name: "aggregateid", TypeOID: 25}, {Name: "payload", TypeOID: 3802}}

// outboxOnly is the relations of a pipeline of public.outbox alone, with a
// publication that publishes only it.
func outboxOnly() *relations {
	return newRelations([]outbox.Table{{Schema: "public", Name: "outbox"}}, nil, false)
}

// The rows of other tables that a publication of all tables publishes are
// counted and skipped.
func TestDecodeTransaction(t *testing.T) {
	var counters Counters
	d := newDecoder(newRelations([]outbox.Table{{Schema: "public", Name: "outbox"}}, nil, true), &counters)
	feed := [][]byte{
		msgRelation(1, "public", "outbox", outboxCols...),
		msgRelation(2, "public", "orders", schema.Column{Name: "id", TypeOID: 23}),
		msgBegin(0x200, 7),
		msgInsert(1, []byte("u1"), []byte("order"), []byte("42"), []byte(`{"a":1}`)),
		msgInsert(2, []byte("1")),
		msgInsert(1, []byte("u2"), []byte("order"), []byte(""), nil),
		msgUpdate(1, []byte("u1"), []byte("order"), []byte("42"), []byte(`{}`)),
		msgDelete(1, []byte("u1"), nil, nil, nil),
		msgTruncate(1, 2),
		msgCommit(0x1f0, 0x200),
		msgMessage(0x300, false, HeartbeatPrefix, "pgoutbox"),
		msgMessage(0x310, false, "other", "x"),
		msgMessage(0x320, true, HeartbeatPrefix, "x"),
	}
	var got []outbox.Change
	for i, m := range feed {
		c, ok, err := d.decode(pglogrepl.LSN(0x100+i), m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if ok {
			got = append(got, c)
		}
	}
	if len(got) != 4 {
		t.Fatalf("got %d changes, want 4: %+v", len(got), got)
	}
	if got[0].Kind != outbox.KindRow || string(got[0].Values[0]) != "u1" || got[0].XID != 7 || got[0].Relation.Name != "outbox" {
		t.Errorf("first row: %+v", got[0])
	}
	if v := got[1].Values; v[2] == nil || len(v[2]) != 0 || v[3] != nil {
		t.Errorf("empty text must stay distinct from NULL: %q", v)
	}
	if got[2].Kind != outbox.KindCommit || got[2].LSN != 0x200 {
		t.Errorf("commit: %+v", got[2])
	}
	if got[3].Kind != outbox.KindHeartbeat || got[3].LSN != 0x300 {
		t.Errorf("heartbeat: %+v", got[3])
	}
	if n := counters.Rows.Load(); n != 2 {
		t.Errorf("rows %d", n)
	}
	if n := counters.Ignored.Load(); n != 3 { // update, delete, truncate of the outbox
		t.Errorf("ignored %d, want 3", n)
	}
	if n := counters.Truncates.Load(); n != 1 {
		t.Errorf("truncates %d, want 1", n)
	}
	if n := counters.OtherTables.Load(); n != 2 { // insert into and truncate of orders
		t.Errorf("other tables %d, want 2", n)
	}
	if n := counters.Heartbeats.Load(); n != 1 {
		t.Errorf("heartbeats %d", n)
	}
}

// An UPDATE of an outbox table reaches OnUpdate (table.op.invalid.behavior);
// one of another table does not, nor does a delete. An error from it ends
// decoding at the update.
func TestDecodeUpdateReachesOnUpdate(t *testing.T) {
	stop := errors.New("fatal")
	for _, tc := range []struct {
		ret  error
		want error
	}{{nil, nil}, {stop, stop}} {
		d := newDecoder(outboxOnly(), &Counters{})
		var seen []string
		d.onUpdate = func(tab outbox.Table, lsn pglogrepl.LSN) error {
			seen = append(seen, tab.String()+"@"+lsn.String())
			return tc.ret
		}
		var err error
		for i, m := range [][]byte{
			msgRelation(1, "public", "outbox", outboxCols...),
			msgRelation(2, "public", "orders", schema.Column{Name: "id", TypeOID: 23}),
			msgBegin(0x200, 7),
			msgUpdate(2, []byte("1")),
			msgDelete(1, []byte("u1"), nil, nil, nil),
			msgUpdate(1, []byte("u1"), []byte("order"), []byte("42"), []byte(`{}`)),
		} {
			if _, _, err = d.decode(pglogrepl.LSN(0x100+i), m); err != nil {
				break
			}
		}
		if !errors.Is(err, tc.want) || strings.Join(seen, ",") != "public.outbox@0/105" {
			t.Errorf("returning %v: err %v, updates seen %v", tc.ret, err, seen)
		}
	}
}

// A Relation message sent again (after ALTER TABLE) replaces the cached
// shape: values map to the new columns by name from then on.
func TestDecodeRelationRefresh(t *testing.T) {
	d := newDecoder(outboxOnly(), &Counters{})
	steps := [][]byte{
		msgRelation(1, "public", "outbox", outboxCols...),
		msgBegin(0x10, 1),
		msgInsert(1, []byte("a"), []byte("t"), []byte("k"), []byte("{}")),
		msgCommit(0x10, 0x10),
		msgRelation(1, "public", "outbox", append([]schema.Column{{Name: "extra", TypeOID: 25, Key: true}}, outboxCols...)...),
		msgBegin(0x20, 2),
		msgInsert(1, []byte("x"), []byte("b"), []byte("t"), []byte("k"), []byte("{}")),
	}
	var rows []outbox.Change
	for _, m := range steps {
		c, ok, err := d.decode(1, m)
		if err != nil {
			t.Fatal(err)
		}
		if ok && c.Kind == outbox.KindRow {
			rows = append(rows, c)
		}
	}
	if len(rows) != 2 || rows[0].Relation == rows[1].Relation {
		t.Fatalf("relation not refreshed: %+v", rows)
	}
	if rows[1].Relation.Columns[0].Name != "extra" || len(rows[1].Values) != 5 {
		t.Fatalf("new shape not applied: %+v", rows[1].Relation)
	}
	// The replica identity's flag (a change event's key where the
	// catalog no longer has the table).
	if !rows[1].Relation.Columns[0].Key || rows[1].Relation.Columns[1].Key {
		t.Errorf("key flags: %+v", rows[1].Relation.Columns)
	}
}

// What arrives through the publication from a relation other than the
// outbox table: a partition's rows are the table's, under its name and
// with the partition's own columns, and so are the rows of the outbox
// table under another name (renamed since the stream started); the rows of
// a table the publication names and the pipeline does not stop the
// stream, unless the publication publishes other tables by design (all
// tables), whose rows are skipped, as are those of a table it no longer
// publishes; a relation the catalog knows only once it is read again
// (attached since the start) is the table's; a table the pipeline's
// patterns capture (Config.Captures) is one of its tables from its first
// row, unless it is below one of them.
func TestDecodeRelations(t *testing.T) {
	root := outbox.Table{Schema: "public", Name: "outbox"}
	members := []Member{
		{OID: 1, Root: root, Self: root, Kind: 'p'},
		{OID: 2, Root: root, Self: outbox.Table{Schema: "public", Name: "outbox_2026"}, Kind: 'r', Partition: true, Level: 1},
	}
	leafCols := append([]schema.Column{{Name: "created_at", TypeOID: 1184}}, outboxCols...)
	row := [][]byte{[]byte("2026-01-01"), []byte("u1"), []byte("order"), []byte("42"), []byte(`{}`)}
	tests := []struct {
		name     string
		broad    bool
		attached bool   // relation 3 is a member once the catalog is read again
		named    bool   // the publication names relation 3
		captures string // Config.Captures takes the tables of this name
		rel      []byte
		oid      uint32
		want     string // the relation the row is handed over as; "" for an error, "-" skipped
	}{
		{"partition", false, false, false, "", msgRelation(2, "public", "outbox_2026", leafCols...), 2, "public.outbox"},
		{"root", false, false, false, "", msgRelation(1, "public", "outbox", leafCols...), 1, "public.outbox"},
		{"renamed", false, false, false, "", msgRelation(1, "public", "outbox_old", leafCols...), 1, "public.outbox"},
		{"moved", true, false, false, "", msgRelation(1, "archive", "outbox", leafCols...), 1, "public.outbox"},
		{"named by the publication", false, false, true, "", msgRelation(3, "public", "orders", leafCols...), 3, ""},
		{"no longer published", false, false, false, "", msgRelation(3, "public", "orders", leafCols...), 3, "-"},
		{"other of a publication of all tables", true, false, true, "", msgRelation(3, "public", "orders", leafCols...), 3, "-"},
		{"attached since the start", false, true, false, "", msgRelation(3, "public", "outbox_2027", leafCols...), 3, "public.outbox"},
		{"created since the start, captured", true, false, false, "public.orders", msgRelation(3, "public", "orders", leafCols...), 3, "public.orders"},
		{"created since the start, not captured", true, false, false, "public.refunds", msgRelation(3, "public", "orders", leafCols...), 3, "-"},
		{"named by the publication, captured", false, false, true, "public.orders", msgRelation(3, "public", "orders", leafCols...), 3, "public.orders"},
		{"attached since the start, of a name captured", true, true, false, "public.outbox_2027", msgRelation(3, "public", "outbox_2027", leafCols...), 3, "public.outbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rels := newRelations([]outbox.Table{root}, members, tt.broad)
			if tt.captures != "" {
				rels.captures = func(t outbox.Table) bool { return t.String() == tt.captures }
			}
			loads := 0
			rels.load = func([]outbox.Table) (*Publication, error) {
				loads++
				p := &Publication{Members: members, AllTables: tt.broad, Rels: map[uint32]outbox.Table{1: root}}
				if tt.attached {
					p.Members = append(p.Members, Member{OID: 3, Root: root, Self: outbox.Table{Schema: "public", Name: "outbox_2027"}, Kind: 'r', Partition: true, Level: 1})
				}
				if tt.named {
					p.Rels[3] = outbox.Table{Schema: "public", Name: "orders"}
				}
				return p, nil
			}
			var counters Counters
			d := newDecoder(rels, &counters)
			var (
				got []outbox.Change
				err error
			)
			for _, m := range [][]byte{tt.rel, msgBegin(0x20, 5), msgInsert(tt.oid, row...), msgInsert(tt.oid, row...)} {
				var c outbox.Change
				var ok bool
				if c, ok, err = d.decode(0x10, m); err != nil {
					break
				}
				if ok {
					got = append(got, c)
				}
			}
			switch tt.want {
			case "":
				var ue *UnrecognisedError
				if !errors.As(err, &ue) || ue.OID != tt.oid || !permanentErr(err) {
					t.Fatalf("want an unrecognised relation error, got %v", err)
				}
			case "-":
				if err != nil || len(got) != 0 || counters.OtherTables.Load() != 2 {
					t.Fatalf("want the rows skipped and counted: err %v, %d changes, %d other", err, len(got), counters.OtherTables.Load())
				}
			default:
				if err != nil || len(got) != 2 {
					t.Fatalf("err %v, %d changes", err, len(got))
				}
				rel := got[0].Relation
				if n := rel.Schema + "." + rel.Name; n != tt.want || rel.Columns[0].Name != "created_at" || string(got[0].Values[1]) != "u1" {
					t.Fatalf("row handed over as %s with columns %v", n, rel.Columns)
				}
			}
			if wantLoads := map[bool]int{true: 0, false: 1}[tt.oid != 3]; loads != wantLoads {
				t.Errorf("the catalog was read %d times, want %d", loads, wantLoads)
			}
		})
	}
}

func permanentErr(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		steps [][]byte
	}{
		{"empty", [][]byte{{}}},
		{"unknown relation", [][]byte{msgBegin(1, 1), msgInsert(9, []byte("x"))}},
		{"column count", [][]byte{msgRelation(1, "public", "outbox", outboxCols...), msgBegin(1, 1), msgInsert(1, []byte("x"))}},
		{"commit outside tx", [][]byte{msgCommit(1, 1)}},
		{"nested begin", [][]byte{msgBegin(1, 1), msgBegin(2, 2)}},
		{"insert outside tx", [][]byte{msgRelation(1, "public", "outbox", outboxCols...), msgInsert(1, []byte("a"), []byte("b"), []byte("c"), []byte("d"))}},
		{"truncated", [][]byte{msgBegin(1, 1)[:5]}},
		{"unknown type", [][]byte{{'Z', 1, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(outboxOnly(), &Counters{})
			var err error
			for _, m := range tt.steps {
				if _, _, err = d.decode(1, m); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("want a protocol error, got %v", err)
			}
		})
	}
}

// FuzzDecode feeds arbitrary messages, split at length prefixes, through one
// decoder: it must return errors, never panic, and every row it yields must
// have one value per column of its relation.
func FuzzDecode(f *testing.F) {
	seed := func(msgs ...[]byte) []byte {
		var b []byte
		for _, m := range msgs {
			b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
			b = append(b, m...)
		}
		return b
	}
	f.Add(seed(msgRelation(1, "public", "outbox", outboxCols...), msgBegin(2, 3),
		msgInsert(1, []byte("a"), []byte("b"), []byte("c"), []byte("{}")), msgCommit(1, 2)))
	f.Add(seed(msgMessage(5, false, HeartbeatPrefix, "x"), msgTruncate(1)))
	f.Add(seed(msgRelation(1, "public", "outbox", outboxCols...), msgUpdate(1, nil), msgDelete(1, []byte("k"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDecoder(outboxOnly(), &Counters{})
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			c, ok, err := d.decode(1, data[:n])
			data = data[n:]
			if err != nil || !ok {
				continue
			}
			if c.Kind == outbox.KindRow && len(c.Values) != len(c.Relation.Columns) {
				t.Fatalf("row with %d values for %d columns", len(c.Values), len(c.Relation.Columns))
			}
		}
	})
}
