package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The row of Debezium's documented outbox example: outbox-event-router.adoc
// (debezium/debezium, documentation/modules/ROOT/pages/transformations/),
// "Example outbox message": the raw change event's "after" of table
// inventory.outboxevent, connector name dbserver1-bare. The table is the
// adoc's "Basic outbox table" (id uuid not null, aggregatetype/aggregateid/
// type varchar not null, payload jsonb nullable).
//
// The adoc shows the emitted message as: topic outbox.event.order (for
// aggregatetype "Order": route.topic.replacement keeps the case, see the
// router tests), key "1", header id=<uuid>, value the payload as one JSON
// string; with table.expand.json.payload=true, the payload document
// itself. Its pretty-printed braces are the adoc's notation: JsonConverter
// writes compact JSON (Jackson's default printer), which the goldens hold.
// (The adoc's header uuid 4d47e190-… differs from its raw event's id
// 406c07f3-…: the goldens follow the rule, header id = the id column.)
const docPayload = `{"id": 1, "lineItems": [{"id": 1, "item": "Debezium in Action", "status": "ENTERED", "quantity": 2, "totalPrice": 39.98}, {"id": 2, "item": "Debezium for Dummies", "status": "ENTERED", "quantity": 1, "totalPrice": 29.99}], "orderDate": "2019-01-31T12:13:01", "customerId": 123}`

func docRecord(t *testing.T, add []AdditionalField) Record {
	t.Helper()
	cols := []Column{
		{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidVarchar, TypMod: -1}, {Name: "aggregateid", TypeOID: oidVarchar, TypMod: -1},
		{Name: "type", TypeOID: oidVarchar, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}, {Name: "timestamp", TypeOID: oidTimestamp, TypMod: -1},
	}
	b, err := Columns{Time: "timestamp", Additional: add}.Bind(cols)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Record([][]byte{
		[]byte("406c07f3-26f0-4eea-a50c-109940064b8f"), []byte("Order"), []byte("1"),
		[]byte("OrderCreated"), []byte(docPayload), []byte("2019-05-03 13:31:34.344"),
	}, time.UnixMilli(1556890294448))
	if err != nil {
		t.Fatal(err)
	}
	r.Origin = Origin{Database: "orderdb", Schema: "inventory", Table: "outboxevent",
		LSN: 24064704, LastCommitLSN: 24064592, TxID: 584, CommitTime: time.UnixMicro(1556890294448870)}
	return r
}

var docNotNull = map[string]bool{"id": true, "aggregatetype": true, "aggregateid": true, "type": true}

func TestDebeziumOutboxGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  DebeziumConfig
		add  []AdditionalField
	}{
		// Kafka Connect with key.converter=StringConverter and
		// value.converter=JsonConverter, schemas.enable=false.
		{"doc-example", DebeziumConfig{Key: ConvString, Value: ConvJSON}, nil},
		// The same with table.expand.json.payload=true (adoc: "Expanding
		// escaped JSON String as JSON"). JsonSchemaData infers int32 for
		// the integers and float64 for the prices; Jackson prints them.
		{"doc-example-expanded", DebeziumConfig{Key: ConvString, Value: ConvJSON, ExpandJSONPayload: true}, nil},
		// Debezium Server's defaults: debezium.format.key/value/header=json
		// with schemas enabled. The payload's schema is the jsonb column's
		// (io.debezium.data.Json, optional: the column is nullable).
		{"doc-example-schemas", DebeziumConfig{Key: ConvJSONSchemas, Value: ConvJSONSchemas, Header: ConvJSONSchemas, NotNull: docNotNull}, nil},
		// adoc "Emitting messages with additional fields":
		// type:header:eventType and type:envelope:eventType. With an
		// envelope field the value is a struct {payload, eventType} named
		// after the routed value (EventRouterDelegate.getSchemaName).
		{"doc-example-additional", DebeziumConfig{Key: ConvString, Value: ConvJSON}, []AdditionalField{
			{Column: "type", Placement: PlaceHeader, Alias: "eventType"}, {Column: "type", Placement: PlaceEnvelope, Alias: "eventType"}}},
		{"doc-example-additional-schemas", DebeziumConfig{Key: ConvString, Value: ConvJSONSchemas, TopicPrefix: "dbserver1-bare", NotNull: docNotNull}, []AdditionalField{
			{Column: "type", Placement: PlaceEnvelope, Alias: "eventType"}}},
		{"doc-example-expanded-schemas", DebeziumConfig{Key: ConvString, Value: ConvJSONSchemas, ExpandJSONPayload: true, NotNull: docNotNull}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			r := docRecord(t, tc.add)
			m, err := e.Encode(&r)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "debezium", tc.name+".golden"), dumpMessage(m))
		})
	}
}

