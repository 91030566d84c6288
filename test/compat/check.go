package compat

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pgoutbox/pgoutbox/test/corpusrun"
)

// A normalisation names what differs between Debezium and pgoutbox by
// nature, not by mistake; a case lists the ones it needs:
//
//	timestamp            the record timestamp: Debezium's processing time
//	                     (the change event's ts_ms) and pgoutbox's produce
//	                     time, when no timestamp column sets it
//	header:NAME          drop every header NAME from both sides (for
//	                     Debezium's __debezium.context.* headers, which
//	                     extended.headers.enabled adds)
//	header-prefix:P      drop every header whose key starts with P
//	null-key-partition   the partition of a record with a null key: the
//	                     producers spread those differently
//	traceparent-span     compare a traceparent header's version, trace id
//	                     and flags, not its parent span id: Debezium's
//	                     tracing opens a span of its own
//	json:PATH            in a JSON value, the field at PATH (dot-separated,
//	                     for example payload.source.ts_ms) is set to null
//	                     on both sides before comparing
//	avro:PATH            an Avro value is decoded by its registered schema
//	                     to JSON, where the field at PATH is set to null
//	header-json:KEY:PATH in the JSON value of each header KEY, the field at
//	                     PATH is set to null
type Normalization string

// validNormalization tells whether n is one of the names above.
func validNormalization(n Normalization) bool {
	s := string(n)
	switch {
	case s == "timestamp", s == "null-key-partition", s == "traceparent-span":
		return true
	case strings.HasPrefix(s, "header:") && len(s) > len("header:"),
		strings.HasPrefix(s, "header-prefix:") && len(s) > len("header-prefix:"),
		strings.HasPrefix(s, "json:") && len(s) > len("json:"),
		strings.HasPrefix(s, "avro:") && len(s) > len("avro:"):
		return true
	case strings.HasPrefix(s, "header-json:"):
		k, p, ok := strings.Cut(s[len("header-json:"):], ":")
		return ok && k != "" && p != ""
	}
	return false
}

// Difference is one way two streams differ.
type Difference struct {
	// Where names the record: topic (after its prefix), partition and
	// index in that partition, or the topic alone for a count.
	Where string
	What  string
}

func (d Difference) String() string { return d.Where + ": " + d.What }

// Compare checks the records Debezium wrote (want, topics starting with
// wantPrefix) against pgoutbox's (got, gotPrefix): the same topics after
// their prefixes, in each the same partitions holding the same records in
// the same order, each with the same key, value, headers (all of them, in
// order) and timestamp, after the normalisations. Records of a null key
// are compared in their topic's order instead of their partition's under
// null-key-partition. An empty result means equal.
func Compare(want, got []Record, wantPrefix, gotPrefix string, norms []Normalization) ([]Difference, error) {
	for _, n := range norms {
		if !validNormalization(n) {
			return nil, fmt.Errorf("compat: unknown normalisation %q", n)
		}
	}
	w, err := streams(want, wantPrefix, norms)
	if err != nil {
		return nil, fmt.Errorf("compat: Debezium's records: %w", err)
	}
	g, err := streams(got, gotPrefix, norms)
	if err != nil {
		return nil, fmt.Errorf("compat: pgoutbox's records: %w", err)
	}
	var diffs []Difference
	for _, k := range unionKeys(w, g) {
		ws, gs := w[k], g[k]
		if len(ws) != len(gs) {
			diffs = append(diffs, Difference{k, fmt.Sprintf("%d records from Debezium, %d from pgoutbox", len(ws), len(gs))})
		}
		for i := 0; i < len(ws) && i < len(gs); i++ {
			where := fmt.Sprintf("%s #%d", k, i)
			for _, d := range compareRecord(ws[i], gs[i]) {
				diffs = append(diffs, Difference{where, d})
			}
		}
	}
	return diffs, nil
}

