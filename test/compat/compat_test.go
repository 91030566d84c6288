package compat

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/pgoutbox/pgoutbox/test/connecttest"
)

var update = flag.Bool("update", false, "rewrite the option table of docs/debezium.md from the cases")

func readRecorded(t *testing.T, name string) []Record {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "recorded", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := ReadRecords(f)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func clone(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		r.Headers = append([]Header(nil), r.Headers...)
		out[i] = r
	}
	return out
}

// Compare finds each way pgoutbox's records can differ from Debezium's,
// starting from a stream Debezium 3.6.1 wrote and the one pgoutbox writes
// for it, which differ only by timestamps a normalisation names.
func TestCompare(t *testing.T) {
	dbz, pgo := readRecorded(t, "dbz-p6.jsonl"), readRecorded(t, "pgo-p6.jsonl")
	ts := []Normalization{"timestamp"}
	for _, tc := range []struct {
		name  string
		norms []Normalization
		edit  func([]Record) []Record
		want  []string // substrings of the differences, in order; none for equal
	}{
		{"equal under the timestamp normalisation", ts, nil, nil},
		{"timestamps differ without it", nil, nil, []string{"outbox.event.p6[0] #1: timestamp 1795623775077, pgoutbox 1795623775102", "#2: timestamp"}},
		{"a column timestamp is still compared", ts, func(r []Record) []Record { r[0].Timestamp++; return r }, nil},
		{"value", ts, func(r []Record) []Record { r[2].Value = Bytes(`"y"`); return r }, []string{`#2: value "\"x\"", pgoutbox "\"y\""`}},
		{"a tombstone is not an empty value", ts, func(r []Record) []Record { r[0].Value = Bytes{}; return r }, []string{`#0: value null, pgoutbox ""`}},
		{"a null key is not an empty one", ts, func(r []Record) []Record { r[1].Key = Bytes{}; return r }, []string{`#1: key "k2"`}},
		{"a missing header", ts, func(r []Record) []Record { r[1].Headers = nil; return r }, []string{"#1: headers [id="}},
		{"header order", ts, func(r []Record) []Record {
			r[0].Headers = append(r[0].Headers, Header{"traceparent", Bytes("x")})
			r[0].Headers[0], r[0].Headers[1] = r[0].Headers[1], r[0].Headers[0]
			return r
		}, []string{`#0: headers [id="d512f94a-2343-4d0f-a2d5-88eea5e52c11"], pgoutbox [traceparent="x", id=`}},
		{"order within a partition", ts, func(r []Record) []Record { r[0], r[1] = r[1], r[0]; return r }, []string{"#0: key", "#0: headers", "#1: key", "#1: headers"}},
		{"a record too many", ts, func(r []Record) []Record { return append(r, r[2]) }, []string{"outbox.event.p6[0]: 3 records from Debezium, 4 from pgoutbox"}},
		{"another partition", ts, func(r []Record) []Record { r[2].Partition = 1; return r }, []string{"outbox.event.p6[0]: 3 records from Debezium, 2 from pgoutbox", "outbox.event.p6[1]: 0 records from Debezium, 1 from pgoutbox"}},
		{"another topic", ts, func(r []Record) []Record { r[2].Topic = "pgo.outbox.event.P6"; return r }, []string{"outbox.event.P6[0]: 0 records", "outbox.event.p6[0]: 3 records from Debezium, 2"}},
		{"a header dropped by name", []Normalization{"timestamp", "header:traceparent"}, func(r []Record) []Record {
			r[0].Headers = append([]Header{{"traceparent", Bytes("x")}}, r[0].Headers...)
			return r
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clone(pgo)
			if tc.edit != nil {
				got = tc.edit(got)
			}
			diffs, err := Compare(dbz, got, "dbz.", "pgo.", tc.norms)
			if err != nil {
				t.Fatal(err)
			}
			if len(diffs) != len(tc.want) {
				t.Fatalf("%d differences, want %d: %v", len(diffs), len(tc.want), diffs)
			}
			for i, w := range tc.want {
				if !strings.Contains(diffs[i].String(), w) {
					t.Errorf("difference %d %q, want it to contain %q", i, diffs[i], w)
				}
			}
		})
	}
	if _, err := Compare(dbz, pgo, "dbz.", "dbz.", ts); err == nil {
		t.Error("a topic without its prefix was compared")
	}
	if _, err := Compare(dbz, pgo, "dbz.", "pgo.", []Normalization{"nothing"}); err == nil {
		t.Error("an unknown normalisation was accepted")
	}
}

