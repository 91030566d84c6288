package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/schema"
)

// pgChangeEvent is a change event of one int64 column, with the source
// fields the CloudEvent reads.
func pgChangeEvent(t *testing.T, tx *Struct) (*Schema, *Struct) {
	t.Helper()
	row := &Schema{Type: StructT, Optional: true, Name: "p.public.t.Value", Fields: []Field{{Name: "id", Schema: &Schema{Type: Int64}}}}
	src := &Schema{Type: StructT, Name: "io.debezium.connector.postgresql.Source", Fields: []Field{
		{Name: "connector", Schema: &Schema{Type: String}},
		{Name: "name", Schema: &Schema{Type: String}},
		{Name: "ts_ms", Schema: &Schema{Type: Int64}},
		{Name: "snapshot", Schema: &Schema{Type: String, Optional: true}},
		{Name: "txId", Schema: &Schema{Type: Int64, Optional: true}},
		{Name: "lsn", Schema: &Schema{Type: Int64, Optional: true}},
		{Name: "xmin", Schema: &Schema{Type: Int64, Optional: true}},
		{Name: "sequence", Schema: &Schema{Type: String, Optional: true}},
	}}
	txs := &Schema{Type: StructT, Optional: true, Fields: transactionFields}
	env := &Schema{Type: StructT, Name: "p.public.t.Envelope", Fields: []Field{
		{Name: "before", Schema: row}, {Name: "after", Schema: row}, {Name: "source", Schema: src},
		{Name: "transaction", Schema: txs}, {Name: "op", Schema: &Schema{Type: String}},
	}}
	source := &Struct{Schema: src, Values: []any{"postgresql", "p", int64(1767323045123), "false", int64(765), int64(33301568), nil, `[null,"33301568"]`}}
	var txv any
	if tx != nil {
		tx.Schema = txs
		txv = tx
	}
	return env, &Struct{Schema: env, Values: []any{nil, &Struct{Schema: row, Values: []any{int64(7)}}, source, txv, "c"}}
}

func TestCloudEvent(t *testing.T) {
	s, v := pgChangeEvent(t, nil)
	got, err := appendCloudEvent(nil, schema.ConvJSON, s, v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"name:p;lsn:33301568;txId:765;sequence:[null,\"33301568\"]","source":"/debezium/postgresql/p","specversion":"1.0",` +
		`"type":"io.debezium.connector.postgresql.DataChangeEvent","time":"2026-01-02T03:04:05.123Z","datacontenttype":"application/json",` +
		`"iodebeziumop":"c","iodebeziumconnector":"postgresql","iodebeziumname":"p","iodebeziumtsms":"1767323045123","iodebeziumsnapshot":"false",` +
		`"iodebeziumtxId":"765","iodebeziumlsn":"33301568","iodebeziumxmin":null,"iodebeziumsequence":"[null,\"33301568\"]",` +
		`"iodebeziumtxid":null,"iodebeziumtxtotalorder":null,"iodebeziumtxdatacollectionorder":null,"data":{"before":null,"after":{"id":7}}}`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// A transaction block's attributes, its orders as strings; the data
	// with its schema under json-schemas.
	s, v = pgChangeEvent(t, &Struct{Values: []any{"765:33301568", int64(2), int64(1)}})
	got, err = appendCloudEvent(nil, schema.ConvJSONSchemas, s, v)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`"iodebeziumtxid":"765:33301568","iodebeziumtxtotalorder":"2","iodebeziumtxdatacollectionorder":"1"`,
		`"data":{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":true,"name":"p.public.t.Value","field":"before"},`,
		`"optional":false,"name":"io.debezium.connector.postgresql.Data"},"payload":{"before":null,"after":{"id":7}}}}`} {
		if !strings.Contains(string(got), part) {
			t.Errorf("%s\nlacks %s", got, part)
		}
	}
}

