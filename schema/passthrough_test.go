package schema

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// probeTable is the table the records in testdata/debezium/observed.golden
// were read from, by Debezium 3.6.1.Final (Kafka Connect 4.3.1 standalone,
// the PostgreSQL connector with pgoutput, the outbox router,
// extended.headers.enabled=false, topic.prefix=probe), and consumed from a
// Kafka 4.4 broker with kcat:
//
//	CREATE TABLE probe (id uuid PRIMARY KEY, aggregatetype text, aggregateid text,
//	  payload bytea, ts timestamp(3), tsu timestamp, part int, ver int,
//	  tracingspancontext text, ptext text)
var probeTable = []Column{
	{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidBytea, TypMod: -1},
	{Name: "ts", TypeOID: oidTimestamp, TypMod: -1}, {Name: "tsu", TypeOID: oidTimestamp, TypMod: -1}, {Name: "part", TypeOID: oidInt4, TypMod: -1}, {Name: "ver", TypeOID: oidInt4, TypMod: -1},
	{Name: "tracingspancontext", TypeOID: oidText, TypMod: -1}, {Name: "ptext", TypeOID: oidText, TypMod: -1},
}

// probeRow is a row of probeTable; "" is NULL, `”` the empty string.
type probeRow [10]string

func (r probeRow) values() [][]byte {
	out := make([][]byte, len(r))
	for i, v := range r {
		switch v {
		case "":
		case "''":
			out[i] = []byte{}
		default:
			out[i] = []byte(v)
		}
	}
	return out
}

// The cases of observed.golden: each the Debezium configuration it was
// observed under, as pgoutbox's settings.
var probeCases = []struct {
	name string
	cols Columns
	cfg  DebeziumConfig
	rows []probeRow
}{
	// key.converter=StringConverter, value.converter=ByteArrayConverter.
	{"p1", Columns{}, DebeziumConfig{Key: ConvString, Value: ConvByteArray}, []probeRow{
		{"b3c956b0-5b87-43cb-9f77-3ff76b29f77e", "p1", "k1", `\x00ff41`},
		{"0b48d504-1afa-4526-a8b1-053ee1f39e35", "p1", "", ""},
		{"9c9b60d1-bf65-4921-9118-b7521b0bf800", "p1", "''", `\x`},
	}},
	// JsonConverter with schemas (Kafka's default) for key, value and
	// headers.
	{"p2", Columns{}, DebeziumConfig{Key: ConvJSONSchemas, Value: ConvJSONSchemas, Header: ConvJSONSchemas}, []probeRow{
		{"d6350294-f664-4d2a-9067-53dcecee40ae", "p2", "k1", `\x00ff41`},
		{"750a84c8-8319-4a5c-a8d5-3fc81fa6bb9e", "p2", "", ""},
	}},
	// key JsonConverter schemas off: its NULL is the JSON null. The value
	// converter was StringConverter, which writes null for a NULL as
	// ByteArrayConverter does (for bytes it prints
	// "java.nio.HeapByteBuffer[pos=0 lim=3 cap=3]", which pgoutbox refuses
	// at start).
	{"p3", Columns{}, DebeziumConfig{Key: ConvJSON, Value: ConvByteArray}, []probeRow{
		{"07e1b162-ff2d-4eef-9b24-5b57e39f6a33", "p3", ""},
	}},
	// BinaryDataConverter: key delegate StringConverter, value delegate
	// JsonConverter schemas off.
	{"p4", Columns{}, DebeziumConfig{Key: ConvBinary + ":" + ConvString, Value: ConvBinary + ":" + ConvJSON}, []probeRow{
		{"f06f0f9f-e8a4-4c7f-8737-08e0ec37f039", "p4", "k1", `\x00ff41`},
		{"609e216e-ada1-45b8-ba19-c8d0d689a93c", "p4", "", ""},
	}},
	// payload ptext, table.field.event.timestamp=ts,
	// table.fields.additional.placement=part:PARTITION,ver:Envelope:v,aggregateid:header:agg,
	// table.field.event.schema.version=ver; value JsonConverter with schemas.
	{"p5", Columns{Payload: "ptext", Time: "ts", SchemaVersion: "ver", Additional: mustParseAdditional("part:PARTITION,ver:Envelope:v,aggregateid:header:agg")},
		DebeziumConfig{Key: ConvString, Value: ConvJSONSchemas, TopicPrefix: "probe"}, []probeRow{
			{"2f053e2c-f891-4da8-a696-3d6404affa38", "p5", "k1", "", "2020-01-02 03:04:05.678", "", "0", "7", "", `{"a":1}`},
			{"03606f8d-0311-4f18-b07b-8068ede8c7b9", "p5", "k2", "", "", "", "", "", "", "  "},
		}},
	// payload ptext, route.tombstone.on.empty.payload=true,
	// table.field.event.timestamp=tsu (MicroTimestamp, truncated to ms).
	{"p6", Columns{Payload: "ptext", Time: "tsu"}, DebeziumConfig{Key: ConvString, Value: ConvJSON, TombstoneOnEmpty: true}, []probeRow{
		{"d512f94a-2343-4d0f-a2d5-88eea5e52c11", "p6", "k1", "", "", "2020-01-02 03:04:05.678912", "", "", "", " "},
		{"5586a6ea-9dda-46f7-bf2d-980cf9653d03", "p6", "k2"},
		{"15218491-7300-4a86-9b05-d3cf04115f2c", "p6", "k3", "", "", "", "", "", "", "x"},
	}},
}

