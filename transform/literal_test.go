package transform

import (
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
)

// Values.parseString's reading of InsertHeader literals, each written as
// JsonConverter with schemas writes the header (the transform-insertheader
// corpus cases check the first ones against Kafka Connect itself).
func TestParseLiteral(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `{"schema":{"type":"string","optional":false},"payload":""}`},
		{"orders-service", `{"schema":{"type":"string","optional":false},"payload":"orders-service"}`},
		{"42", `{"schema":{"type":"int8","optional":false},"payload":42}`},
		{"-129", `{"schema":{"type":"int16","optional":false},"payload":-129}`},
		{"40000", `{"schema":{"type":"int32","optional":false},"payload":40000}`},
		{"9007199254740993", `{"schema":{"type":"int64","optional":false},"payload":9007199254740993}`},
		{"1.0", `{"schema":{"type":"int8","optional":false},"payload":1}`},
		{"1.5e1", `{"schema":{"type":"int8","optional":false},"payload":15}`},
		{"-2.5", `{"schema":{"type":"float","optional":false},"payload":-2.5}`},
		{"0.1", `{"schema":{"type":"float","optional":false},"payload":0.1}`},
		{"1e3", `{"schema":{"type":"int16","optional":false},"payload":1000}`},
		{"1e40", `{"schema":{"type":"double","optional":false},"payload":1.0E40}`},
		{"123456789012345678901234567890", `{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"0"}},"payload":"AY7pD/bDc+DuTj8K0g=="}`},
		{"-12345678901234567890", `{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"0"}},"payload":"/1SrVnMU4PUu"}`},
		{"true", `{"schema":{"type":"boolean","optional":false},"payload":true}`},
		{"True", `{"schema":{"type":"string","optional":false},"payload":"True"}`},
		{"true,", `{"schema":{"type":"string","optional":false},"payload":"true,"}`},
		{"null", ``},
		{"12:30", `{"schema":{"type":"int8","optional":false},"payload":12}`},
		{"42 apples", `{"schema":{"type":"string","optional":false},"payload":"42 apples"}`},
		{"+7", `{"schema":{"type":"int8","optional":false},"payload":7}`},
		{"-", `{"schema":{"type":"string","optional":false},"payload":"-"}`},
		{"a:b", `{"schema":{"type":"string","optional":false},"payload":"a:b"}`},
		{`orders, "east"`, `{"schema":{"type":"string","optional":false},"payload":"orders, \"east\""}`},
	} {
		s, v, err := parseLiteral(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		got, err := encodePart(schema.ConvJSONSchemas, true, s, v)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{"[1,2]", "{a:1}", "2024-01-02", "12:30:45.1234Z", "2024-01-02T12:30:45.1234Z"} {
		if _, _, err := parseLiteral(in); err == nil {
			t.Errorf("%q accepted: Kafka Connect may read it as a structure or a time, which pgoutbox does not write", in)
		}
	}
}

// SimpleHeaderConverter's text of Connect values (Values.convertToString).
func TestValuesString(t *testing.T) {
	st, v := envelope(`{"a":"\"q\""}`, `say "hi"`)
	v32 := int32(1)
	for _, tc := range []struct {
		s    *Schema
		v    any
		want string
	}{
		{&Schema{Type: String}, `a "b" \c`, `a "b" \c`},
		{&Schema{Type: Float32}, 0.1, "0.1"},
		{&Schema{Type: Float64}, 1e21, "1.0E21"},
		{&Schema{Type: Bytes}, []byte{0, 255}, "AP8="},
		{&Schema{Type: Bytes, Name: decimalName, Params: []Param{{"scale", "2"}}}, []byte{0xfb, 0x2e}, "-12.34"},
		{&Schema{Type: Array, Items: &Schema{Type: String}}, []any{"a", nil, `b"`}, `["a",null,"b\""]`},
		{&Schema{Type: Map, Keys: &Schema{Type: String}, Values: &Schema{Type: Int32}}, []MapEntry{{"k", int64(1)}}, `{"k":1}`},
		{st, v, `{"payload":"{\"a\":\"\\\"q\\\"\"}","eventType":"say \"hi\"","tenant":"none"}`},
		{&Schema{Type: Int64, Name: timestampName, Version: &v32}, time.Date(2021, 3, 4, 5, 6, 7, 89e6, time.UTC).UnixMilli(), "2021-03-04T05:06:07.089Z"},
		{&Schema{Type: Int32, Name: dateName, Version: &v32}, int64(18690), "2021-03-04"},
		{&Schema{Type: Int32, Name: timeName, Version: &v32}, int64(3723004), "01:02:03.004Z"},
	} {
		got, err := encodePart(schema.ConvString, true, tc.s, tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("%v: got %s (%v), want %s", tc.v, got, err, tc.want)
		}
	}
}

// StringConverter writes a key's or a value's text only where it is data.
func TestJavaText(t *testing.T) {
	st, v := envelope("x", "y")
	for _, tc := range []struct {
		s    *Schema
		v    any
		want string // "" for refused
	}{
		{&Schema{Type: String}, "k", "k"},
		{&Schema{Type: Int64}, int64(-3), "-3"},
		{&Schema{Type: Boolean}, true, "true"},
		{&Schema{Type: Float64}, 100.0, "100.0"},
		{&Schema{Type: Bytes, Name: decimalName, Params: []Param{{"scale", "9"}}}, []byte{1}, "1E-9"},
		{&Schema{Type: Bytes}, []byte{1}, ""},
		{st, v, "Struct{payload=x,eventType=y}"}, // Struct.toString (corpus case unwrap-chain)
		{st, &Struct{Schema: st, Values: []any{nil, "y"}}, "Struct{eventType=y}"},
		{&Schema{Type: StructT, Fields: []Field{{"b", &Schema{Type: Bytes}}}}, &Struct{Values: []any{[]byte{1}}}, ""},
	} {
		if st, ok := tc.v.(*Struct); ok && st.Schema == nil {
			st.Schema = tc.s
		}
		got, err := encodePart(schema.ConvString, false, tc.s, tc.v)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%v: written as %q", tc.v, got)
		case tc.want != "" && (err != nil || string(got) != tc.want):
			t.Errorf("%v: got %q (%v), want %q", tc.v, got, err, tc.want)
		}
	}
}