// A value that is no change event is the record's error (dead-lettered),
// where Debezium's converter writes a null in its place.
func TestCloudEventOfAnotherValue(t *testing.T) {
	row := &Schema{Type: StructT, Name: "p.public.t.Value", Fields: []Field{{Name: "id", Schema: &Schema{Type: Int64}}}}
	for _, tt := range []struct {
		name string
		s    *Schema
		v    any
	}{
		{"a row", row, &Struct{Schema: row, Values: []any{int64(1)}}},
		{"a string", &Schema{Type: String}, "x"},
		{"no schema", nil, map[string]any{}},
	} {
		_, err := appendCloudEvent(nil, schema.ConvJSON, tt.s, tt.v)
		var de *DataError
		if !errors.As(err, &de) || !strings.Contains(de.Reason, "not a change event") {
			t.Errorf("%s: %v, want a DataError", tt.name, err)
		}
	}
	// A null value stays a null (a tombstone), as Debezium writes it.
	if out, _, err := encodeKeyOrValue("cloudevents:json", nil, nil); out != nil || err != nil {
		t.Errorf("null: %q %v", out, err)
	}
}

// With its metadata from headers, the event is made of the source and op
// headers, the id and type headers, and the value's struct; what Debezium
// writes a null for or fails on is the record's error.
func TestHeaderCloudEvent(t *testing.T) {
	env, ev := pgChangeEvent(t, nil)
	source := ev.Values[env.field("source")].(*Struct)
	payload := &Schema{Type: StructT, Name: "payload", Fields: []Field{{Name: "n", Schema: &Schema{Type: Int32, Optional: true}}}}
	str := &Schema{Type: String}
	record := func(hs ...Header) *Record {
		return &Record{ValueSchema: payload, Value: &Struct{Schema: payload, Values: []any{int64(1)}}, Headers: hs}
	}
	src, op := Header{Key: "source", Schema: source.Schema, Value: source}, Header{Key: "op", Schema: str, Value: "c"}
	id, typ := Header{Key: "id", Schema: str, Value: "e-1"}, Header{Key: "type", Schema: str, Value: "OrderCreated"}
	headers := Converters{Value: "cloudevents:json", CloudEvents: schema.CloudEventsMetadata{Headers: true, IDHeader: true, TypeHeader: true}}

	got, err := record(src, op, id, typ).headerCloudEvent(headers)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`{"id":"e-1","source":"/debezium/postgresql/p","specversion":"1.0","type":"OrderCreated",`,
		`"iodebeziumop":"c",`, `"data":{"n":1}}`} {
		if !strings.Contains(string(got), part) {
			t.Errorf("%s\nlacks %s", got, part)
		}
	}
	generated := Converters{Value: "cloudevents", CloudEvents: schema.CloudEventsMetadata{Headers: true}}
	got, err = record(src, op).headerCloudEvent(generated)
	if err != nil || !strings.Contains(string(got), `"type":"io.debezium.connector.postgresql.DataChangeEvent"`) ||
		!strings.Contains(string(got), `"data":{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"n"}],"optional":false,"name":"io.debezium.connector.postgresql.Data"},"payload":{"n":1}}`) {
		t.Errorf("generated id and type, data with its schema: %s %v", got, err)
	}
	if out, err := (&Record{ValueSchema: payload, Headers: []Header{src, op}}).headerCloudEvent(headers); out != nil || err != nil {
		t.Errorf("a null value: %q %v", out, err)
	}
	for _, tt := range []struct {
		name string
		r    *Record
		want string
	}{
		{"no source header", record(op, id, typ), "no source or op header"},
		{"no id header", record(src, op, typ), "Header `id` was not provided"},
		{"an id not a string", record(src, op, Header{Key: "id", Schema: &Schema{Type: Int64}, Value: int64(7)}, typ), "not a string"},
		{"a value not a struct", &Record{ValueSchema: str, Value: "x", Headers: []Header{src, op, id, typ}}, "not a struct"},
	} {
		_, err := tt.r.headerCloudEvent(headers)
		var de *DataError
		if !errors.As(err, &de) || !strings.Contains(de.Reason, tt.want) {
			t.Errorf("%s: %v, want a DataError with %q", tt.name, err, tt.want)
		}
	}
}