func mustParseAdditional(s string) []AdditionalField {
	f, err := ParseAdditionalFields(s)
	if err != nil {
		panic(err)
	}
	return f
}

// TestObservedDebezium encodes the rows Debezium 3.6.1 was seen to publish
// and compares every part with what it published (observed.golden is
// written from kcat's output, not by -update): null and empty keys and
// values, bytea under each converter, tombstones, the timestamp column,
// the partition, the schema version, case-insensitive placements.
func TestObservedDebezium(t *testing.T) {
	var got bytes.Buffer
	for _, tc := range probeCases {
		cols := tc.cols
		cols.PassThrough = true
		b, err := cols.Bind(probeTable)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tc.cfg.NotNull = map[string]bool{"id": true}
		e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: tc.cfg})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		fmt.Fprintf(&got, "== %s\n", tc.name)
		for _, row := range tc.rows {
			r, err := b.Record(row.values(), time.Now())
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			r.Origin = Origin{Schema: "public", Table: "probe"}
			m, err := e.Encode(&r)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got.WriteString(dumpObserved(m))
		}
	}
	want, err := os.ReadFile(filepath.Join("testdata", "debezium", "observed.golden"))
	if err != nil {
		t.Fatal(err)
	}
	// Comment lines say where each block was observed.
	var keep []string
	for _, l := range strings.Split(string(want), "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	if w := strings.Join(keep, "\n"); got.String() != w {
		t.Errorf("differs from what Debezium published:\ngot:\n%s\nwant:\n%s", got.String(), w)
	}
}

// dumpObserved prints a message as the golden holds it, in kcat's terms:
// partition (when set), timestamp (when set), key, value and headers, each
// quoted, null as (null).
func dumpObserved(m Message) string {
	q := func(b []byte) string {
		if b == nil {
			return "(null)"
		}
		return strconv.Quote(string(b))
	}
	var b strings.Builder
	if m.HasPartition {
		fmt.Fprintf(&b, "p=%d ", m.Partition)
	}
	if !m.Timestamp.IsZero() {
		fmt.Fprintf(&b, "ts=%d ", m.Timestamp.UnixMilli())
	}
	fmt.Fprintf(&b, "key=%s value=%s headers=", q(m.Key), q(m.Value))
	for i, h := range m.Headers {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", h.Key, q(h.Value))
	}
	b.WriteByte('\n')
	return b.String()
}

func TestBindPassThrough(t *testing.T) {
	debeziumDoc := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidVarchar, TypMod: -1}, {Name: "aggregateid", TypeOID: oidVarchar, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}}
	for _, tc := range []struct {
		name string
		c    Columns
		cols []Column
		err  error // nil: binds
	}{
		{"the documentation's table, no type column", Columns{PassThrough: true}, debeziumDoc, nil},
		{"without PassThrough type is required", Columns{}, debeziumDoc, ErrMissingColumn},
		{"timestamp column", Columns{PassThrough: true, Time: "ts"}, probeTable, nil},
		{"timestamp column of text", Columns{PassThrough: true, Time: "ptext"}, probeTable, ErrColumnType},
		{"missing timestamp column", Columns{PassThrough: true, Time: "nope"}, probeTable, nil}, // optional, as the time column always was
		{"schema version of int", Columns{PassThrough: true, SchemaVersion: "ver"}, probeTable, nil},
		{"schema version of text", Columns{PassThrough: true, SchemaVersion: "ptext"}, probeTable, ErrColumnType},
		{"missing schema version", Columns{PassThrough: true, SchemaVersion: "nope"}, probeTable, ErrMissingColumn},
		{"partition of int", Columns{PassThrough: true, Additional: mustParseAdditional("part:partition")}, probeTable, nil},
		{"partition of text", Columns{PassThrough: true, Additional: mustParseAdditional("ptext:partition")}, probeTable, ErrColumnType},
		{"missing additional", Columns{PassThrough: true, Additional: mustParseAdditional("nope:header")}, probeTable, ErrMissingColumn},
		{"missing additional ignored", Columns{PassThrough: true, IgnoreMissingAdditional: true, Additional: mustParseAdditional("nope:header,part:header")}, probeTable, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Bind(tc.cols)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("Bind: %v, want %v", err, tc.err)
			}
		})
	}
}

