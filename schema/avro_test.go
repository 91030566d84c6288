package schema

import (
	"encoding/hex"
	"testing"
	"time"
)

// What Debezium 3.6.1's outbox router, through Apicurio's AvroConverter
// 2.6.13.Final (auto-registering in Apicurio Registry 2.1.5), wrote and
// registered for these rows of a table
//
//	id uuid NOT NULL PRIMARY KEY, aggregatetype text NOT NULL,
//	aggregateid text, type text NOT NULL, payload jsonb, n integer
//
// with topic.prefix env: the datums after the converter's framing, and the
// registered schemas as the registry returns them. The corpus cases
// avro-* check the same against Debezium on every run.
func TestDebeziumOutboxAvro(t *testing.T) {
	const (
		keySchema      = `["null","string"]`
		jsonSchema     = `["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}]`
		expandedSchema = `{"type":"record","name":"Value","namespace":"env.public.outbox.Order","fields":[{"name":"payload","type":["null",{"type":"record","name":"payload","namespace":"","fields":[{"name":"a","type":["null","int"],"default":null},{"name":"b","type":["null",{"type":"record","name":"b","namespace":"payload","fields":[{"name":"c","type":["null","string"],"default":null}],"connect.name":"payload.b"}],"default":null}],"connect.name":"payload"}],"default":null},{"name":"eventType","type":"string"},{"name":"n","type":["null","int"],"default":null}],"connect.name":"env.public.outbox.Order.Value"}`
		stringSchema   = `{"type":"record","name":"Value","namespace":"env.public.outbox.Order","fields":[{"name":"payload","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null},{"name":"eventType","type":"string"},{"name":"n","type":["null","int"],"default":null}],"connect.name":"env.public.outbox.Order.Value"}`
		payload        = `{"a": 1, "b": {"c": "x"}}`
	)
	envelope := []AdditionalField{{Column: "type", Placement: PlaceEnvelope, Alias: "eventType"}, {Column: "n", Placement: PlaceEnvelope, Alias: "n"}}
	for _, tc := range []struct {
		name               string
		cfg                DebeziumConfig
		add                []AdditionalField
		aggregateID, pl, n []byte
		key, keySchema     string // hex datum
		value, valueSchema string
	}{
		{name: "key and payload", cfg: DebeziumConfig{Key: ConvAvro, Value: ConvAvro},
			aggregateID: []byte("o-1"), pl: []byte(payload), n: []byte("5"),
			key: "02066f2d31", keySchema: keySchema,
			value: "0232" + hex.EncodeToString([]byte(payload)), valueSchema: jsonSchema},
		{name: "nulls", cfg: DebeziumConfig{Key: ConvAvro, Value: ConvAvro}},
		{name: "envelope expanded", cfg: DebeziumConfig{Key: ConvString, Value: ConvAvro, ExpandJSONPayload: true}, add: envelope,
			aggregateID: []byte("o-1"), pl: []byte(payload), n: []byte("5"), key: hex.EncodeToString([]byte("o-1")),
			value: "020202020202" + "78" + "18" + hex.EncodeToString([]byte("OrderCreated")) + "020a", valueSchema: expandedSchema},
		// The expanded payload alone (avro-evolution's first row): a
		// record, not a union.
		{name: "expanded", cfg: DebeziumConfig{Key: ConvString, Value: ConvAvro, ExpandJSONPayload: true},
			aggregateID: []byte("o-1"), pl: []byte(`{"a": 1}`), key: hex.EncodeToString([]byte("o-1")),
			value: "0202", valueSchema: `{"type":"record","name":"payload","fields":[{"name":"a","type":["null","int"],"default":null}],"connect.name":"payload"}`},
		{name: "envelope null payload", cfg: DebeziumConfig{Key: ConvString, Value: ConvAvro, ExpandJSONPayload: true}, add: envelope,
			aggregateID: []byte("o-2"), key: hex.EncodeToString([]byte("o-2")),
			value: "00" + "18" + hex.EncodeToString([]byte("OrderCreated")) + "00", valueSchema: stringSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.TopicPrefix = "env"
			tc.cfg.NotNull = map[string]bool{"id": true, "aggregatetype": true, "type": true}
			e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			cols := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1},
				{Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}, {Name: "n", TypeOID: oidInt4, TypMod: -1}}
			b, err := Columns{Additional: tc.add, PassThrough: true}.Bind(cols)
			if err != nil {
				t.Fatal(err)
			}
			r, err := b.Record([][]byte{[]byte("c0a80101-0000-4000-8000-000000000001"), []byte("Order"), tc.aggregateID,
				[]byte("OrderCreated"), tc.pl, tc.n}, time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			r.Origin = Origin{Schema: "public", Table: "outbox"}
			m, err := e.Encode(&r)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []struct {
				part            string
				got, want       []byte
				gotSch, wantSch string
			}{{"key", m.Key, mustHex(t, tc.key), m.KeySchema, tc.keySchema}, {"value", m.Value, mustHex(t, tc.value), m.ValueSchema, tc.valueSchema}} {
				if hex.EncodeToString(p.got) != hex.EncodeToString(p.want) || (p.got == nil) != (p.want == nil) {
					t.Errorf("%s = %x, want %x", p.part, p.got, p.want)
				}
				if p.gotSch != p.wantSch {
					t.Errorf("%s schema = %s\nwant %s", p.part, p.gotSch, p.wantSch)
				}
			}
		})
	}
}