// streams groups records by topic (prefix removed) and partition, in
// order, normalised. The key of a null key's stream under
// null-key-partition is its topic with partition "*".
func streams(recs []Record, prefix string, norms []Normalization) (map[string][]Record, error) {
	out := map[string][]Record{}
	nullKeyAny := hasNorm(norms, "null-key-partition")
	for _, r := range recs {
		topic, ok := strings.CutPrefix(r.Topic, prefix)
		if !ok {
			return nil, fmt.Errorf("topic %q lacks the prefix %q", r.Topic, prefix)
		}
		r.Topic = topic
		r = normalize(r, norms)
		k := fmt.Sprintf("%s[%d]", topic, r.Partition)
		if nullKeyAny && r.Key == nil {
			k = topic + "[*]"
			r.Partition = -1
		}
		out[k] = append(out[k], r)
	}
	return out, nil
}

func hasNorm(norms []Normalization, n Normalization) bool {
	for _, m := range norms {
		if m == n {
			return true
		}
	}
	return false
}

func normalize(r Record, norms []Normalization) Record {
	for _, n := range norms {
		s := string(n)
		switch {
		case s == "timestamp":
			r.Timestamp = 0
		case s == "traceparent-span":
			for i, h := range r.Headers {
				if h.Key == "traceparent" {
					r.Headers[i].Value = maskSpan(h.Value)
				}
			}
		case strings.HasPrefix(s, "header:"):
			r.Headers = dropHeaders(r.Headers, func(k string) bool { return k == s[len("header:"):] })
		case strings.HasPrefix(s, "header-prefix:"):
			r.Headers = dropHeaders(r.Headers, func(k string) bool { return strings.HasPrefix(k, s[len("header-prefix:"):]) })
		case strings.HasPrefix(s, "json:"):
			r.Value = corpusrun.NullJSONPath(r.Value, strings.Split(s[len("json:"):], "."))
		case strings.HasPrefix(s, "avro:"):
			r.Value = nullAvroPath(r, strings.Split(s[len("avro:"):], "."))
		case strings.HasPrefix(s, "header-json:"):
			k, p, _ := strings.Cut(s[len("header-json:"):], ":")
			hs := slices.Clone(r.Headers)
			for i, h := range hs {
				if h.Key == k {
					hs[i].Value = corpusrun.NullJSONPath(h.Value, strings.Split(p, "."))
				}
			}
			r.Headers = hs
		}
	}
	return r
}

func dropHeaders(hs []Header, drop func(string) bool) []Header {
	var out []Header
	for _, h := range hs {
		if !drop(h.Key) {
			out = append(out, h)
		}
	}
	return out
}

// maskSpan replaces the parent id of a W3C traceparent
// (version-traceid-parentid-flags) with x's; anything else is left as is.
func maskSpan(v Bytes) Bytes {
	parts := strings.Split(string(v), "-")
	if len(parts) < 4 || len(parts[2]) != 16 {
		return v
	}
	parts[2] = strings.Repeat("x", 16)
	return Bytes(strings.Join(parts, "-"))
}

func compareRecord(w, g Record) []string {
	var d []string
	if w.Partition != g.Partition {
		d = append(d, fmt.Sprintf("partition %d, pgoutbox %d", w.Partition, g.Partition))
	}
	if !sameBytes(w.Key, g.Key) {
		d = append(d, fmt.Sprintf("key %s, pgoutbox %s", show(w.Key), show(g.Key)))
	}
	if !sameBytes(w.Value, g.Value) {
		d = append(d, fmt.Sprintf("value %s, pgoutbox %s", show(w.Value), show(g.Value)))
	}
	if w.Timestamp != g.Timestamp {
		d = append(d, fmt.Sprintf("timestamp %d, pgoutbox %d", w.Timestamp, g.Timestamp))
	}
	if hw, hg := showHeaders(w.Headers), showHeaders(g.Headers); hw != hg {
		d = append(d, fmt.Sprintf("headers %s, pgoutbox %s", hw, hg))
	}
	return d
}

// sameBytes compares byte strings, null apart from empty.
func sameBytes(a, b Bytes) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func show(b Bytes) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprintf("%q", []byte(b))
}

func showHeaders(hs []Header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Key + "=" + show(h.Value)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func unionKeys(a, b map[string][]Record) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
