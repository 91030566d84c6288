package schema

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const testSource = "urn:pgoutbox:orders"

func mustEncoder(t testing.TB, f Format, source string) *Encoder {
	t.Helper()
	e, err := NewEncoder(EncoderConfig{Format: f, Source: source})
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	return e
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": CloudEvents, "cloudevents": CloudEvents, "cloudevents-binary": CloudEventsBinary,
		"debezium-outbox": DebeziumOutbox, "debezium": Debezium} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"CloudEvents", "json", "Debezium", "debezium-cloudevents", " cloudevents"} {
		if _, err := ParseFormat(in); err == nil {
			t.Errorf("ParseFormat(%q) succeeded", in)
		}
	}
}

func TestEncoderConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg EncoderConfig
		ok  bool
	}{
		{EncoderConfig{Source: "urn:pgoutbox:orders"}, true},
		{EncoderConfig{Format: CloudEventsBinary, Source: "https://example.com/orders?x=1#frag"}, true},
		{EncoderConfig{Source: "/orders/outbox"}, true},
		{EncoderConfig{Source: "urn:x:a~b!$&'()*+,;=%20@"}, true},
		{EncoderConfig{Source: `quote"`}, false},
		{EncoderConfig{Source: `back\slash`}, false},
		{EncoderConfig{Source: "ü"}, false},
		{EncoderConfig{}, false},
		{EncoderConfig{Format: "avro", Source: "urn:x"}, false},
		{EncoderConfig{Source: "has space"}, false},
		{EncoderConfig{Source: "line\nbreak"}, false},
		{EncoderConfig{Source: "http://[::1"}, false},
		{EncoderConfig{Source: "%zz"}, false},
		{EncoderConfig{Source: "bad\xffutf8"}, false},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.cfg, err, tc.ok)
		}
		if _, nerr := NewEncoder(tc.cfg); (nerr == nil) != tc.ok {
			t.Errorf("NewEncoder(%+v) = %v, want ok=%v", tc.cfg, nerr, tc.ok)
		}
	}
}

var goldenRecords = []struct {
	name   string
	source string
	rec    Record
}{
	{"basic", testSource, Record{
		ID: "0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10", AggregateType: "Order", AggregateID: "42", Type: "OrderCreated",
		Payload: []byte(`{"orderId":42,"customer":{"id":"c-7","email":"ada@example.com"},"lines":[{"sku":"A-1","qty":2}],"total":"19.90"}`),
		Time:    time.Date(2026, 11, 21, 18, 37, 59, 123456000, time.UTC),
	}},
	{"extensions", testSource, Record{
		ID: "1001", AggregateType: "Transfer", AggregateID: "tx-9", Type: "com.example.transfer.completed",
		Payload: []byte(`[1,"two",{"three":3.0}]`),
		Headers: []byte(`{ "traceparent" : "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
			"retries": 3, "min": -2147483648, "replay": false, "audited": true, "tenant": "acme" }`),
		Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("+05:30", 5*3600+1800)),
	}},
	{"escaping", "https://user@example.com:8443/a/b;c?x=1&y=%2F#frag", Record{
		ID: `id "quoted" \ back`, AggregateType: "Kunde/Ü", AggregateID: "ä<&>\u2028€😀", Type: "tab\u00a0type",
		Payload: []byte(`"a JSON string with \"escapes\" and \u00e9"`),
		Headers: []byte(`{"note":"caf\u00e9 \"x\" \\ \/ \ud83d\ude00","empty":""}`),
		Time:    time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	}},
	{"null-data", "/orders", Record{
		ID: "7", AggregateType: "Order", AggregateID: "7", Type: "OrderDeleted",
		Payload: []byte(`null`), Headers: []byte(`{}`),
		Time: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
	}},
}

// renderMessage is the golden files' text form of a message.
func renderMessage(m Message) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "key: %s\n", m.Key)
	for _, h := range m.Headers {
		fmt.Fprintf(&b, "header %s: %s\n", h.Key, h.Value)
	}
	fmt.Fprintf(&b, "value:\n%s\n", m.Value)
	return b.Bytes()
}