// mustHex decodes s; "" is nil (Kafka's null).
func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	if s == "" {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Kafka Connect's Decimal and Debezium's VariableScaleDecimal as
// Debezium 3.6.1 wrote them through Apicurio's AvroConverter (corpus case
// avro-decimal): numeric(10,2) -12345678.91, money 12.34, numeric 3.14159.
func TestAvroDecimal(t *testing.T) {
	for _, tc := range []struct {
		t             pgType
		text          string
		schema, datum string
	}{
		{pgType{oid: oidNumeric, mod: (10<<16 | 2) + 4}, "-12345678.91",
			`{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
			"08b669fd2d"},
		{pgType{oid: oidMoney, mod: -1}, "$12.34",
			`{"type":"bytes","scale":2,"precision":64,"connect.version":1,"connect.parameters":{"scale":"2"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}`,
			"0404d2"},
		{pgType{oid: oidNumeric, mod: -1}, "3.14159",
			`{"type":"record","name":"VariableScaleDecimal","namespace":"io.debezium.data","fields":[{"name":"scale","type":"int"},{"name":"value","type":"bytes"}],"connect.doc":"Variable scaled decimal","connect.version":1,"connect.name":"io.debezium.data.VariableScaleDecimal"}`,
			"0a0604cb2f"},
	} {
		s, reason := avroSchemaOf(ConvAvro, tc.t, valueModes{}, false, nil)
		d, reason2 := appendAvroValue(nil, tc.t, valueModes{}, []byte(tc.text))
		if reason != "" || reason2 != "" || s != tc.schema || hex.EncodeToString(d) != tc.datum {
			t.Errorf("%s: schema %s, datum %x (%s %s)\nwant %s, %s", tc.text, s, d, reason, reason2, tc.schema, tc.datum)
		}
	}
}

// The change event in Avro, or under StringConverter, is written by
// package transform (the relay sends it there): the encoder says so, and
// Encode refuses it rather than write JSON.
func TestChangeEventConnectOnly(t *testing.T) {
	for _, c := range []DebeziumConfig{{Key: ConvAvro, Value: ConvJSON}, {Key: ConvJSON, Value: ConvAvro}, {Key: ConvJSON, Value: "binary:avro"},
		{Key: ConvString, Value: ConvJSON}} {
		e, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: c})
		if err != nil || !e.ConnectOnly() {
			t.Errorf("%+v: %v, connect only %v", c, err, err == nil && e.ConnectOnly())
			continue
		}
		r := docRecord(t, nil)
		if _, err := e.Encode(&r); err == nil {
			t.Errorf("%+v: encoded", c)
		}
	}
	for _, f := range []Format{DebeziumOutbox, Debezium} {
		c := DebeziumConfig{Key: ConvAvro, Value: ConvAvro}
		if f == Debezium {
			c = DebeziumConfig{Key: ConvJSON, Value: ConvJSONSchemas}
		}
		if e, err := NewEncoder(EncoderConfig{Format: f, Debezium: c}); err != nil || e.ConnectOnly() {
			t.Errorf("%s %+v: %v", f, c, err)
		}
	}
	if _, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: DebeziumConfig{Key: ConvByteArray}}); err == nil {
		t.Error("a change event under ByteArrayConverter accepted")
	}
}

// Columns under Debezium's value options as Debezium 3.6.1 wrote them
// through Apicurio's AvroConverter (corpus cases avro-time-connect,
// avro-time-isostring, avro-decimal-string-base64, avro-decimal-double-hex):
// time.precision.mode=connect gives Kafka Connect's Date, Time and
// Timestamp, which AvroData writes with Avro's logical types; the other
// modes give strings and doubles; a NaN is Java's canonical one.
func TestAvroValueModes(t *testing.T) {
	connect := valueModes{time: timeConnect}
	for _, tc := range []struct {
		t             pgType
		m             valueModes
		text          string
		schema, datum string
	}{
		{pgType{oid: oidDate, mod: -1}, connect, "2020-01-02",
			`{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Date","logicalType":"date"}`, "ae9d02"},
		{pgType{oid: oidTime, mod: 0}, connect, "03:04:05",
			`{"type":"int","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Time","logicalType":"time-millis"}`, "90a2c40a"},
		{pgType{oid: oidTimestamp, mod: -1}, connect, "1969-12-31 23:59:59.9999",
			`{"type":"long","connect.version":1,"connect.name":"org.apache.kafka.connect.data.Timestamp","logicalType":"timestamp-millis"}`, "01"},
		{pgType{oid: oidTimestamp, mod: -1}, valueModes{time: timeISO}, "2020-01-02 03:04:05.6789",
			`{"type":"string","connect.version":1,"connect.name":"io.debezium.time.IsoTimestamp"}`, "32" + hex.EncodeToString([]byte("2020-01-02T03:04:05.6789Z"))},
		{pgType{oid: oidNumeric, mod: -1}, valueModes{decimal: decimalString}, "NaN", `"string"`, "06" + hex.EncodeToString([]byte("NAN"))},
		{pgType{oid: oidMoney, mod: -1}, valueModes{decimal: decimalString}, "-$1,000.00", `"string"`, "10" + hex.EncodeToString([]byte("-1000.00"))},
		{pgType{oid: oidNumeric, mod: (10<<16 | 2) + 4}, valueModes{decimal: decimalDouble}, "NaN", `"double"`, "000000000000f87f"},
		{pgType{oid: oidFloat8, mod: -1}, valueModes{}, "NaN", `"double"`, "000000000000f87f"},
		{pgType{oid: oidFloat4, mod: -1}, valueModes{}, "NaN", `"float"`, "0000c07f"},
		{pgType{oid: oidBytea, mod: -1}, valueModes{binary: binaryBase64}, `\x00ff41fbff`, `"string"`, "10" + hex.EncodeToString([]byte("AP9B+/8="))},
		{pgType{oid: oidBytea, mod: -1}, valueModes{binary: binaryHex}, `\xfbffbf`, `"string"`, "0c" + hex.EncodeToString([]byte("fbffbf"))},
	} {
		s, reason := avroSchemaOf(ConvAvro, tc.t, tc.m, false, nil)
		d, reason2 := appendAvroValue(nil, tc.t, tc.m, []byte(tc.text))
		if reason != "" || reason2 != "" || s != tc.schema || hex.EncodeToString(d) != tc.datum {
			t.Errorf("%v %s: schema %s, datum %x (%s %s)\nwant %s, %s", tc.t, tc.text, s, d, reason, reason2, tc.schema, tc.datum)
		}
	}
}

// A Connect default in Avro, as Apicurio's AvroData wrote it (corpus case
// avro-defaults): connect.default before connect.name, the type before
// null in an optional union, the field's default; bytes as a string of a
// character per byte.
func TestAvroDefault(t *testing.T) {
	dec := connectType{typ: "bytes", name: decimalName, version: 1, params: `{"scale":"2","connect.decimal.precision":"10"}`}
	for _, tc := range []struct {
		ct       connectType
		optional bool
		def      string // the JSON default
		want     string
	}{
		{connectType{typ: "string"}, true, `"eu"`, `[{"type":"string","connect.default":"eu"},"null"]`},
		{connectType{typ: "int32"}, false, `0`, `{"type":"int","connect.default":0}`},
		{connectType{typ: "string"}, true, "", `["null","string"]`},
		{dec, true, `"AJY="`, `[{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},` +
			`"connect.default":"\u0000` + "\u0096" + `","connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"},"null"]`},
	} {
		var def []byte
		if tc.def != "" {
			def = avroDefault(tc.ct, []byte(tc.def))
		}
		got, ok := appendAvroConnectDefault(nil, tc.ct, tc.optional, def, nil)
		if !ok || string(got) != tc.want {
			t.Errorf("%+v %s: %s, want %s", tc.ct, tc.def, got, tc.want)
		}
		if end := string(appendAvroFieldEndDefault(nil, tc.optional, def)); def != nil && end != `,"default":`+string(def)+"}" {
			t.Errorf("field end %s", end)
		}
	}
	// The value's branch is the union's first when the field has a default.
	for _, tc := range []struct {
		valueFirst bool
		text       []byte
		want       byte
	}{{false, []byte("x"), 2}, {true, []byte("x"), 0}, {false, nil, 0}, {true, nil, 2}} {
		got, reason := appendAvroFieldValue(nil, pgType{oid: oidText, mod: -1}, valueModes{}, tc.text, true, tc.valueFirst)
		if reason != "" || got[0] != tc.want {
			t.Errorf("valueFirst %v, %q: branch %d, want %d", tc.valueFirst, tc.text, got[0], tc.want)
		}
	}
}
