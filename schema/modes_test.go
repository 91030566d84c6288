package schema

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// What Debezium 3.6.1 wrote for these columns under each value option, as
// the corpus recorded it (test/compat cases time-*, decimal-*, binary-*,
// change-events-value-modes*): the JSON value (JsonConverter), the text
// (StringConverter for keys and values, SimpleHeaderConverter for
// headers; "-" for a null) and the schema's type and logical name.
func TestValueModesRendering(t *testing.T) {
	micros := valueModes{time: timeAdaptiveMicros}
	connect := valueModes{time: timeConnect}
	iso, us, ns := valueModes{time: timeISO}, valueModes{time: timeMicros}, valueModes{time: timeNanos}
	str := valueModes{decimal: decimalString}
	dbl := valueModes{decimal: decimalDouble}
	b64 := valueModes{binary: binaryBase64}
	url := valueModes{binary: binaryBase64URL}
	hexa := valueModes{binary: binaryHex}
	n10x2, n12x9, n := pgType{oid: oidNumeric, mod: numericMod(10, 2)}, pgType{oid: oidNumeric, mod: numericMod(12, 9)}, pgType{oid: oidNumeric, mod: -1}
	money := pgType{oid: oidMoney, mod: -1}
	date, t0, t3, t6 := pgType{oid: oidDate, mod: -1}, pgType{oid: oidTime, mod: 0}, pgType{oid: oidTime, mod: 3}, pgType{oid: oidTime, mod: -1}
	ts0, ts3, ts6 := pgType{oid: oidTimestamp, mod: 0}, pgType{oid: oidTimestamp, mod: 3}, pgType{oid: oidTimestamp, mod: -1}
	bytea := pgType{oid: oidBytea, mod: -1}
	for _, tc := range []struct {
		t         pgType
		m         valueModes
		text      string
		json, str string
		typ, name string
	}{
		// time.precision.mode=adaptive_time_microseconds: every time is
		// a MicroTime; timestamps as under adaptive.
		{t0, micros, "03:04:05", `11045000000`, "11045000000", "int64", "io.debezium.time.MicroTime"},
		{t3, micros, "03:04:05.678", `11045678000`, "11045678000", "int64", "io.debezium.time.MicroTime"},
		{ts3, micros, "2020-01-02 03:04:05.678", `1577934245678`, "1577934245678", "int64", "io.debezium.time.Timestamp"},
		{ts6, micros, "2020-01-02 03:04:05.678912", `1577934245678912`, "1577934245678912", "int64", "io.debezium.time.MicroTimestamp"},
		{date, micros, "2020-01-02", `18263`, "18263", "int32", "io.debezium.time.Date"},
		// time.precision.mode=connect: Kafka Connect's own types, in
		// milliseconds (floored), and SimpleHeaderConverter's text of a
		// java.util.Date.
		{date, connect, "2020-01-02", `18263`, "2020-01-02", "int32", "org.apache.kafka.connect.data.Date"},
		{date, connect, "1969-12-31", `-1`, "00:00:00.000Z", "int32", "org.apache.kafka.connect.data.Date"},
		{t0, connect, "24:00:00", `86400000`, "1970-01-02", "int32", "org.apache.kafka.connect.data.Time"},
		{t6, connect, "23:59:59.999999", `86399999`, "23:59:59.999Z", "int32", "org.apache.kafka.connect.data.Time"},
		{ts0, connect, "2020-01-02 00:00:00", `1577923200000`, "2020-01-02", "int64", "org.apache.kafka.connect.data.Timestamp"},
		{ts6, connect, "1969-12-31 23:59:59.9999", `-1`, "23:59:59.999Z", "int64", "org.apache.kafka.connect.data.Timestamp"},
		{ts6, connect, "1970-01-02 00:00:00.5", `86400500`, "1970-01-02T00:00:00.500Z", "int64", "org.apache.kafka.connect.data.Timestamp"},
		{ts6, connect, "9999-12-31 23:59:59.999999", `253402300799999`, "9999-12-31T23:59:59.999Z", "int64", "org.apache.kafka.connect.data.Timestamp"},
		{pgType{oid: oidTimestamptz, mod: -1}, connect, "2020-01-02 03:04:05.678912+02", `"2020-01-02T01:04:05.678912Z"`, "2020-01-02T01:04:05.678912Z", "string", "io.debezium.time.ZonedTimestamp"},
		// isostring: ISO-8601 in UTC, seconds always, the fraction without
		// its trailing zeros; microseconds and nanoseconds at any
		// precision.
		{date, iso, "1969-12-31", `"1969-12-31Z"`, "1969-12-31Z", "string", "io.debezium.time.IsoDate"},
		{t0, iso, "24:00:00", `"00:00:00Z"`, "00:00:00Z", "string", "io.debezium.time.IsoTime"},
		{t3, iso, "12:00:00.5", `"12:00:00.5Z"`, "12:00:00.5Z", "string", "io.debezium.time.IsoTime"},
		{ts6, iso, "1969-12-31 23:59:59.9999", `"1969-12-31T23:59:59.9999Z"`, "1969-12-31T23:59:59.9999Z", "string", "io.debezium.time.IsoTimestamp"},
		{ts0, iso, "2020-01-02 03:04:05", `"2020-01-02T03:04:05Z"`, "2020-01-02T03:04:05Z", "string", "io.debezium.time.IsoTimestamp"},
		{t0, us, "03:04:05", `11045000000`, "11045000000", "int64", "io.debezium.time.MicroTime"},
		{ts3, us, "1969-12-31 23:59:59.999", `-1000`, "-1000", "int64", "io.debezium.time.MicroTimestamp"},
		{t6, ns, "00:00:00.000001", `1000`, "1000", "int64", "io.debezium.time.NanoTime"},
		{ts0, ns, "1969-12-31 23:59:59", `-1000000000`, "-1000000000", "int64", "io.debezium.time.NanoTimestamp"},
		{ts6, ns, "2262-04-11 23:47:16.854775", `9223372036854775000`, "9223372036854775000", "int64", "io.debezium.time.NanoTimestamp"},
		{ts0, ns, "1677-09-22 00:00:00", `-9223286400000000000`, "-9223286400000000000", "int64", "io.debezium.time.NanoTimestamp"},
		// decimal.handling.mode=string: the plain text; NaN and the
		// infinities by SpecialValueDecimal's names.
		{n10x2, str, "12345678.91", `"12345678.91"`, "12345678.91", "string", ""},
		{n12x9, str, "0.000000012", `"0.000000012"`, "0.000000012", "string", ""},
		{n, str, "1.500", `"1.500"`, "1.500", "string", ""},
		{n, str, "NaN", `"NAN"`, "NAN", "string", ""},
		{n, str, "Infinity", `"POSITIVE_INFINITY"`, "POSITIVE_INFINITY", "string", ""},
		{n, str, "-Infinity", `"NEGATIVE_INFINITY"`, "NEGATIVE_INFINITY", "string", ""},
		{money, str, "-$1,000.00", `"-1000.00"`, "-1000.00", "string", ""},
		// decimal.handling.mode=double: Java's double text; NaN and the
		// infinities as Jackson's strings, Double.toString's text.
		{n10x2, dbl, "12345678.91", `1.234567891E7`, "1.234567891E7", "double", ""},
		{n12x9, dbl, "0.000000012", `1.2E-8`, "1.2E-8", "double", ""},
		{pgType{oid: oidNumeric, mod: numericMod(5, 0)}, dbl, "-128", `-128.0`, "-128.0", "double", ""},
		{n, dbl, "NaN", `"NaN"`, "NaN", "double", ""},
		{n, dbl, "-Infinity", `"-Infinity"`, "-Infinity", "double", ""},
		{n, dbl, "123456789012345678901234567890.000000000000000000001", `1.2345678901234568E29`, "1.2345678901234568E29", "double", ""},
		{money, dbl, "$1,234,567.89", `1234567.89`, "1234567.89", "double", ""},
		// binary.handling.mode: strings.
		{bytea, b64, `\x00ff41fbff`, `"AP9B+/8="`, "AP9B+/8=", "string", ""},
		{bytea, url, `\x00ff41fbff`, `"AP9B-_8="`, "AP9B-_8=", "string", ""},
		{bytea, hexa, `\xabcdef`, `"abcdef"`, "abcdef", "string", ""},
		{bytea, b64, `\x`, `""`, "", "string", ""},
		{bytea, valueModes{}, `\x00ff41`, `"AP9B"`, "-", "bytes", ""}, // StringConverter cannot write bytes
		// interval.handling.mode=string: ISO-8601 text.
		{pgType{oid: oidIntvl, mod: -1}, valueModes{interval: intervalString}, "1 year 2 mons 3 days 04:05:06.789", `"P1Y2M3DT4H5M6.789S"`, "P1Y2M3DT4H5M6.789S", "string", "io.debezium.time.Interval"},
		{pgType{oid: oidIntvl, mod: -1}, valueModes{}, "1 day", `86400000000`, "86400000000", "int64", "io.debezium.time.MicroDuration"},
	} {
		got, reason := appendConnectValue(nil, tc.t, tc.m, []byte(tc.text))
		if reason != "" || string(got) != tc.json {
			t.Errorf("%v %+v %q as JSON: %s (%s), want %s", tc.t, tc.m, tc.text, got, reason, tc.json)
		}
		if tc.str != "-" {
			got, reason = appendStringValue(nil, tc.t, tc.m, []byte(tc.text))
			if reason != "" || string(got) != tc.str {
				t.Errorf("%v %+v %q as text: %s (%s), want %s", tc.t, tc.m, tc.text, got, reason, tc.str)
			}
		}
		ct, ok := connectTypeOf(tc.t, tc.m)
		if !ok || ct.typ != tc.typ || ct.name != tc.name {
			t.Errorf("%v %+v: type %s %q, want %s %q", tc.t, tc.m, ct.typ, ct.name, tc.typ, tc.name)
		}
		if isNullValue(tc.t, tc.m, []byte(tc.text)) {
			t.Errorf("%v %+v %q: null", tc.t, tc.m, tc.text)
		}
	}
}