func TestEncodeGolden(t *testing.T) {
	for _, format := range []Format{CloudEvents, CloudEventsBinary} {
		for _, g := range goldenRecords {
			t.Run(string(format)+"/"+g.name, func(t *testing.T) {
				e := mustEncoder(t, format, g.source)
				rec := g.rec
				m, err := e.Encode(&rec)
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				checkMessage(t, format, g.source, &rec, m)

				got := renderMessage(m)
				path := filepath.Join("testdata", g.name+"."+string(format)+".golden")
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./schema -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("message differs from %s (go test ./schema -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
				}
			})
		}
	}
}

// TestEncodeShape pins what the golden files show, so that an -update cannot
// silently accept a wrong envelope.
func TestEncodeShape(t *testing.T) {
	rec := goldenRecords[0].rec
	m, err := mustEncoder(t, CloudEvents, testSource).Encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"specversion":"1.0","id":"0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10","source":"urn:pgoutbox:orders",` +
		`"type":"OrderCreated","time":"2026-11-21T18:37:59.123456Z","datacontenttype":"application/json",` +
		`"partitionkey":"42","aggregatetype":"Order","data":` + string(rec.Payload) + `}`
	if string(m.Value) != want {
		t.Errorf("structured value:\n got %s\nwant %s", m.Value, want)
	}

	m, err = mustEncoder(t, CloudEventsBinary, testSource).Encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, h := range m.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	wantHeaders := "ce_specversion=1.0 ce_id=0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10 ce_source=urn:pgoutbox:orders " +
		"ce_type=OrderCreated ce_time=2026-11-21T18:37:59.123456Z ce_partitionkey=42 ce_aggregatetype=Order " +
		"content-type=application/json"
	if got := strings.Join(hs, " "); got != wantHeaders {
		t.Errorf("binary headers:\n got %s\nwant %s", got, wantHeaders)
	}
	if &m.Value[0] != &rec.Payload[0] {
		t.Error("binary value is a copy of the payload; documented as the payload itself")
	}
}

func TestAppendTime(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 11, 21, 18, 37, 59, 123456000, time.UTC), "2026-11-21T18:37:59.123456Z"},
		{time.Date(2026, 11, 21, 18, 37, 59, 0, time.UTC), "2026-11-21T18:37:59.000000Z"},
		{time.Date(2026, 11, 21, 18, 37, 59, 1, time.UTC), "2026-11-21T18:37:59.000000001Z"},
		{time.Date(2026, 11, 22, 0, 7, 59, 500000000, time.FixedZone("", 5*3600+1800)), "2026-11-21T18:37:59.500000Z"},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "0001-01-01T00:00:00.000000Z"},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), "9999-12-31T23:59:59.999999999Z"},
	} {
		got := string(appendTime(nil, tc.t))
		if got != tc.want {
			t.Errorf("appendTime(%v) = %s, want %s", tc.t, got, tc.want)
		}
		if p, err := time.Parse(time.RFC3339Nano, got); err != nil || !p.Equal(tc.t) {
			t.Errorf("time.Parse(%s) = %v, %v; want %v", got, p, err, tc.t)
		}
	}
}

func TestEncodeRowErrors(t *testing.T) {
	base := goldenRecords[0].rec
	for _, tc := range []struct {
		name    string
		mod     func(*Record)
		column  string
		reason  string // a substring of the reason
		headers string // sets Headers when not ""
	}{
		{"empty id", func(r *Record) { r.ID = "" }, "id", "empty id", ""},
		{"control char in id", func(r *Record) { r.ID = "a\nb" }, "id", "control character", ""},
		{"blank id", func(r *Record) { r.ID = " \u00a0 " }, "id", "blank id", ""},
		{"blank type", func(r *Record) { r.Type = "\u3000" }, "type", "blank type", ""},
		{"DEL in type", func(r *Record) { r.Type = "a\x7fb" }, "type", "control character", ""},
		{"C1 control in aggregatetype", func(r *Record) { r.AggregateType = "a\u0085b" }, "aggregatetype", "control character", ""},
		{"noncharacter in aggregateid", func(r *Record) { r.AggregateID = "a\ufffeb" }, "aggregateid", "noncharacter", ""},
		{"noncharacter U+FDD0", func(r *Record) { r.AggregateID = "\ufdd0" }, "aggregateid", "noncharacter", ""},
		{"invalid UTF-8", func(r *Record) { r.AggregateID = "a\xffb" }, "aggregateid", "invalid UTF-8", ""},
		{"encoded surrogate", func(r *Record) { r.ID = "\xed\xa0\x80" }, "id", "invalid UTF-8", ""},
		{"year 0", func(r *Record) { r.Time = time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC) }, "time", "out of range", ""},
		{"year 10000", func(r *Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "time", "out of range", ""},
		{"zero time", func(r *Record) { r.Time = time.Time{}.Add(-time.Second) }, "time", "out of range", ""},

		{"upper-case name", nil, "headers", "lower-case", `{"traceParent":"x"}`},
		{"dash in name", nil, "headers", "lower-case", `{"trace-parent":"x"}`},
		{"underscore in name", nil, "headers", "lower-case", `{"data_base64":"x"}`},
		{"empty name", nil, "headers", "1 to 20", `{"":"x"}`},
		{"21 characters", nil, "headers", "1 to 20", `{"abcdefghijklmnopqrstu":"x"}`},
		{"reserved id", nil, "headers", "collides", `{"id":"x"}`},
		{"reserved time", nil, "headers", "collides", `{"time":"x"}`},
		{"reserved data", nil, "headers", "collides", `{"data":"x"}`},
		{"reserved subject", nil, "headers", "collides", `{"subject":"x"}`},
		{"reserved dataschema", nil, "headers", "collides", `{"dataschema":"x"}`},
		{"reserved partitionkey", nil, "headers", "collides", `{"partitionkey":"x"}`},
		{"reserved aggregatetype", nil, "headers", "collides", `{"aggregatetype":"x"}`},
		{"escaped reserved name", nil, "headers", "collides", `{"\u0069d":"x"}`},
		{"duplicate", nil, "headers", "appears twice", `{"a":"x","b":1,"a":"y"}`},
		{"object value", nil, "headers", "objects and arrays", `{"a":{"b":1}}`},
		{"array value", nil, "headers", "objects and arrays", `{"a":[1]}`},
		{"null value", nil, "headers", "null value", `{"a":null}`},
		{"fraction", nil, "headers", "not an integer", `{"a":1.5}`},
		{"exponent", nil, "headers", "not an integer", `{"a":1e3}`},
		{"integer.0", nil, "headers", "not an integer", `{"a":3.0}`},
		{"int32 overflow", nil, "headers", "32-bit", `{"a":2147483648}`},
		{"int32 underflow", nil, "headers", "32-bit", `{"a":-2147483649}`},
		{"huge integer", nil, "headers", "32-bit", `{"a":123456789012345678901234567890}`},
		{"escaped newline", nil, "headers", "control character", `{"a":"x\ny"}`},
		{"escaped NUL", nil, "headers", "control character", `{"a":"\u0000"}`},
		{"escaped noncharacter", nil, "headers", "noncharacter", `{"a":"\uffff"}`},
		{"unpaired high surrogate", nil, "headers", "unpaired surrogate", `{"a":"\ud800"}`},
		{"unpaired low surrogate", nil, "headers", "unpaired surrogate", `{"a":"\udead x"}`},
		{"high then non-low", nil, "headers", "unpaired surrogate", `{"a":"\ud800\u0041"}`},
		{"raw invalid UTF-8", nil, "headers", "invalid UTF-8", "{\"a\":\"\xff\"}"},
		{"not an object", nil, "headers", "not a JSON object", `[1]`},
		{"malformed", nil, "headers", "not a valid JSON object", `{"a":"x"`},
		{"trailing data", nil, "headers", "not a valid JSON object", `{"a":"x"} {}`},
		{"raw control in string", nil, "headers", "not a valid JSON object", "{\"a\":\"\t\"}"},
		{"bad escape", nil, "headers", "not a valid JSON object", `{"a":"\x"}`},
		{"bad literal", nil, "headers", "not a valid JSON object", `{"a":tru}`},
		{"leading zero", nil, "headers", "not a valid JSON object", `{"a":01}`},
		{"trailing comma", nil, "headers", "not a valid JSON object", `{"a":1,}`},
		{"missing colon", nil, "headers", "not a valid JSON object", `{"a" 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, format := range []Format{CloudEvents, CloudEventsBinary} {
				rec := base
				if tc.mod != nil {
					tc.mod(&rec)
				}
				if tc.headers != "" {
					rec.Headers = []byte(tc.headers)
				}
				_, err := mustEncoder(t, format, testSource).Encode(&rec)
				var re *RowError
				if !errors.As(err, &re) {
					t.Fatalf("%s: Encode error = %v, want a *RowError", format, err)
				}
				if re.Column != tc.column || !strings.Contains(re.Reason, tc.reason) {
					t.Fatalf("%s: RowError = {%q, %q}, want column %q and a reason containing %q", format, re.Column, re.Reason, tc.column, tc.reason)
				}
			}
		})
	}
}