// TimestampRouter's patterns are SimpleDateFormat's in an English locale.
func TestDateFormat(t *testing.T) {
	ts := time.Date(2026, 1, 5, 13, 4, 5, 7e6, time.UTC)
	for _, tc := range []struct{ pattern, want string }{
		{"yyyyMMdd", "20260105"},
		{"yy-M-d H:m:s.S", "26-1-5 13:4:5.7"},
		{"yyyyy.MMM.MMMM", "02026.Jan.January"},
		{"hh 'o''clock' a, E EEEE", "01 o'clock PM, Mon Monday"},
		{"kk KK D u SSSS", "13 01 5 1 0007"},
		{"'week' ''", "week '"},
	} {
		layout, err := parseDateFormat(tc.pattern)
		if err != nil {
			t.Errorf("%q: %v", tc.pattern, err)
			continue
		}
		if got := formatDate(layout, ts); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.pattern, got, tc.want)
		}
	}
	for _, bad := range []string{"yyyy-b", "'open", "YYYY", "ww"} {
		if _, err := parseDateFormat(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseLiteral: any literal is read or refused, never a panic, and
// what is read can be written.
func FuzzParseLiteral(f *testing.F) {
	for _, s := range []string{"", "42", "-2.5e-3", "12:30", "[1,2]", `"a\"b"`, "true", "1e999999", "+.5", "\\:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sch, v, err := parseLiteral(s)
		if err != nil {
			return
		}
		if _, err := encodePart(schema.ConvJSONSchemas, true, sch, v); err != nil {
			t.Errorf("%q: read as %v, not written: %v", s, v, err)
		}
		if sch != nil && sch.Type == String && strings.TrimSpace(s) != "" && v != s && s[0] != '\\' {
			if str, _ := v.(string); !strings.Contains(s, str) {
				t.Errorf("%q read as the string %q", s, str)
			}
		}
	})
}

// FuzzParse: any configuration is a chain or an error naming keys, never
// a panic.
func FuzzParse(f *testing.F) {
	f.Add("outbox,r", "r", "regex", "(.*)", "p", "pattern", "a.*")
	f.Add("outbox,h", "h", "value.literal", "12:30", "p", "name", "")
	f.Add(",outbox,,", "", "fields", "a,,b", "q", "type", "x")
	f.Fuzz(func(t *testing.T, list, alias, opt, val, pred, popt, pval string) {
		for _, typ := range []string{"RegexRouter", "InsertHeader", "HeaderFrom$Value", "InsertField$Value", "ReplaceField$Value",
			"SetSchemaMetadata$Value", "TimestampRouter", "DropHeaders", "Filter"} {
			props := map[string]string{"transforms": list, "transforms.outbox.type": RouterClass, "predicates": pred}
			props["transforms."+alias+".type"] = kt + typ
			props["transforms."+alias+"."+opt] = val
			props["transforms."+alias+".predicate"] = pred
			props["predicates."+pred+".type"] = "TopicNameMatches"
			props["predicates."+pred+"."+popt] = pval
			ch, _, err := Parse(Config{Props: props})
			if err == nil && ch != nil {
				r := testRecord()
				_, _ = ch.Apply(&r)
			}
		}
	})
}

// FuzzDecodeEnvelope: any bytes are read or refused, never a panic; what
// is read is written back as it was read.
func FuzzDecodeEnvelope(f *testing.F) {
	r := testRecord()
	msg, _ := r.Message(Converters{Key: schema.ConvJSONSchemas, Value: schema.ConvJSONSchemas, Header: schema.ConvJSONSchemas})
	f.Add(msg.Value)
	f.Add(msg.Key)
	f.Add([]byte(`{"schema":{"type":"map","keys":{"type":"int8","optional":false},"values":{"type":"bytes","optional":true},"optional":false},"payload":[[1,"AA=="],[2,null]]}`))
	f.Add([]byte(`{"schema":{"type":"array","items":{"type":"double","optional":false},"optional":false},"payload":["NaN",1.5E300,"\ud83c\udf89"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, v, err := decodeEnvelope(data, &schemaCache{})
		if err != nil {
			return
		}
		if _, err := appendJSONEnvelope(nil, s, v); err != nil && s != nil && !s.Optional {
			// A required null is JsonConverter's error too.
			return
		}
	})
}