// The modes are read as Debezium reads them: trimmed, in any case, ""
// for the default; another value is an error.
func TestParseValueModes(t *testing.T) {
	for in, want := range map[string]TimePrecision{"": TimeAdaptive, " CONNECT ": TimeConnect, "adaptive_time_microseconds": TimeAdaptiveMicroseconds,
		"IsoString": TimeISOString, "microseconds": TimeMicroseconds, "nanoseconds": TimeNanoseconds} {
		if got, err := ParseTimePrecision(in); err != nil || got != want {
			t.Errorf("ParseTimePrecision(%q) = %q, %v", in, got, err)
		}
	}
	if got, err := ParseDecimalHandling("Double"); err != nil || got != DecimalDouble {
		t.Errorf("ParseDecimalHandling: %q, %v", got, err)
	}
	if got, err := ParseBinaryHandling("BASE64-URL-SAFE"); err != nil || got != BinaryBase64URLSafe {
		t.Errorf("ParseBinaryHandling: %q, %v", got, err)
	}
	if got, err := ParseIntervalHandling(" String "); err != nil || got != IntervalString {
		t.Errorf("ParseIntervalHandling: %q, %v", got, err)
	}
	for _, bad := range []func() error{
		func() error { _, err := ParseTimePrecision("millis"); return err },
		func() error { _, err := ParseDecimalHandling("exact"); return err },
		func() error { _, err := ParseBinaryHandling("base32"); return err },
		func() error { _, err := ParseIntervalHandling("iso"); return err },
	} {
		if bad() == nil {
			t.Error("an unknown mode accepted")
		}
	}
	if _, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{TimePrecision: "nanos"}}); err == nil {
		t.Error("an encoder with an unknown time precision")
	}
}

