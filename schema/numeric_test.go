package schema

import "testing"

// numericMod is the atttypmod of numeric(p,s).
func numericMod(p, s int) int32 { return int32(p<<16|s) + 4 }

// The values Debezium 3.6.1 wrote for these columns' text, under
// JsonConverter and under SimpleHeaderConverter (test/compat's
// types-numeric-time and types-timestamps cases).
func TestNumericAndTimeValues(t *testing.T) {
	var (
		n10x2   = pgType{oid: oidNumeric, mod: numericMod(10, 2)}
		n12x9   = pgType{oid: oidNumeric, mod: numericMod(12, 9)}
		n5x0    = pgType{oid: oidNumeric, mod: numericMod(5, 0)}
		numeric = pgType{oid: oidNumeric, mod: -1}
		money   = pgType{oid: oidMoney, mod: -1}
		tm      = pgType{oid: oidTime, mod: -1}
		tm3     = pgType{oid: oidTime, mod: 3}
		tmtz    = pgType{oid: oidTimetz, mod: -1}
		intvl   = pgType{oid: oidIntvl, mod: -1}
	)
	for _, tc := range []struct {
		t            pgType
		text         string
		json, string string
	}{
		{n10x2, "12345678.91", `"SZYC0w=="`, "12345678.91"},
		{n10x2, "-0.05", `"+w=="`, "-0.05"},
		{n12x9, "0.000000012", `"DA=="`, "1.2E-8"},
		{n12x9, "1.000000000", `"O5rKAA=="`, "1.000000000"},
		{n12x9, "0.000000000", `"AA=="`, "0E-9"},
		{n5x0, "-128", `"gA=="`, "-128"},
		{n5x0, "99999", `"AYaf"`, "99999"},
		{numeric, "3.14159", `{"scale":5,"value":"BMsv"}`, `{"scale":5,"value":"BMsv"}`},
		{numeric, "1.500", `{"scale":1,"value":"Dw=="}`, `{"scale":1,"value":"Dw=="}`},
		{numeric, "100", `{"scale":0,"value":"ZA=="}`, `{"scale":0,"value":"ZA=="}`},
		{numeric, "0.000", `{"scale":0,"value":"AA=="}`, `{"scale":0,"value":"AA=="}`},
		{numeric, "NaN", `null`, "-"}, // "-": a null header, no text
		{money, "$12.34", `"BNI="`, "12.34"},
		{money, "-$0.01", `"/w=="`, "-0.01"},
		{money, "$1,234.50", `"AeI6"`, "1234.50"},
		{tm, "03:04:05.678912", `11045678912`, "11045678912"},
		{tm, "24:00:00", `86400000000`, "86400000000"},
		{tm3, "03:04:05.678", `11045678`, "11045678"},
		{tm3, "00:00:00", `0`, "0"},
		{tmtz, "03:04:05.678912+02", `"01:04:05.678912Z"`, "01:04:05.678912Z"},
		{tmtz, "23:59:59-08", `"07:59:59Z"`, "07:59:59Z"},
		{tmtz, "00:00:00.5+05:30", `"18:30:00.5Z"`, "18:30:00.5Z"},
		{intvl, "1 year 2 mons 3 days 04:05:06.7", `37091106700000`, "37091106700000"},
		{intvl, "-1 days", `-86400000000`, "-86400000000"},
		{intvl, "-00:00:01", `-1000000`, "-1000000"},
		{pgType{oid: oidTimestamp, mod: 3}, "2020-01-02 03:04:05.678", `1577934245678`, "1577934245678"},
		{pgType{oid: oidTimestamp, mod: 4}, "2020-01-02 03:04:05.6789", `1577934245678900`, "1577934245678900"},
		{pgType{oid: oidTimestamptz, mod: 0}, "2020-01-02 01:04:05+00", `"2020-01-02T01:04:05Z"`, "2020-01-02T01:04:05Z"},
		{pgType{oid: oidTimestamptz, mod: 3}, "2020-01-02 01:04:05.5+00", `"2020-01-02T01:04:05.500Z"`, "2020-01-02T01:04:05.500Z"},
		{pgType{oid: oidTimestamptz, mod: -1}, "2020-01-02 03:04:05.5+02", `"2020-01-02T01:04:05.500000Z"`, "2020-01-02T01:04:05.500000Z"},
	} {
		got, reason := appendConnectValue(nil, tc.t, valueModes{}, []byte(tc.text))
		if reason != "" || string(got) != tc.json {
			t.Errorf("%v %q as JSON: %s (%s), want %s", tc.t, tc.text, got, reason, tc.json)
		}
		if isNullValue(tc.t, valueModes{}, []byte(tc.text)) != (tc.string == "-") {
			t.Errorf("%v %q: null %v", tc.t, tc.text, !(tc.string == "-"))
		}
		if tc.string == "-" {
			continue
		}
		got, reason = appendStringValue(nil, tc.t, valueModes{}, []byte(tc.text))
		if reason != "" || string(got) != tc.string {
			t.Errorf("%v %q as a string: %s (%s), want %s", tc.t, tc.text, got, reason, tc.string)
		}
	}
	for _, bad := range []struct {
		t    pgType
		text string
	}{{n10x2, "1.234"}, {n10x2, "1e5"}, {tm, "25:00:00"}, {tm, "3:4"}, {tmtz, "03:04:05"}, {intvl, "P1D"}, {intvl, "1 fortnight"}} {
		if _, reason := appendConnectValue(nil, bad.t, valueModes{}, []byte(bad.text)); reason == "" {
			t.Errorf("%v %q accepted", bad.t, bad.text)
		}
	}
}

// The schemas Debezium 3.6.1 gave these columns under JsonConverter.
func TestNumericAndTimeSchemas(t *testing.T) {
	for _, tc := range []struct {
		t    pgType
		want string
	}{
		{pgType{oid: oidNumeric, mod: numericMod(10, 2)}, `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}}`},
		{pgType{oid: oidNumeric, mod: -1}, `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}],"optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,"doc":"Variable scaled decimal"}`},
		{pgType{oid: oidMoney, mod: -1}, `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}}`},
		{pgType{oid: oidTime, mod: -1}, `{"type":"int64","optional":true,"name":"io.debezium.time.MicroTime","version":1}`},
		{pgType{oid: oidTime, mod: 3}, `{"type":"int32","optional":true,"name":"io.debezium.time.Time","version":1}`},
		{pgType{oid: oidTimetz, mod: -1}, `{"type":"string","optional":true,"name":"io.debezium.time.ZonedTime","version":1}`},
		{pgType{oid: oidIntvl, mod: -1}, `{"type":"int64","optional":true,"name":"io.debezium.time.MicroDuration","version":1}`},
	} {
		ct, ok := connectTypeOf(tc.t, valueModes{})
		if got := string(appendConnectSchema(nil, ct, true, "")); !ok || got != tc.want {
			t.Errorf("%v: %s, want %s", tc.t, got, tc.want)
		}
	}
}
