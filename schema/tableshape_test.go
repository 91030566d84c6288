package schema

import (
	"strings"
	"testing"
	"time"
)

// Change events of two tables of different shapes under one encoder:
// each has its own key, NOT NULL columns and defaults (Tables), and an
// update and a delete carry before, op and after as Debezium writes them.
func TestTableShapes(t *testing.T) {
	customers := []Column{{Name: "id", TypeOID: oidInt4, TypMod: -1}, {Name: "name", TypeOID: oidText, TypMod: -1}}
	orders := []Column{{Name: "order_number", TypeOID: oidInt4, TypMod: -1}, {Name: "qty", TypeOID: oidInt4, TypMod: -1}, {Name: "note", TypeOID: oidText, TypMod: -1}}
	d := DebeziumConfig{TopicPrefix: "shop", Key: ConvJSON, Value: ConvJSON,
		NotNull: map[string]bool{"id": true, "name": true}, KeyColumns: []string{"id"},
		Tables: map[string]TableShape{"public.orders": {NotNull: map[string]bool{"order_number": true, "qty": true},
			Defaults: map[string]string{"qty": "1"}, KeyColumns: []string{"order_number"}}}}
	enc, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: d})
	if err != nil {
		t.Fatal(err)
	}
	encode := func(table string, cols []Column, op Op, before, after []string) (string, string) {
		t.Helper()
		b, err := Columns{PassThrough: true, AnyShape: true}.BindTable("public", table, enc.MapColumns("public", table, cols))
		if err != nil {
			t.Fatal(err)
		}
		texts := func(vs []string) [][]byte {
			if vs == nil {
				return nil
			}
			out := make([][]byte, len(vs))
			for i, v := range vs {
				if v != "NULL" {
					out[i] = []byte(v)
				}
			}
			return out
		}
		values := texts(after)
		if op == OpDelete {
			values = texts(before)
		}
		rec, err := b.Record(enc.FillDefaults(b, enc.MapValues(b, values)), time.UnixMilli(0))
		if err != nil {
			t.Fatal(err)
		}
		rec.Op = op
		if before != nil {
			rec.Before = enc.FillDefaults(b, enc.MapValues(b, texts(before)))
		}
		rec.Origin = Origin{Schema: "public", Table: table}
		msg, err := enc.Encode(&rec)
		if err != nil {
			t.Fatal(err)
		}
		return string(msg.Key), string(msg.Value)
	}
	for _, tc := range []struct {
		table         string
		cols          []Column
		op            Op
		before, after []string
		key, value    string
	}{
		{"customers", customers, OpUpdate, nil, []string{"7", "Kim"}, `{"id":7}`, `{"before":null,"after":{"id":7,"name":"Kim"},`},
		{"customers", customers, OpDelete, []string{"7", "NULL"}, nil, `{"id":7}`, `{"before":{"id":7,"name":""},"after":null,`},
		// The key-only old row: qty NOT NULL takes its default, note is null.
		{"orders", orders, OpDelete, []string{"9", "NULL", "NULL"}, nil, `{"order_number":9}`, `{"before":{"order_number":9,"qty":1,"note":null},"after":null,`},
		{"orders", orders, OpUpdate, []string{"9", "2", "a"}, []string{"9", "3", "NULL"}, `{"order_number":9}`, `{"before":{"order_number":9,"qty":2,"note":"a"},"after":{"order_number":9,"qty":3,"note":null},`},
	} {
		key, value := encode(tc.table, tc.cols, tc.op, tc.before, tc.after)
		op := map[Op]string{OpUpdate: `"op":"u"`, OpDelete: `"op":"d"`}[tc.op]
		if key != tc.key || !strings.HasPrefix(value, tc.value) || !strings.Contains(value, op) {
			t.Errorf("%s %s: key %s, value %s; want key %s, value starting %s with %s", tc.table, op, key, value, tc.key, tc.value, op)
		}
	}
}

// An update moves its row to another key when a key column of its own
// table differs between the old row and the new; without an old row (the
// default identity, the key unchanged) it does not.
func TestKeyChanged(t *testing.T) {
	d := DebeziumConfig{KeyColumns: []string{"a"},
		Tables: map[string]TableShape{"public.two": {KeyColumns: []string{"a", "b"}}}}
	enc, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: d})
	if err != nil {
		t.Fatal(err)
	}
	cols := []Column{{Name: "a", TypeOID: oidInt4}, {Name: "b", TypeOID: oidInt4}, {Name: "c", TypeOID: oidText}}
	row := func(vs ...string) [][]byte {
		out := make([][]byte, len(vs))
		for i, v := range vs {
			if v != "NULL" {
				out[i] = []byte(v)
			}
		}
		return out
	}
	for _, tc := range []struct {
		table    string
		old, new [][]byte
		want     bool
	}{
		{"one", nil, row("1", "2", "x"), false},
		{"one", row("1", "2", "x"), row("1", "3", "y"), false},
		{"one", row("1", "NULL", "NULL"), row("2", "2", "x"), true},
		{"two", row("1", "2", "x"), row("1", "3", "x"), true},
		{"two", row("1", "2", "x"), row("1", "2", "y"), false},
	} {
		b, err := Columns{PassThrough: true, AnyShape: true}.BindTable("public", tc.table, cols)
		if err != nil {
			t.Fatal(err)
		}
		if got := enc.KeyChanged(b, tc.old, tc.new); got != tc.want {
			t.Errorf("%s: %q to %q: key changed %v, want %v", tc.table, tc.old, tc.new, got, tc.want)
		}
	}
}