// A ledger's row under the value options, through the outbox router
// (header and envelope placements, JsonConverter with schemas) and as a
// change event: goldens of what Debezium writes, its parts each checked
// by the corpus.
func TestValueModesGolden(t *testing.T) {
	add := []AdditionalField{
		{Column: "amount", Placement: PlaceHeader}, {Column: "booked_at", Placement: PlaceHeader}, {Column: "digest", Placement: PlaceHeader},
		{Column: "amount", Placement: PlaceEnvelope}, {Column: "fee", Placement: PlaceEnvelope}, {Column: "value_date", Placement: PlaceEnvelope},
		{Column: "cutoff", Placement: PlaceEnvelope}, {Column: "booked_at", Placement: PlaceEnvelope}, {Column: "digest", Placement: PlaceEnvelope},
	}
	modes := map[string]DebeziumConfig{
		"connect-string-hex":      {TimePrecision: TimeConnect, DecimalHandling: DecimalString, BinaryHandling: BinaryHex},
		"micros-double-base64url": {TimePrecision: TimeAdaptiveMicroseconds, DecimalHandling: DecimalDouble, BinaryHandling: BinaryBase64URLSafe},
	}
	for name, cfg := range modes {
		for _, f := range []Format{DebeziumOutbox, Debezium} {
			cfg := cfg
			cfg.Now = func() time.Time { return time.Unix(1700000000, 0) }
			cfg.Version = "3.6.1.Final"
			var fields []AdditionalField
			if f == DebeziumOutbox {
				cfg.Key, cfg.Value, cfg.Header = ConvJSONSchemas, ConvJSONSchemas, ConvString
				fields = add
			}
			e, err := NewEncoder(EncoderConfig{Format: f, Debezium: cfg})
			if err != nil {
				t.Fatal(err)
			}
			b := mustBind(t, Columns{Additional: fields, PassThrough: true}, benchLedgerTable)
			r, err := b.Record(benchLedgerRow(), time.Unix(1700000000, 0))
			if err != nil {
				t.Fatal(err)
			}
			r.Origin = Origin{Database: "ledger", Schema: "public", Table: "outbox", LSN: 24064704, LastCommitLSN: 24064592, TxID: 584,
				CommitTime: time.UnixMicro(1700000000123456)}
			m, err := e.Encode(&r)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(m.Value) {
				t.Errorf("%s %s: value is not JSON: %s", name, f, m.Value)
			}
			checkGolden(t, filepath.Join("testdata", "debezium", "value-modes-"+name+"."+string(f)+".golden"), dumpMessage(m))
		}
	}
}

