package transform

import (
	"bytes"
	"testing"
)

// AvroData's schema and datum of a change event's shape (corpus cases
// avro-change-events, avro-unwrap, avro-transform-chain): a struct used
// twice is defined once and then named, an optional field with a default
// leads its union with its type, int16 keeps connect.type, a decimal its
// scale and precision; the datum follows the unions' branches.
func TestEncodeAvro(t *testing.T) {
	v1 := int32(1)
	row := &Schema{Type: StructT, Optional: true, Name: "shop.public.outbox.Value", Fields: []Field{
		{"id", &Schema{Type: String, Name: "io.debezium.data.Uuid", Version: &v1}},
		{"n", &Schema{Type: Int16, Optional: true, HasDefault: true, Default: int64(0)}},
		{"amount", &Schema{Type: Bytes, Optional: true, Name: decimalName, Version: &v1, Params: []Param{{"scale", "2"}, {"connect.decimal.precision", "10"}}}},
		{"tags", &Schema{Type: Map, Optional: true, Keys: &Schema{Type: String}, Values: &Schema{Type: Int64}}},
	}}
	env := &Schema{Type: StructT, Name: "shop.public.outbox.Envelope", Version: &v1, Fields: []Field{
		{"before", row}, {"after", row}, {"op", &Schema{Type: String}}}}
	after := &Struct{Schema: row, Values: []any{"k", int64(-1), []byte{0x04, 0xd2}, []MapEntry{{"a", int64(1)}}}}
	sch, datum, err := encodeAvro(env, &Struct{Schema: env, Values: []any{nil, after, "c"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"record","name":"Envelope","namespace":"shop.public.outbox","fields":[` +
		`{"name":"before","type":["null",{"type":"record","name":"Value","fields":[` +
		`{"name":"id","type":{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Uuid"}},` +
		`{"name":"n","type":[{"type":"int","connect.type":"int16","connect.default":0},"null"],"default":0},` +
		`{"name":"amount","type":["null",{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null},` +
		`{"name":"tags","type":["null",{"type":"map","values":"long"}],"default":null}],` +
		`"connect.name":"shop.public.outbox.Value"}],"default":null},` +
		`{"name":"after","type":["null","Value"],"default":null},{"name":"op","type":"string"}],` +
		`"connect.version":1,"connect.name":"shop.public.outbox.Envelope"}`
	if sch != want {
		t.Errorf("schema\n%s\nwant\n%s", sch, want)
	}
	wantDatum := []byte{0, // before: null
		2, 2, 'k', // after: branch 1; id
		0, 1, // n: branch 0 (the type leads), -1
		2, 4, 0x04, 0xd2, // amount: branch 1, 2 bytes
		2, 2, 2, 'a', 2, 0, // tags: branch 1, one entry a=1, end
		2, 'c'} // op
	if !bytes.Equal(datum, wantDatum) {
		t.Errorf("datum %v, want %v", datum, wantDatum)
	}
	if _, _, err := encodeAvro(&Schema{Type: String}, nil); err == nil {
		t.Error("a null for a required string written")
	}
}
