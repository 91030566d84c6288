package transform

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
)

// A table of every kind of column the router can carry, by type OID.
var kinds = []schema.Column{
	{Name: "id", TypeOID: 2950, TypMod: -1},              // uuid
	{Name: "aggregatetype", TypeOID: 25, TypMod: -1},     // text
	{Name: "aggregateid", TypeOID: 25, TypMod: -1},       // text
	{Name: "payload", TypeOID: 3802, TypMod: -1},         // jsonb
	{Name: "i4", TypeOID: 23, TypMod: -1},                // int4
	{Name: "i8", TypeOID: 20, TypMod: -1},                // int8
	{Name: "i2", TypeOID: 21, TypMod: -1},                // int2
	{Name: "b", TypeOID: 16, TypMod: -1},                 // bool
	{Name: "f4", TypeOID: 700, TypMod: -1},               // float4
	{Name: "f8", TypeOID: 701, TypMod: -1},               // float8
	{Name: "n", TypeOID: 1700, TypMod: (10<<16 | 2) + 4}, // numeric(10,2)
	{Name: "nv", TypeOID: 1700, TypMod: -1},              // numeric
	{Name: "by", TypeOID: 17, TypMod: -1},                // bytea
	{Name: "ts", TypeOID: 1114, TypMod: -1},              // timestamp
	{Name: "tz", TypeOID: 1184, TypMod: -1},              // timestamptz
	{Name: "d", TypeOID: 1082, TypMod: -1},               // date
	{Name: "t", TypeOID: 25, TypMod: -1},                 // text
	{Name: "kb", TypeOID: 17, TypMod: -1},                // bytea, for keys
}

var kindRows = [][]string{
	{"0b48d504-1afa-4526-a8b1-053ee1f39e35", "order", "o-1", `{"a":1,"b":[1,2.5,"x"],"c":{"d":null}}`, "42", "-9000000000", "7", "t", "1.5", "1e+300", "-12.30", "3.14159", `\x00ff41`, "2020-01-02 03:04:05.678912", "2020-01-02 03:04:05.678912+00", "2020-01-02", `a "quoted" \ text`, `\x6b31`},
	{"750a84c8-8319-4a5c-a8d5-3fc81fa6bb9e", "order", "", "", "0", "", "", "f", "NaN", "-0", "0.00", "NaN", `\x`, "", "", "", "", ""},
	{"9c9b60d1-bf65-4921-9118-b7521b0bf800", "order", "o-3", "[1,2]", "-1", "0", "0", "", "-Infinity", "0.001", "99999999.99", "-0.0000001", "", "1970-01-01 00:00:00", "", "1969-12-31", "\U0001F389 é\x01", `\x00`},
}

func rowValues(r []string) [][]byte {
	out := make([][]byte, len(kinds))
	for i := range out {
		if i < len(r) && r[i] != "" {
			out[i] = []byte(r[i])
		}
	}
	return out
}

// TestReadBackEqualsDirect is the ground the chain stands on: a record
// the router wrote with every converter JsonConverter with schemas, read
// back into Kafka Connect data and written through the configured
// converters, is byte for byte what the router writes with those
// converters directly (the path without transforms), for every kind of
// column, placement and converter.
func TestReadBackEqualsDirect(t *testing.T) {
	convs := []schema.Converter{schema.ConvString, schema.ConvJSON, schema.ConvJSONSchemas, schema.ConvByteArray, "binary:json", "binary:string", "binary:json-schemas"}
	layouts := []struct {
		name string
		cols schema.Columns
		cfg  schema.DebeziumConfig
	}{
		{"plain", schema.Columns{}, schema.DebeziumConfig{}},
		{"key bytes", schema.Columns{AggregateID: "kb"}, schema.DebeziumConfig{}},
		{"payload bytes", schema.Columns{Payload: "by"}, schema.DebeziumConfig{}},
		{"payload text", schema.Columns{Payload: "t"}, schema.DebeziumConfig{TombstoneOnEmpty: true}},
		{"expanded", schema.Columns{}, schema.DebeziumConfig{ExpandJSONPayload: true}},
		{"headers", schema.Columns{Additional: additional(t, "i4:header,i8:header,i2:header,b:header,f4:header,f8:header,n:header,nv:header,by:header,ts:header,tz:header,d:header,t:header:txt")},
			schema.DebeziumConfig{ContextHeaders: true, TopicPrefix: "shop"}},
		{"envelope", schema.Columns{Time: "ts", Additional: additional(t, "i4:envelope,i8:envelope,i2:envelope,b:envelope,f4:envelope,f8:envelope,n:envelope,nv:envelope,by:envelope,ts:envelope,tz:envelope,d:envelope,t:envelope:txt,i4:partition")},
			schema.DebeziumConfig{NotNull: map[string]bool{"id": true, "i4": true}}},
	}
	compared := 0
	chain := &Chain{} // with its schema cache, as records of one layout share their schemas
	for _, l := range layouts {
		cols := l.cols
		cols.PassThrough = true
		b, err := cols.Bind(kinds)
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		for _, key := range convs {
			for _, value := range convs {
				for _, header := range []schema.Converter{schema.ConvString, schema.ConvJSON, schema.ConvJSONSchemas, "binary"} {
					cfg := l.cfg
					cfg.Key, cfg.Value, cfg.Header, cfg.RunID = key, value, header, "run"
					direct, err := schema.NewEncoder(schema.EncoderConfig{Format: schema.DebeziumOutbox, Debezium: cfg})
					if err != nil {
						continue
					}
					cfg.Key, cfg.Value, cfg.Header = schema.ConvJSONSchemas, schema.ConvJSONSchemas, schema.ConvJSONSchemas
					viaJSON, err := schema.NewEncoder(schema.EncoderConfig{Format: schema.DebeziumOutbox, Debezium: cfg})
					if err != nil {
						t.Fatal(err)
					}
					for i, row := range kindRows {
						name := fmt.Sprintf("%s key=%s value=%s header=%s row %d", l.name, key, value, header, i)
						rec, err := b.Record(rowValues(row), time.Unix(1700000000, 0))
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						rec.Origin = schema.Origin{Schema: "public", Table: "outbox"}
						want, err := direct.Encode(&rec)
						if err != nil {
							continue // the configuration cannot write this row
						}
						msg, err := viaJSON.Encode(&rec)
						if err != nil {
							t.Fatalf("%s: JSON with schemas: %v", name, err)
						}
						r, err := chain.Read("t", &msg, time.Unix(1, 0))
						if err != nil {
							t.Fatalf("%s: read back: %v", name, err)
						}
						got, err := r.Message(Converters{Key: key, Value: value, Header: header})
						if err != nil {
							t.Errorf("%s: written back: %v", name, err)
							continue
						}
						compareMessages(t, name, want, got)
						compared++
					}
				}
			}
		}
	}
	if compared < 500 {
		t.Errorf("only %d records compared", compared)
	}
}

