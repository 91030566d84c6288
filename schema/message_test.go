package schema

import (
	"testing"
	"time"
)

// A logical decoding message's row (Record.Message): its payload is the
// document DecodeLogicalDecodingMessageContent parsed, whatever
// table.expand.json.payload says, its null fields by fields.null.include
// (MessageNullBytes), and Debezium's message records carry no context
// headers.
func TestDebeziumOutboxMessage(t *testing.T) {
	cols := []Column{{Name: "id", TypeOID: oidText, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1},
		{Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}}
	b, err := Columns{}.Bind(cols)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		message   bool
		cfg       DebeziumConfig
		value     string
		headers   int
		firstHead string
	}{
		{name: "table row", cfg: DebeziumConfig{Key: ConvString, Value: ConvJSON, ContextHeaders: true},
			value: `"{\"n\": 1, \"z\": null}"`, headers: 5, firstHead: ContextHeaderPrefix + "connectorLogicalName"},
		{name: "message", message: true, cfg: DebeziumConfig{Key: ConvString, Value: ConvJSON, ContextHeaders: true},
			value: `{"n":1}`, headers: 1, firstHead: "id"},
		{name: "message with null fields", message: true, cfg: DebeziumConfig{Key: ConvString, Value: ConvJSON, MessageNullBytes: true},
			value: `{"n":1,"z":null}`, headers: 1, firstHead: "id"},
		{name: "message, the router's null behavior aside", message: true, cfg: DebeziumConfig{Key: ConvString, Value: ConvJSON, JSONPayloadNullBytes: true},
			value: `{"n":1}`, headers: 1, firstHead: "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			r, err := b.Record([][]byte{[]byte("e-1"), []byte("order"), []byte("o-1"), []byte("Placed"), []byte(`{"n": 1, "z": null}`)}, time.UnixMilli(1))
			if err != nil {
				t.Fatal(err)
			}
			r.Message = tc.message
			m, err := e.Encode(&r)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Value) != tc.value || string(m.Key) != "o-1" || len(m.Headers) != tc.headers || m.Headers[0].Key != tc.firstHead {
				t.Errorf("key %q value %s headers %v", m.Key, m.Value, m.Headers)
			}
		})
	}
}
