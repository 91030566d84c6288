package schema

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// Under JsonConverter with schemas the change event's key and value are
// {"schema":…,"payload":…}: the payload the schemaless event's, the
// schemas the key's struct and the envelope (corpus cases
// change-events-schemas*), column defaults included.
func TestDebeziumChangeEventSchemasGolden(t *testing.T) {
	now := func() time.Time { return time.Unix(0, 1556890294484651402) }
	plain, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: DebeziumConfig{
		TopicPrefix: "dbserver1", Version: "3.6.1.Final", NotNull: docNotNull, Now: now}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEncoder(EncoderConfig{Format: Debezium, Debezium: DebeziumConfig{
		Key: ConvJSONSchemas, Value: ConvJSONSchemas, TopicPrefix: "dbserver1", Version: "3.6.1.Final",
		NotNull: docNotNull, Now: now,
		Defaults: map[string]string{"id": "gen_random_uuid()", "type": "'OrderCreated'::character varying", "timestamp": "now()"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := docRecord(t, nil)
	want, err := plain.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second from the cache
		m, err := e.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range []struct {
			name      string
			got, want []byte
		}{{"key", m.Key, want.Key}, {"value", m.Value, want.Value}} {
			var v struct {
				Schema  json.RawMessage
				Payload json.RawMessage
			}
			if err := json.Unmarshal(part.got, &v); err != nil || len(v.Schema) == 0 {
				t.Fatalf("%s %s: %v", part.name, part.got, err)
			}
			if !bytes.Equal(v.Payload, part.want) {
				t.Errorf("%s's payload %s, want the schemaless %s", part.name, v.Payload, part.want)
			}
		}
		checkGolden(t, filepath.Join("testdata", "debezium", "change-event-schemas.golden"), dumpMessage(m))
	}
	// Only the value with schemas: the key stays a bare struct.
	e, err = NewEncoder(EncoderConfig{Format: Debezium, Debezium: DebeziumConfig{Value: ConvJSONSchemas, TopicPrefix: "dbserver1"}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Key) != `{"id":"406c07f3-26f0-4eea-a50c-109940064b8f"}` || !bytes.HasPrefix(m.Value, []byte(`{"schema":{"type":"struct"`)) {
		t.Errorf("key %s, value %.40s", m.Key, m.Value)
	}
}

// A column default as Debezium 3.6.1 puts it in the schema
// (PostgresDefaultValueConverter), as the corpus recorded it (cases
// change-events-schemas-defaults, interval-string): the literal, a
// function's placeholder, or none.
func TestColumnDefaults(t *testing.T) {
	precise, str := valueModes{}, valueModes{decimal: decimalString}
	ivs := valueModes{interval: intervalString}
	for _, tc := range []struct {
		t    pgType
		m    valueModes
		expr string
		json string // "" for no default
	}{
		{pgType{oid: oidUUID, mod: -1}, precise, "gen_random_uuid()", `"00000000-0000-0000-0000-000000000000"`},
		{pgType{oid: oidUUID, mod: -1}, precise, "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid", `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`},
		{pgType{oid: oidVarchar, mod: -1}, precise, "'Order'::character varying", `"Order"`},
		{pgType{oid: oidText, mod: -1}, precise, "'it''s'::text", `"it"`}, // the first two quotes, as 3.6.1 reads it
		{pgType{oid: oidText, mod: -1}, precise, "NULL::text", ""},
		{pgType{oid: oidInt4, mod: -1}, precise, "0", `0`},
		{pgType{oid: oidInt4, mod: -1}, precise, "'-7'::integer", `-7`},
		{pgType{oid: oidInt8, mod: -1}, precise, "nextval('outbox_seq_seq'::regclass)", `0`},
		{pgType{oid: oidInt2, mod: -1}, precise, "100000", ""},
		{pgType{oid: oidBool, mod: -1}, precise, "false", `false`},
		{pgType{oid: oidBool, mod: -1}, precise, "true", `true`},
		{pgType{oid: oidNumeric, mod: numericMod(10, 2)}, precise, "1.5", `"AJY="`},
		{pgType{oid: oidNumeric, mod: numericMod(8, 3)}, precise, "12", `"LuA="`},
		{pgType{oid: oidNumeric, mod: -1}, precise, "2.5", ""}, // a struct: no default
		{pgType{oid: oidNumeric, mod: -1}, str, "2.5", `"2.5"`},
		{pgType{oid: oidFloat8, mod: -1}, precise, "2", `2.0`},
		{pgType{oid: oidFloat4, mod: -1}, precise, "1.25", `1.25`},
		{pgType{oid: oidMoney, mod: -1}, precise, "3.5", ""},
		{pgType{oid: oidBytea, mod: -1}, precise, `'\x00'::bytea`, ""},
		{pgType{oid: oidJSONB, mod: -1}, precise, "'{}'::jsonb", `"{}"`},
		{pgType{oid: oidTimestamptz, mod: -1}, precise, "now()", `"1970-01-01T00:00:00.000000Z"`},
		{pgType{oid: oidTimestamptz, mod: -1}, precise, "(now() + '1 day'::interval)", `"1970-01-01T00:00:00.000000Z"`},
		{pgType{oid: oidTimestamptz, mod: -1}, precise, "'2020-01-02 01:04:05+00'::timestamp with time zone", `"2020-01-02T01:04:05.000000Z"`},
		{pgType{oid: oidTimestamp, mod: -1}, precise, "CURRENT_TIMESTAMP", `0`},
		{pgType{oid: oidDate, mod: -1}, precise, "'2020-01-02'::date", `18263`},
		{pgType{oid: oidDate, mod: -1}, precise, "CURRENT_DATE", `0`},
		{pgType{oid: oidTime, mod: -1}, precise, "LOCALTIME", `0`},
		{pgType{oid: oidTimetz, mod: -1}, precise, "'03:04:05+02'::time with time zone", ""},
		{pgType{oid: oidIntvl, mod: -1}, precise, "'1 day 02:00:00'::interval", `93600000000`},
		{pgType{oid: oidIntvl, mod: -1}, ivs, "'1 day 02:00:00.5'::interval", `"P0Y0M1DT2H0M0.5S"`},
		{pgType{oid: oidIntvl, mod: -1}, ivs, "(now() - now())", `"P0Y0M0DT0H0M0S"`},
	} {
		var got []byte
		if text, ok := defaultText(tc.t, tc.m, tc.expr); ok {
			got, _ = appendConnectValue(nil, tc.t, tc.m, []byte(text))
		}
		if string(got) != tc.json {
			t.Errorf("%v %q: default %s, want %s", tc.t, tc.expr, got, tc.json)
		}
	}
}

// Intervals under interval.handling.mode=string, as Debezium 3.6.1 wrote
// them (corpus case interval-string).
func TestISOInterval(t *testing.T) {
	for in, want := range map[string]string{
		"1 year 2 mons 3 days 04:05:06.789": "P1Y2M3DT4H5M6.789S",
		"00:00:01.235":                      "P0Y0M0DT0H0M1.234999999S", // a double's seconds, cut
		"3 days":                            "P0Y0M3DT0H0M0S",
		"-1 years -2 mons +3 days -04:05:06.000001": "P-1Y-2M3DT-4H-5M-6.000001S",
		"-00:00:00.5":       "P0Y0M0DT0H0M-0.5S",
		"00:00:00":          "P0Y0M0DT0H0M0S",
		"25:00:00":          "P0Y0M0DT25H0M0S",
		"00:00:00.000001":   "P0Y0M0DT0H0M0.000001S",
		"-1 mons +00:00:01": "P0Y-1M0DT0H0M1S",
		"00:01:30":          "P0Y0M0DT0H1M30S",
		"-2147483648 days":  "P0Y0M-2147483648DT0H0M0S",
	} {
		if got, reason := isoInterval([]byte(in)); got != want || reason != "" {
			t.Errorf("isoInterval(%q) = %q (%s), want %q", in, got, reason, want)
		}
	}
	for _, bad := range []string{"1 fortnight", "x days", "1:2", "3000000000 days"} {
		if _, reason := isoInterval([]byte(bad)); reason == "" {
			t.Errorf("isoInterval(%q) accepted", bad)
		}
	}
}

// A NULL in a column with a default is that default where Debezium's
// record gives it (corpus cases change-events-*-defaults,
// placements-defaults*, route-null-default): everywhere in a change
// event; in the router's id, key, payload and placements, not its
// route.by.field column.
func TestFillDefaults(t *testing.T) {
	cols := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1},
		{Name: "type", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidJSONB, TypMod: -1}, {Name: "region", TypeOID: oidText, TypMod: -1}}
	defaults := map[string]string{"aggregatetype": "'Order'::text", "aggregateid": "'none'::text", "payload": "'{}'::jsonb", "region": "NULL::text"}
	row := [][]byte{[]byte("406c07f3-26f0-4eea-a50c-109940064b8f"), nil, nil, []byte("Created"), nil, nil}
	for _, tc := range []struct {
		f    Format
		want []string // "-" for nil
	}{
		{Debezium, []string{"406c07f3-26f0-4eea-a50c-109940064b8f", "Order", "none", "Created", "{}", "-"}},
		{DebeziumOutbox, []string{"406c07f3-26f0-4eea-a50c-109940064b8f", "-", "none", "Created", "{}", "-"}},
		{CloudEvents, []string{"406c07f3-26f0-4eea-a50c-109940064b8f", "-", "-", "Created", "-", "-"}},
	} {
		e, err := NewEncoder(EncoderConfig{Format: tc.f, Source: "/s", Debezium: DebeziumConfig{Defaults: defaults}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Columns{PassThrough: tc.f == DebeziumOutbox}.Bind(cols)
		if err != nil {
			t.Fatal(err)
		}
		got := e.FillDefaults(b, row)
		for i, v := range got {
			s := string(v)
			if v == nil {
				s = "-"
			}
			if s != tc.want[i] {
				t.Errorf("%s: %s = %s, want %s", tc.f, cols[i].Name, s, tc.want[i])
			}
		}
		if row[1] != nil || row[2] != nil {
			t.Fatal("FillDefaults wrote to the row")
		}
	}
}