// The value without schemas is exactly the payload column's text as one
// JSON string, which the adoc shows; checked here without the golden file.
func TestDebeziumOutboxValueIsPayloadString(t *testing.T) {
	e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox})
	if err != nil {
		t.Fatal(err)
	}
	r := docRecord(t, nil)
	m, err := e.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	want := `"` + strings.ReplaceAll(docPayload, `"`, `\"`) + `"`
	if string(m.Value) != want || string(m.Key) != "1" || len(m.Headers) != 1 ||
		m.Headers[0].Key != "id" || string(m.Headers[0].Value) != "406c07f3-26f0-4eea-a50c-109940064b8f" {
		t.Fatalf("got key %q value %s headers %v", m.Key, m.Value, m.Headers)
	}
}

func TestDebeziumChangeEventGolden(t *testing.T) {
	// The change event of debezium.md §2's literal example (field layout
	// from postgresql.adoc "Data change events" and the code; values
	// illustrative), schemas off: the document's after holds id,
	// aggregatetype, aggregateid, type, payload; our row also has a
	// timestamp column (MicroTimestamp).
	e, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: DebeziumConfig{
		TopicPrefix: "dbserver1", Version: "3.6.1.Final", Now: func() time.Time { return time.Unix(0, 1556890294484651402) }}})
	if err != nil {
		t.Fatal(err)
	}
	r := docRecord(t, nil)
	m, err := e.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join("testdata", "debezium", "change-event.golden"), dumpMessage(m))
}

// A row a snapshot read is a read (op r) with its place in the snapshot in
// source.snapshot, as Debezium 3.6.1 writes it (corpus case
// snapshot-change-events); a row of the stream an insert.
func TestDebeziumChangeEventSnapshot(t *testing.T) {
	e, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: DebeziumConfig{TopicPrefix: "dbserver1", Version: "3.6.1.Final"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mark     SnapshotMark
		snapshot string
		op       string
	}{
		{0, "false", "c"},
		{SnapshotRow, "true", "r"},
		{SnapshotFirst, "first", "r"},
		{SnapshotFirstInTable, "first_in_data_collection", "r"},
		{SnapshotLastInTable, "last_in_data_collection", "r"},
		{SnapshotLast, "last", "r"},
	} {
		r := docRecord(t, nil)
		r.Origin.Snapshot = tc.mark
		m, err := e.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Source struct{ Snapshot string }
			Op     string
		}
		if err := json.Unmarshal(m.Value, &v); err != nil || v.Source.Snapshot != tc.snapshot || v.Op != tc.op {
			t.Errorf("mark %d: source.snapshot %q, op %q (%v); want %q, %q", tc.mark, v.Source.Snapshot, v.Op, err, tc.snapshot, tc.op)
		}
	}
}

// A table without a primary key (NullKey): Debezium 3.6.1 writes its change
// events with a null Kafka key and no key schema, under JsonConverter with
// schemas or without (corpus cases change-events-no-primary-key*); the
// value is the same as a keyed table's, and the outbox router keeps its
// aggregate id key.
func TestDebeziumChangeEventNullKey(t *testing.T) {
	now := func() time.Time { return time.Unix(0, 1556890294484651402) }
	for _, conv := range []Converter{ConvJSON, ConvJSONSchemas} {
		cfg := DebeziumConfig{Key: conv, Value: conv, TopicPrefix: "dbserver1", Version: "3.6.1.Final", NotNull: docNotNull, Now: now}
		keyed, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: cfg})
		if err != nil {
			t.Fatal(err)
		}
		cfg.NullKey = true
		e, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: cfg})
		if err != nil {
			t.Fatal(err)
		}
		r := docRecord(t, nil)
		want, err := keyed.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second with the schemas cached
			m, err := e.Encode(&r)
			if err != nil {
				t.Fatal(err)
			}
			if m.Key != nil || m.KeySchema != "" {
				t.Errorf("%s: key %q (schema %q), want Kafka's null", conv, m.Key, m.KeySchema)
			}
			if !bytes.Equal(m.Value, want.Value) {
				t.Errorf("%s: value\n%s\nwant the keyed table's\n%s", conv, m.Value, want.Value)
			}
		}
		// Key columns given (message.key.columns) win over NullKey.
		cfg.KeyColumns = []string{"aggregateid"}
		if e, err = NewEncoder(EncoderConfig{Format: Debezium, Debezium: cfg}); err != nil {
			t.Fatal(err)
		}
		m, err := e.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(m.Key, []byte(`"aggregateid":"1"`)) {
			t.Errorf("%s with key columns: key %s, want aggregateid's", conv, m.Key)
		}
	}
	e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{NullKey: true}})
	if err != nil {
		t.Fatal(err)
	}
	r := docRecord(t, nil)
	m, err := e.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Key) != "1" {
		t.Errorf("outbox router's key %q, want the aggregate id 1", m.Key)
	}
}