// TestEncodeExtensionValues covers the accepted extension values through the
// oracle, both modes.
func TestEncodeExtensionValues(t *testing.T) {
	for _, h := range []string{
		`{}`, ` { } `, `{"a":""}`, `{"x1":0}`, `{"neg":-0}`, `{"max":2147483647,"min":-2147483648}`,
		`{"abcdefghijklmnopqrst":true}`, `{"b":false}`, `{"s":"\u00e9\ud83d\ude00\/"}`, `{"s":"<&>"}`,
		"{\n\t\"traceparent\" : \"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\" ,\r\n\"tracestate\":\"k=v\"}",
	} {
		for _, format := range []Format{CloudEvents, CloudEventsBinary} {
			rec := goldenRecords[0].rec
			rec.Headers = []byte(h)
			m, err := mustEncoder(t, format, testSource).Encode(&rec)
			if err != nil {
				t.Fatalf("%s %s: %v", format, h, err)
			}
			checkMessage(t, format, testSource, &rec, m)
		}
	}
}

// TestMessageIndependence checks that messages from one encoder share no
// mutable state: encoding a second record leaves the first message intact.
func TestMessageIndependence(t *testing.T) {
	for _, format := range []Format{CloudEvents, CloudEventsBinary} {
		e := mustEncoder(t, format, testSource)
		r1, r2 := goldenRecords[0].rec, goldenRecords[1].rec
		m1, err := e.Encode(&r1)
		if err != nil {
			t.Fatal(err)
		}
		before := renderMessage(m1)
		if _, err := e.Encode(&r2); err != nil {
			t.Fatal(err)
		}
		m1.Key = append(m1.Key, "garbage"...) // capacity-limited: must not write into Value
		if after := renderMessage(Message{Key: m1.Key[:len(r1.AggregateID)], Value: m1.Value, Headers: m1.Headers}); !bytes.Equal(before, after) {
			t.Errorf("%s: message changed:\n%s\nvs\n%s", format, before, after)
		}
	}
}

// TestCivilFromDays checks the date arithmetic against package time over
// every day that RFC 3339 can write, and daysSinceEpoch as its inverse.
func TestCivilFromDays(t *testing.T) {
	for days := minRFC3339Unix / 86400; days <= maxRFC3339Unix/86400; days++ {
		y, m, d := civilFromDays(days)
		wy, wm, wd := time.Unix(days*86400, 0).UTC().Date()
		if y != wy || m != int(wm) || d != wd {
			t.Fatalf("civilFromDays(%d) = %d-%d-%d, want %d-%d-%d", days, y, m, d, wy, wm, wd)
		}
		if back := daysSinceEpoch(y, m, d); back != days {
			t.Fatalf("daysSinceEpoch(%d-%d-%d) = %d, want %d", y, m, d, back, days)
		}
	}
}
