package compat

import (
	"strings"
	"testing"
)

// The avro: normalization decodes a datum whose union names a record the
// datum never reached before (before is null, after names Value), then
// nulls the path; a second normalization works on the decoded form.
func TestNullAvroPath(t *testing.T) {
	const sch = `{"type":"record","name":"Envelope","namespace":"s.t","fields":[` +
		`{"name":"before","type":["null",{"type":"record","name":"Value","fields":[{"name":"id","type":"string"}]}]},` +
		`{"name":"after","type":["null","Value"]},{"name":"ts_ms","type":"long"},{"name":"v","type":"string"}]}`
	datum := []byte{0, 2, 2, 'k', 0x54, 2, 'x'}
	for _, r := range []Record{
		{Value: Bytes("schema:" + sch + "|datum:" + string(datum))},
		{Value: Bytes(datum), Headers: []Header{{Key: "apicurio.value.globalId", Value: Bytes("schema:" + sch)}}},
	} {
		r.Value = nullAvroPath(r, []string{"ts_ms"})
		r.Value = nullAvroPath(r, []string{"v"})
		_, js, ok := strings.Cut(string(r.Value), "|json:")
		if !ok || js != `{"after":{"id":"k"},"before":null,"ts_ms":null,"v":null}` {
			t.Errorf("got %s", r.Value)
		}
	}
	if got := nullAvroPath(Record{Value: Bytes("plain")}, []string{"x"}); string(got) != "plain" {
		t.Errorf("a value without a schema became %s", got)
	}
}