func TestPassThroughRecord(t *testing.T) {
	b, err := Columns{PassThrough: true, Payload: "ptext"}.Bind(probeTable)
	if err != nil {
		t.Fatal(err)
	}
	// A NULL aggregate type: Debezium's RegexRouter throws on the null
	// topic, so it is the one poison row.
	if _, err := b.Record(probeRow{"", "", "k", "", "", "", "", "", "", "x"}.values(), time.Now()); err == nil {
		t.Fatal("NULL aggregatetype accepted")
	}
	// Everything else passes as it is: no type column, NULL id, text
	// payload not JSON and not trimmed.
	r, err := b.Record(probeRow{"", "''", "k", "", "", "", "", "", "", "  not json "}.values(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !r.null(fID) || r.AggregateType != "" || r.null(fAggregateType) || string(r.Payload) != "  not json " {
		t.Fatalf("record %+v", r)
	}
	e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) != `"  not json "` || m.Headers[0].Key != "id" || m.Headers[0].Value != nil {
		t.Fatalf("message %s", dumpObserved(m))
	}

	// route.tombstone.on.empty.payload=false with an envelope: the struct
	// carries payload=null (shouldNotProduceTombstoneEventForNullPayload);
	// with it, the value is null whatever the envelope.
	eb, err := Columns{PassThrough: true, Payload: "ptext", Additional: mustParseAdditional("ver:envelope")}.Bind(probeTable)
	if err != nil {
		t.Fatal(err)
	}
	r, err = eb.Record(probeRow{"", "Order", "k", "", "", "", "", "7"}.values(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tombstone := range []bool{false, true} {
		e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{TombstoneOnEmpty: tombstone}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"payload":null,"ver":7}`; !tombstone && string(m.Value) != want || tombstone && m.Value != nil {
			t.Errorf("tombstone %v: value %s", tombstone, dumpObserved(m))
		}
	}
}

// The converters that cannot write a column's type, which pgoutbox run
// refuses at start: Debezium would fail the record or print a Java object.
// The value options decide what a column's value is: a bytea is bytes only
// under binary.handling.mode=bytes, a date, time or timestamp a
// java.util.Date under time.precision.mode=connect.
func TestConverterWriter(t *testing.T) {
	base64 := valueModes{binary: binaryBase64}
	connect := valueModes{time: timeConnect}
	for _, tc := range []struct {
		c      Converter
		oid    uint32
		m      valueModes
		header bool
		want   Converter
		ok     bool
	}{
		{ConvString, oidText, valueModes{}, false, ConvString, true},
		{ConvString, oidBytea, valueModes{}, false, "", false},
		{ConvString, oidBytea, base64, false, ConvString, true},
		{ConvJSON, oidBytea, valueModes{}, false, ConvJSON, true},
		{ConvByteArray, oidBytea, valueModes{}, false, ConvByteArray, true},
		{ConvByteArray, oidBytea, base64, false, "", false}, // a string: not BYTES
		{ConvByteArray, oidText, valueModes{}, false, "", false},
		{ConvBinary, oidBytea, valueModes{}, false, ConvByteArray, true},
		{ConvBinary, oidBytea, base64, false, "", false},
		{ConvBinary, oidJSONB, valueModes{}, false, "", false},
		{"binary:json", oidJSONB, valueModes{}, false, ConvJSON, true},
		{"binary:json-schemas", oidBytea, valueModes{}, false, ConvByteArray, true},
		{"binary:string", oidBytea, base64, false, ConvString, true},
		{ConvDebeziumByteArray, oidBytea, valueModes{}, false, "", false},
		{ConvDebeziumByteArray, oidText, valueModes{}, true, "", false},
		{"debezium-bytearray:json", oidBytea, valueModes{}, false, ConvJSON, true},
		{"debezium-bytearray:string", oidText, valueModes{}, false, ConvString, true},
		{ConvString, oidTimestamp, connect, false, "", false},  // Date.toString, in the worker's zone
		{ConvString, oidDate, connect, true, ConvString, true}, // SimpleHeaderConverter: Values' text
		{ConvString, oidTimestamp, valueModes{}, false, ConvString, true},
		{ConvString, oidTimestamptz, connect, false, ConvString, true},
		// Debezium Server's sns sink: a String as it is, the rest through
		// the configured converter.
		{"text:json-schemas", oidJSONB, valueModes{}, false, ConvString, true},
		{"text:json-schemas", oidUUID, valueModes{}, false, ConvString, true},
		{"text:json-schemas", oidInt8, valueModes{}, false, ConvJSONSchemas, true},
		{"text:json", oidBytea, valueModes{}, false, ConvJSON, true},
		{"text:json", oidBytea, base64, false, ConvString, true},
		{"text:binary:json", oidBytea, valueModes{}, false, ConvByteArray, true},
		{"text:string", oidTimestamp, connect, false, "", false},
		{"text:cloudevents:json", oidJSONB, valueModes{}, false, ConvString, true},
		{"text:cloudevents:json", oidInt8, valueModes{}, false, "", false}, // CloudEventsConverter writes structs only
	} {
		got, ok := tc.c.writer(tc.m.kindFor(tc.c, pgType{oid: tc.oid, mod: -1}), tc.header)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s.writer(%d, %+v, header %v) = %q, %v; want %q, %v", tc.c, tc.oid, tc.m, tc.header, got, ok, tc.want, tc.ok)
		}
	}
	for _, s := range []string{"binary:binary", "binary:", "bytes", "json:x", "debezium-bytearray:binary", "text", "text:avro", "text:apicurio-json", "text:text:json"} {
		if _, err := ParseConverter(s); err == nil {
			t.Errorf("ParseConverter(%q) accepted", s)
		}
	}
}

func TestParseAdditionalFieldsAsDebezium(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // formatAdditional of the result; "" for an error
	}{
		{"type:HEADER:eventType", "type:header:eventType"},
		{" part:Partition , x:Envelope", "part:partition,x:envelope"},
		{"a:header:h,b:header:h", "a:header:h,b:header:h"}, // Kafka headers may repeat
		{"a:envelope:e,b:envelope:e", ""},
		{"a:partition,b:partition", ""},
		{"", ""},
		{"   ", ""},
		{"type", ""},
		{"a:header,,b:header", ""},
		{"a:nowhere", ""},
		{"a:header:x:y", ""},
	} {
		f, err := ParseAdditionalFields(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q accepted: %v", tc.in, f)
		case tc.want != "" && (err != nil || formatAdditional(f) != tc.want):
			t.Errorf("%q: %v %v, want %s", tc.in, formatAdditional(f), err, tc.want)
		}
	}
}

// The first record Debezium 3.6.1 published with its defaults
// (extended.headers.enabled on), for the documentation's example row: its
// context headers come first, in this order, then id.
func TestContextHeaders(t *testing.T) {
	cols := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidVarchar, TypMod: -1}, {Name: "aggregateid", TypeOID: oidVarchar, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}}
	b, err := Columns{PassThrough: true}.Bind(cols)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Record([][]byte{[]byte("406c07f3-26f0-4eea-a50c-109940064b8f"), []byte("Order"), []byte("1"), []byte(`{"id": 1, "customerId": 123}`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{Key: ConvString, Value: ConvJSON,
		TopicPrefix: "dbserver1", ContextHeaders: true, RunID: "01a21382-a564-77a5-976c-b3e2b7e4fd42"}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	const want = `key="1" value="\"{\\\"id\\\": 1, \\\"customerId\\\": 123}\"" headers=__debezium.context.connectorLogicalName="dbserver1",` +
		`__debezium.context.taskId="0",__debezium.context.connectorName="postgresql",__debezium.context.runId="01a21382-a564-77a5-976c-b3e2b7e4fd42",` +
		`id="406c07f3-26f0-4eea-a50c-109940064b8f"` + "\n"
	if got := dumpObserved(m); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	id := newRunID(time.UnixMilli(0x01a21382a564))
	if len(id) != 36 || id[:13] != "01a21382-a564" || id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
		t.Errorf("run id %s is not a version 7 UUID of that time", id)
	}
}