func additional(t *testing.T, s string) []schema.AdditionalField {
	t.Helper()
	a, err := schema.ParseAdditionalFields(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func compareMessages(t *testing.T, name string, want, got schema.Message) {
	t.Helper()
	same := func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	if !same(want.Key, got.Key) {
		t.Errorf("%s: key\n got %q\nwant %q", name, got.Key, want.Key)
	}
	if !same(want.Value, got.Value) {
		t.Errorf("%s: value\n got %q\nwant %q", name, got.Value, want.Value)
	}
	if want.HasPartition != got.HasPartition || want.Partition != got.Partition {
		t.Errorf("%s: partition %v %d, want %v %d", name, got.HasPartition, got.Partition, want.HasPartition, want.Partition)
	}
	if len(want.Headers) != len(got.Headers) {
		t.Errorf("%s: %d headers, want %d", name, len(got.Headers), len(want.Headers))
		return
	}
	for i, h := range want.Headers {
		if g := got.Headers[i]; g.Key != h.Key || !same(g.Value, h.Value) {
			t.Errorf("%s: header %d\n got %s=%q\nwant %s=%q", name, i, g.Key, g.Value, h.Key, h.Value)
		}
	}
}

// A change event of a table without a primary key (schema's NullKey) has
// Kafka's null key and no key schema under every key converter, as
// Debezium 3.6.1 writes it; its value is written as a keyed one's.
func TestChangeEventNullKey(t *testing.T) {
	b, err := schema.Columns{PassThrough: true}.Bind(kinds)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := b.Record(rowValues(kindRows[0]), time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	rec.Origin = schema.Origin{Schema: "public", Table: "outbox"}
	cfg := schema.DebeziumConfig{Key: schema.ConvJSONSchemas, Value: schema.ConvJSONSchemas, Header: schema.ConvJSONSchemas, NullKey: true}
	enc, err := schema.NewEncoder(schema.EncoderConfig{Format: schema.Debezium, Debezium: cfg})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := enc.Encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []schema.Converter{schema.ConvString, schema.ConvJSON, schema.ConvJSONSchemas, schema.ConvAvro, schema.ConvLong, "binary:json"} {
		for _, value := range []schema.Converter{schema.ConvJSON, schema.ConvAvro, schema.ConvCloudEvents} {
			r, err := (&Chain{}).Read("shop.public.outbox", &msg, time.Unix(1, 0))
			if err != nil {
				t.Fatal(err)
			}
			if r.Key != nil || r.KeySchema != nil {
				t.Fatalf("read back: key %v, schema %v", r.Key, r.KeySchema)
			}
			got, err := r.Message(Converters{Key: key, Value: value, Header: schema.ConvString})
			if err != nil {
				t.Errorf("key=%s value=%s: %v", key, value, err)
				continue
			}
			if got.Key != nil || got.KeySchema != "" || len(got.Value) == 0 {
				t.Errorf("key=%s value=%s: key %q (schema %q), value of %d bytes; want a null key", key, value, got.Key, got.KeySchema, len(got.Value))
			}
		}
	}
}