func TestNormalizations(t *testing.T) {
	rec := func(key Bytes, part int32, value string, hs ...Header) Record {
		return Record{Topic: "t", Partition: part, Key: key, Value: Bytes(value), Headers: hs}
	}
	tp := func(span string) Header {
		return Header{"traceparent", Bytes("00-0af7651916cd43dd8448eb211c80319c-" + span + "-01")}
	}
	for _, tc := range []struct {
		name      string
		norms     []Normalization
		want, got []Record
		equal     bool
	}{
		{"a null key on another partition", []Normalization{"null-key-partition"},
			[]Record{rec(nil, 0, "a"), rec(Bytes("k"), 1, "b")}, []Record{rec(nil, 2, "a"), rec(Bytes("k"), 1, "b")}, true},
		{"a null key on another partition, not normalised", nil,
			[]Record{rec(nil, 0, "a")}, []Record{rec(nil, 2, "a")}, false},
		{"a keyed record on another partition stays a difference", []Normalization{"null-key-partition"},
			[]Record{rec(Bytes("k"), 0, "a")}, []Record{rec(Bytes("k"), 2, "a")}, false},
		{"another parent span of the same trace", []Normalization{"traceparent-span"},
			[]Record{rec(nil, 0, "a", tp("b7ad6b7169203331"))}, []Record{rec(nil, 0, "a", tp("00f067aa0ba902b7"))}, true},
		{"another trace", []Normalization{"traceparent-span"},
			[]Record{rec(nil, 0, "a", tp("b7ad6b7169203331"))},
			[]Record{rec(nil, 0, "a", Header{"traceparent", Bytes("00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")})}, false},
		{"a JSON field set aside", []Normalization{"json:payload.source.ts_ms"},
			[]Record{rec(nil, 0, `{"payload":{"source":{"ts_ms":1,"db":"x"}}}`)}, []Record{rec(nil, 0, `{"payload":{"source":{"ts_ms":2,"db":"x"}}}`)}, true},
		{"a difference beside it stays", []Normalization{"json:payload.source.ts_ms"},
			[]Record{rec(nil, 0, `{"payload":{"source":{"ts_ms":1,"db":"\u00e9"}}}`)}, []Record{rec(nil, 0, `{"payload":{"source":{"ts_ms":2,"db":"é"}}}`)}, false},
		{"headers by prefix", []Normalization{"header-prefix:__debezium.context."},
			[]Record{rec(nil, 0, "a", Header{"__debezium.context.taskId", Bytes("0")}, Header{"id", Bytes("1")})},
			[]Record{rec(nil, 0, "a", Header{"id", Bytes("1")})}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diffs, err := Compare(tc.want, tc.got, "", "", tc.norms)
			if err != nil {
				t.Fatal(err)
			}
			if (len(diffs) == 0) != tc.equal {
				t.Fatalf("differences %v, want equal %v", diffs, tc.equal)
			}
		})
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	recs := []Record{{Topic: "t", Key: nil, Value: Bytes{}, Headers: []Header{{"h", Bytes{0x00, 0xff, 'A'}}, {"n", nil}}, Timestamp: 5}}
	var buf bytes.Buffer
	if err := WriteRecords(&buf, recs); err != nil {
		t.Fatal(err)
	}
	if want := `{"topic":"t","partition":0,"key":null,"value":"","headers":[{"key":"h","value":{"base64":"AP9B"}},{"key":"n","value":null}],"timestamp":5}` + "\n"; buf.String() != want {
		t.Fatalf("written %s", buf.String())
	}
	back, err := ReadRecords(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diffs, _ := Compare(recs, back, "", "", nil); len(diffs) != 0 || back[0].Value == nil || back[0].Key != nil {
		t.Fatalf("read back %+v: %v", back, diffs)
	}
}

func TestCases(t *testing.T) {
	cases, err := LoadCases(filepath.Join("testdata", "cases"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 5 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		fails := slices.ContainsFunc(c.Differences, func(d Deliberate) bool { return d.DebeziumFails != "" || d.DebeziumRefuses != "" })
		if c.About == "" || c.Records == 0 && !fails {
			t.Errorf("%s: no about, or no records where Debezium does not fail", c.Name)
		}
	}
	for _, bad := range []Case{
		{Table: "x", Rows: []string{"x"}},
		{Table: "x", Connect: map[string]string{"slot.name": "mine"}, Rows: []string{"x"}},
		{Table: "x", Server: "debezium.source.database.hostname=db\n", Rows: []string{"x"}},
		{Table: "x", Server: "slot.name=x\n", Rows: []string{"x"}},
		{Table: "x", Connect: map[string]string{"a": "b"}, Rows: []string{"x"}, Normalize: []Normalization{"everything"}},
		{Connect: map[string]string{"a": "b"}, Rows: []string{"x"}},
		{Table: "x", Connect: map[string]string{"snapshot.mode": "initial_only"}, Existing: []string{"x"}, Rows: []string{"x"}},
		{Table: "x", Connect: map[string]string{"snapshot.mode": "initial_only"}, Existing: []string{"x"}, Rows: []string{"x", "y"}, Restart: new(int(1))},
		{Table: "x", Connect: map[string]string{"snapshot.mode": "configuration_based", "snapshot.mode.configuration.based.snapshot.data": "true"},
			Existing: []string{"x"}, Rows: []string{"x"}},
		{Table: "x", Connect: map[string]string{"snapshot.mode": "always"}, Existing: []string{"x"}, Rows: []string{"x"}, Restart: new(int(2))},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// The option table of docs/debezium.md is the one the cases make: a case
// added, or a difference listed, shows there (go test -run
// TestOptionTable -update rewrites it).
func TestOptionTable(t *testing.T) {
	cases, err := LoadCases(filepath.Join("testdata", "cases"))
	if err != nil {
		t.Fatal(err)
	}
	want := OptionTable(cases, "Debezium "+connecttest.DebeziumVersion+" (Kafka Connect standalone)")
	path := filepath.Join("..", "..", "docs", "debezium.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(doc, []byte(TableBegin)), bytes.Index(doc, []byte(TableEnd))
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the markers of the option table", path)
	}
	got := string(doc[begin : end+len(TableEnd)])
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s's option table is not the cases': run go test ./test/compat -run TestOptionTable -update", path)
	}
	out := append(append(append([]byte{}, doc[:begin]...), want...), doc[end+len(TableEnd):]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Each option's row says what the corpus found: equal where its cases
// list no difference, the difference and its reason where one does.
func TestOptionTableRows(t *testing.T) {
	cases := []Case{
		{Name: "a", Connect: map[string]string{"transforms": "o", "transforms.o.type": "io.debezium.transforms.outbox.EventRouter",
			"transforms.o.route.by.field": "kind", "value.converter": "org.apache.kafka.connect.json.JsonConverter"}},
		{Name: "b", Server: "debezium.transforms=o\ndebezium.transforms.o.type=io.debezium.transforms.outbox.EventRouter\ndebezium.source.plugin.name=pgoutput\ndebezium.format.value=json\n",
			Covers:      []string{"route.by.field"},
			Differences: []Deliberate{{Option: "route.by.field", Reason: "a  NULL\n value", DeadLetters: 1}}},
		{Name: "c", Connect: map[string]string{"transforms": "o", "transforms.o.type": "io.debezium.transforms.outbox.EventRouter",
			"transforms.o.table.op.invalid.behavior": "fatal"},
			Differences: []Deliberate{{Option: "table.op.invalid.behavior", Reason: "both stop", DebeziumFails: "x", PgoutboxStops: "y"}}},
	}
	got := OptionTable(cases, "Debezium X")
	for _, want := range []string{
		"| `route.by.field` | (default), `kind` | a, b | tested equal in 1 of 2 cases; deliberate difference in b (below) |",
		"| `value.converter` | `JsonConverter` | a | tested equal |",
		"| `plugin.name` | `pgoutput` | b | tested equal |",
		"| `debezium.format.value` | `json` | b | tested equal |",
		"- `route.by.field` (b): pgoutbox dead-letters a row. a NULL value",
		"| `transforms.<name>.type` | `EventRouter` | a, b, c | tested equal |",
		"| `table.op.invalid.behavior` | `fatal` | c | tested equal; both stop in c (below) |",
		"- `table.op.invalid.behavior` (c): both stop, after the same records. both stop",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "transforms.o.route.by.field") || strings.Contains(got, "debezium.source.") {
		t.Errorf("an option under its prefix:\n%s", got)
	}
}

// Reading a side's records asks again while Kafka answers with an error
// that asking again clears (a new topic's leader being elected), alone or
// in kadm's shard errors, and not otherwise.
func TestRetriable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{kerr.LeaderNotAvailable, true},
		{&kadm.ShardErrors{Name: "ListOffsets", Errs: []kadm.ShardError{{Err: kerr.LeaderNotAvailable}}}, true},
		{&kadm.ShardErrors{Name: "ListOffsets", Errs: []kadm.ShardError{{Err: kerr.LeaderNotAvailable}, {Err: kerr.TopicAuthorizationFailed}}}, false},
		{kerr.TopicAuthorizationFailed, false},
		{errors.New("other"), false},
	} {
		if got := retriable(tt.err); got != tt.want {
			t.Errorf("retriable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