func TestExpandPayloadFallbacks(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" means: kept as a string
	}{
		{`{"a": 1, "b": null, "c": [], "d": 1.0, "e": 10000000.5, "f": 3000000000}`, `{"a":1,"d":1.0,"e":1.00000005E7,"f":3000000000}`},
		{`{"xs": [{"a": 1}, {"b": "x"}, null]}`, ""}, // a null where the merged struct is not optional
		{`{"xs": [{"a": 1}, {"a": 2}, null]}`, `{"xs":[{"a":1},{"a":2},null]}`},
		{`{"xs": [{"a": 1}, {"b": "x"}]}`, `{"xs":[{"a":1,"b":null},{"a":null,"b":"x"}]}`},
		{`{"xs": [1, 2.5]}`, ""},                // mixed number types: not homogenous
		{`{"xs": [1, "a"]}`, ""},                // mixed node types
		{`{"n": 123456789012345678901234}`, ""}, // BigInteger: FLOAT64 validation fails
		{`[1, 2]`, ""},                          // not an object: no Struct
		{`"text"`, ""},
	} {
		_, v, err := jsonSchemaData{}.expandPayload("payload", []byte(tc.in))
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: expanded to %s, want it kept as a string", tc.in, v)
			}
			continue
		}
		if err != nil || string(v) != tc.want {
			t.Errorf("%s: got %s, %v; want %s", tc.in, v, err, tc.want)
		}
	}
}

// table.json.payload.null.behavior=optional_bytes: nulls are optional
// bytes in the schema, which a value's type replaces in a merge.
func TestExpandPayloadNullBytes(t *testing.T) {
	j := jsonSchemaData{nullBytes: true}
	for _, tc := range []struct{ in, schema, value string }{
		{`{"a": null, "b": 1}`,
			`{"type":"struct","fields":[{"type":"bytes","optional":true,"field":"a"},{"type":"int32","optional":true,"field":"b"}],"optional":true,"name":"payload"}`,
			`{"a":null,"b":1}`},
		{`{"xs": [null, null]}`,
			`{"type":"struct","fields":[{"type":"array","items":{"type":"bytes","optional":true},"optional":true,"field":"xs"}],"optional":true,"name":"payload"}`,
			`{"xs":[null,null]}`},
		{`{"xs": [{"a": null}, {"a": 1}]}`,
			`{"type":"struct","fields":[{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"}],"optional":false,"name":"payload.xs"},"optional":true,"field":"xs"}],"optional":true,"name":"payload"}`,
			`{"xs":[{"a":null},{"a":1}]}`},
	} {
		s, v, err := j.expandPayload("payload", []byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := string(appendCSchema(nil, s, "")); got != tc.schema || string(v) != tc.value {
			t.Errorf("%s:\n got %s %s\nwant %s %s", tc.in, got, v, tc.schema, tc.value)
		}
	}
	if _, _, err := (jsonSchemaData{}).expandPayload("payload", []byte(`{"xs": [null]}`)); err == nil {
		t.Error("an array of nulls expanded under ignore, where Debezium's member schema is unrecognized")
	}
}

func TestJavaDouble(t *testing.T) {
	for f, want := range map[float64]string{1: "1.0", 39.98: "39.98", 1e7: "1.0E7", 1.5e-4: "1.5E-4", 0.001: "0.001", 123456.789: "123456.789", -2.5e10: "-2.5E10"} {
		if got := string(appendJavaDouble(nil, f, 64)); got != want {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
}

func dumpMessage(m Message) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "key: %s\n", m.Key)
	for _, h := range m.Headers {
		fmt.Fprintf(&b, "header %s: %s\n", h.Key, h.Value)
	}
	fmt.Fprintf(&b, "value: %s\n", m.Value)
	return b.Bytes()
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
