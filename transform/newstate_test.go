package transform

import (
	"slices"
	"testing"
)

// changeEvent is a change event as pgoutbox's encoder writes it with
// schemas, of a row (id, note) of table public.outbox.
func changeEvent(note any) Record {
	v1, v2 := int32(1), int32(2)
	row := &Schema{Type: StructT, Optional: true, Name: "shop.public.outbox.Value", Fields: []Field{
		{"id", &Schema{Type: String}}, {"note", &Schema{Type: String, Optional: true}}}}
	src := &Schema{Type: StructT, Name: "io.debezium.connector.postgresql.Source", Version: &v1, Fields: []Field{
		{"table", &Schema{Type: String}}, {"lsn", &Schema{Type: Int64, Optional: true}}, {"ts_ms", &Schema{Type: Int64}}}}
	txn := &Schema{Type: StructT, Optional: true, Name: "event.block", Version: &v1, Fields: []Field{{"id", &Schema{Type: String}}}}
	env := &Schema{Type: StructT, Name: "shop.public.outbox.Envelope", Version: &v2, Fields: []Field{
		{"before", row}, {"after", row}, {"source", src}, {"transaction", txn},
		{"op", &Schema{Type: String}}, {"ts_ms", &Schema{Type: Int64, Optional: true}}}}
	after := &Struct{Schema: row, Values: []any{"k-1", note}}
	source := &Struct{Schema: src, Values: []any{"outbox", int64(42), int64(7)}}
	return Record{Topic: "shop.public.outbox", KeySchema: &Schema{Type: String}, Key: "k-1", ValueSchema: env,
		Value: &Struct{Schema: env, Values: []any{nil, after, source, nil, "c", int64(9)}}}
}

// ExtractNewRecordState as Debezium 3.6.1 applies it to an insert (corpus
// cases unwrap-*): the row, then __deleted under rewrite, then the added
// fields, each optional and named by its prefix and struct; headers from
// the envelope; a record that is not a change event passes.
func TestNewState(t *testing.T) {
	p := &parser{props: map[string]string{
		"transforms.u.add.fields":                     "op, table, source.lsn, transaction.id, ts_ms:when, nope",
		"transforms.u.add.headers":                    "op,source.table",
		"transforms.u.add.headers.prefix":             "h_",
		"transforms.u.delete.tombstone.handling.mode": "REWRITE",
	}, used: map[string]bool{}}
	tr := newNewState(p.options("transforms.u."))
	if tr == nil {
		t.Fatal(p.problems)
	}
	r := changeEvent("x")
	if keep, err := tr.apply(&r); !keep || err != nil {
		t.Fatal(keep, err)
	}
	var names []string
	for _, f := range r.ValueSchema.Fields {
		names = append(names, f.Name)
		if f.Name[0] == '_' && !f.Schema.Optional {
			t.Errorf("%s: not optional", f.Name)
		}
	}
	if want := []string{"id", "note", "__deleted", "__op", "__table", "__source_lsn", "__transaction_id", "__when"}; !slices.Equal(names, want) {
		t.Errorf("fields %v, want %v", names, want)
	}
	if got := r.Value.(*Struct).Values; !slices.Equal(got, []any{"k-1", "x", "false", "c", "outbox", int64(42), nil, int64(9)}) {
		t.Errorf("values %v", got)
	}
	if r.ValueSchema.Optional || r.ValueSchema.Name != "shop.public.outbox.Value" {
		t.Errorf("schema %+v: copySchemaBasics keeps the name, not optional", r.ValueSchema)
	}
	if len(r.Headers) != 2 || r.Headers[0].Key != "h_op" || r.Headers[0].Value != "c" || r.Headers[1].Key != "h_source_table" {
		t.Errorf("headers %+v", r.Headers)
	}

	// Without options: the row as it is, its schema the after field's as
	// the row's struct has it, not optional (Debezium 3.6.1 writes it so).
	p = &parser{props: map[string]string{}, used: map[string]bool{}}
	r = changeEvent(nil)
	if keep, err := newNewState(p.options("transforms.u.")).apply(&r); !keep || err != nil || r.ValueSchema.Name != "shop.public.outbox.Value" ||
		r.ValueSchema.Optional || len(r.Value.(*Struct).Values) != 2 {
		t.Errorf("%v %v %+v", keep, err, r.ValueSchema)
	}
	// The router's record is not a change event.
	rr := testRecord()
	before := rr.ValueSchema
	if keep, err := newNewState(p.options("transforms.u.")).apply(&rr); !keep || err != nil || rr.ValueSchema != before {
		t.Error("a record that is not a change event changed")
	}
	for _, bad := range []map[string]string{
		{"transforms.u.delete.tombstone.handling.mode": "keep"},
		{"transforms.u.add.fields": "a:b:c"},
		{"transforms.u.drop.fields.header.name": "drop"},
	} {
		p = &parser{props: bad, used: map[string]bool{}}
		if newNewState(p.options("transforms.u.")) != nil || len(p.problems) == 0 {
			t.Errorf("%v accepted", bad)
		}
	}
	if keep, err := (*Chain)(nil).Apply(&rr); !keep || err != nil {
		t.Error("a nil chain dropped the record")
	}
}
