package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"
)

// FuzzRecord feeds random row values through Binding.Record and, when the row
// is accepted, through both encoders. Nothing may panic; every rejection must
// be a *RowError; every accepted row must encode to a message the CloudEvents
// SDK reads back attribute for attribute (structured mode: valid JSON).
func FuzzRecord(f *testing.F) {
	const payload = `{"orderId":42,"total":"19.90"}`
	for _, s := range []struct {
		id, aggType, aggID, typ, payload, headers, created string
		flags                                              byte
	}{
		{"0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10", "Order", "42", "OrderCreated", payload, "", "2026-11-21 18:37:59.123456+00", 0},
		{"1", "Order", "42", "OrderCreated", payload, `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`, "2026-11-21 18:37:59+05:30", 0},
		{"1", "Order", "42", "OrderCreated", " [1, 2.5e3, null] ", ` {"retries": 3, "ok": true, "s": "\u00e9"} `, "2026-11-21 18:37:59.5", 1 | 2<<2 | 2<<4},
		{"1", "Order", "42", "OrderCreated", `{"a":`, `{"a":{}}`, "infinity", 1},
		{"1", "Order", "42", "OrderCreated", `"x"`, `{"id":"clash"}`, "2026-11-21 18:37:59-03:30:15", 1 | 1<<4},
		{"1", "Order", "42", "OrderCreated", `null`, `{"a":1.5}`, "0044-03-15 12:00:00+00 BC", 1},
		{"", "Order", "42", "OrderCreated", payload, "", "", 0x40},
		{"id\"\\", "Ü\n", "\xff", "t\x7f", payload, `{"a":"\ud800"}`, "2026-02-29 00:00:00+00", 1},
		{"1", "Order", "42", "OrderCreated", payload, `{"a":"x"}`, "2026-11-21T18:37:59.123456789Z", 0x80 | 2<<4},
	} {
		f.Add(s.id, s.aggType, s.aggID, s.typ, []byte(s.payload), []byte(s.headers), []byte(s.created), s.flags)
	}
	structured := mustEncoder(f, CloudEvents, testSource)
	binary := mustEncoder(f, CloudEventsBinary, testSource)
	commit := time.Date(2026, 11, 21, 18, 0, 0, 1000, time.UTC)

	f.Fuzz(func(t *testing.T, id, aggType, aggID, typ string, payload, headers, created []byte, flags byte) {
		// flags: bits 0-1 payload type, 2-3 headers type, 4-5 time type,
		// 6 headers NULL, 7 time NULL.
		payloadOID := [...]uint32{oidJSONB, oidText, oidJSON, oidVarchar}[flags&3]
		headersOID := [...]uint32{oidJSONB, oidText, oidJSON, oidVarchar}[flags>>2&3]
		timeOID := [...]uint32{oidTimestamptz, oidTimestamp, oidText, oidTimestamptz}[flags>>4&3]
		if flags&0x40 != 0 {
			headers = nil
		}
		if flags&0x80 != 0 {
			created = nil
		}
		// Postgres guarantees jsonb output is valid, compact JSON: only
		// feed such values as jsonb.
		if payloadOID == oidJSONB && (!json.Valid(payload) || !bytes.Equal(trimJSONSpace(payload), payload)) {
			return
		}
		if headersOID == oidJSONB && headers != nil && (!json.Valid(headers) || !bytes.Equal(trimJSONSpace(headers), headers)) {
			return
		}
		b, err := Columns{}.Bind([]Column{
			{Name: "id", TypeOID: oidText, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "type", TypeOID: oidText, TypMod: -1},
			{Name: "payload", TypeOID: payloadOID, TypMod: -1}, {Name: "headers", TypeOID: headersOID, TypMod: -1}, {Name: "created_at", TypeOID: timeOID, TypMod: -1},
		})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := b.Record([][]byte{[]byte(id), []byte(aggType), []byte(aggID), []byte(typ), payload, headers, created}, commit)
		var re *RowError
		if err != nil {
			if !errors.As(err, &re) {
				t.Fatalf("Record error %v is not a *RowError", err)
			}
			return
		}
		for _, e := range []*Encoder{structured, binary} {
			m, err := e.Encode(&rec)
			if err != nil {
				if !errors.As(err, &re) {
					t.Fatalf("Encode error %v is not a *RowError", err)
				}
				continue
			}
			if e == structured && !json.Valid(m.Value) {
				t.Fatalf("structured value is not valid JSON: %s", m.Value)
			}
			checkMessage(t, e.Format(), testSource, &rec, m)
		}
	})
}

// FuzzDebeziumValue renders random text as a column of each type Debezium's
// value options change, under random options: nothing may panic, a value
// accepted as JSON must be valid JSON, and the text form is written for
// any value the JSON form accepts.
func FuzzDebeziumValue(f *testing.F) {
	for _, s := range []struct {
		text  string
		flags byte
	}{
		{"12345678.91", 0}, {"NaN", 1<<3 | 1}, {"-$1,000.00", 1<<3 | 2}, {"2020-01-02 03:04:05.678912", 3<<3 | 2<<6},
		{"24:00:00", 5<<3 | 2<<6}, {`\x00ff41`, 6<<3 | 1<<5}, {`\x`, 6<<3 | 3<<5}, {"1969-12-31", 4<<3 | 2<<6},
		{"Infinity", 2}, {"2020-01-02 03:04:05+02", 7 << 3},
	} {
		f.Add(s.text, s.flags, s.flags%6, int32(-1))
	}
	types := [...]uint32{oidNumeric, oidMoney, oidNumeric, oidTimestamp, oidDate, oidTime, oidBytea, oidTimestamptz}
	f.Fuzz(func(t *testing.T, text string, flags, tmode byte, mod int32) {
		// flags: bits 0-1 decimal mode, 3-5 type, 5-6 binary mode (shares
		// bit 5); tmode the time mode.
		m := valueModes{decimal: decimalMode(flags & 3 % 3), binary: binaryMode(flags >> 5 & 3), time: timeMode(tmode % 6)}
		typ := pgType{oid: types[flags>>3&7], mod: mod}
		v, reason := appendConnectValue(nil, typ, m, []byte(text))
		if reason == "" && !json.Valid(v) {
			t.Fatalf("%v %+v %q: invalid JSON %s", typ, m, text, v)
		}
		if _, r := appendStringValue(nil, typ, m, []byte(text)); reason == "" && r != "" {
			t.Fatalf("%v %+v %q: JSON accepted, text refused: %s", typ, m, text, r)
		}
	})
}

// FuzzISOInterval: any text is an ISO-8601 duration Debezium could write,
// or a reason; never a panic.
func FuzzISOInterval(f *testing.F) {
	for _, s := range []string{"1 year 2 mons 3 days 04:05:06.789", "-00:00:00.5", "-1 mons +00:00:01", "25:00:00", "1:2", "x days", "3000000000 days"} {
		f.Add(s)
	}
	iso := regexp.MustCompile(`^P-?\d+Y-?\d+M-?\d+DT-?\d+H-?\d+M-?\d+(\.\d{1,9})?S$`)
	f.Fuzz(func(t *testing.T, text string) {
		got, reason := isoInterval([]byte(text))
		if reason == "" && !iso.MatchString(got) {
			t.Errorf("isoInterval(%q) = %q", text, got)
		}
	})
}