// route.tombstone.on.empty.payload takes an empty bytea for empty where
// Debezium's payload is a string ("" under base64 and hex), and never
// under bytes, where it tests a ByteBuffer's toString.
func TestTombstoneOfEmptyBytea(t *testing.T) {
	cols := []Column{{Name: "id", TypeOID: oidUUID, TypMod: -1}, {Name: "aggregatetype", TypeOID: oidText, TypMod: -1}, {Name: "aggregateid", TypeOID: oidText, TypMod: -1}, {Name: "payload", TypeOID: oidBytea, TypMod: -1}}
	b := mustBind(t, Columns{PassThrough: true}, cols)
	r, err := b.Record([][]byte{[]byte("406c07f3-26f0-4eea-a50c-109940064b8f"), []byte("Payment"), []byte("p-1"), []byte(`\x`)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		binary BinaryHandling
		value  Converter
		null   bool
	}{{BinaryBase64, ConvJSON, true}, {BinaryHex, ConvString, true}, {BinaryBytes, ConvByteArray, false}} {
		e, err := NewEncoder(EncoderConfig{Format: DebeziumOutbox, Debezium: DebeziumConfig{Value: tc.value, BinaryHandling: tc.binary, TombstoneOnEmpty: true}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		if (m.Value == nil) != tc.null {
			t.Errorf("%s: value %q, want a tombstone: %v", tc.binary, m.Value, tc.null)
		}
	}
}

// Under nanoseconds a timestamp an int64 of nanoseconds cannot hold has no
// value: null in a nullable column, as Debezium's converter gives up on
// it, and a poison row in a NOT NULL one, where Debezium's task fails.
func TestNanosecondsOutOfRange(t *testing.T) {
	ns, ts := valueModes{time: timeNanos}, pgType{oid: oidTimestamp, mod: -1}
	for _, text := range []string{"9999-12-31 23:59:59", "1677-09-21 00:12:44", "2262-04-11 23:47:16.854776"} {
		if v := ns.valueOf(ts, []byte(text), true); v != nil {
			t.Errorf("%s, nullable: %q, want NULL", text, v)
		}
		if v := ns.valueOf(ts, []byte(text), false); string(v) != text {
			t.Errorf("%s, NOT NULL: %q, want the value", text, v)
		}
		if _, reason := appendConnectValue(nil, ts, ns, []byte(text)); reason == "" {
			t.Errorf("%s: rendered", text)
		}
	}
	if v := ns.valueOf(ts, []byte("2262-04-11 23:47:16.854775"), true); v == nil {
		t.Error("the last representable timestamp is NULL")
	}
}
