package redisstream

import (
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The headers of an extended entry come in the order Debezium Server's
// HashMap of them iterates: testdata/hashmap-order.txt is what Java 17
// printed for each set (testdata/HashMapOrder.java).
func TestJavaHashMapOrder(t *testing.T) {
	b, err := os.ReadFile("testdata/hashmap-order.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		in, want, _ := strings.Cut(line, "\t")
		var hs []kgo.RecordHeader
		for _, k := range strings.Fields(in) {
			hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(k)})
		}
		var got []string
		for _, h := range javaHashMapOrder(hs) {
			got = append(got, h.Key)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s:\n got %s\nwant %s", in, strings.Join(got, " "), want)
		}
	}
}

func TestEntryOf(t *testing.T) {
	rec := func(key, value *string, headers ...string) *kgo.Record {
		r := &kgo.Record{Topic: "outbox.event.order"}
		if key != nil {
			r.Key = []byte(*key)
		}
		if value != nil {
			r.Value = []byte(*value)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
		}
		return r
	}
	s := func(v string) *string { return &v }
	withNullHeader := rec(s("o-1"), s("{}"), "id", "e1")
	withNullHeader.Headers = append(withNullHeader.Headers, kgo.RecordHeader{Key: "gone"})
	for _, tc := range []struct {
		name   string
		r      *kgo.Record
		format string
		want   []string
	}{
		{"compact", rec(s("o-1"), s(`{"n":1}`), "id", "e1"), FormatCompact, []string{"o-1", `{"n":1}`}},
		{"compact tombstone", rec(s("o-1"), nil), FormatCompact, []string{"o-1", "nv"}},
		{"compact no key", rec(nil, s("{}")), FormatCompact, []string{"nk", "{}"}},
		{"compact empty key is a key", rec(s(""), s("{}")), FormatCompact, []string{"", "{}"}},
		{"extended", rec(s("o-1"), s(`{"n":1}`), "id", "e1", "eventType", "Placed"), FormatExtended,
			[]string{"key", "o-1", "value", `{"n":1}`, "ID", "e1", "EVENTTYPE", "Placed"}},
		{"extended tombstone, no key", rec(nil, nil, "id", "e1"), FormatExtended, []string{"key", "nk", "value", "nv", "ID", "e1"}},
		{"extended header twice keeps the last", rec(s("k"), s("v"), "id", "e1", "id", "e2"), FormatExtended,
			[]string{"key", "k", "value", "v", "ID", "e2"}},
		{"extended names equal in upper case share a field", rec(s("k"), s("v"), "Aa", "1", "AA", "2"), FormatExtended,
			[]string{"key", "k", "value", "v", "AA", "2"}},
		{"extended header named key", rec(s("k"), s("v"), "key", "h"), FormatExtended, []string{"key", "k", "value", "v", "KEY", "h"}},
		{"extended null header dropped", withNullHeader, FormatExtended, []string{"key", "o-1", "value", "{}", "ID", "e1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := entryOf(tc.r, tc.format, "nk", "nv")
			if e.stream != "outbox.event.order" || strings.Join(e.fields, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %s %q, want %q", e.stream, e.fields, tc.want)
			}
		})
	}
}
