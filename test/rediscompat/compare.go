package rediscompat

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/redistest"
)

// Streams are a side's entries by stream.
type Streams map[string][]redistest.Entry

// Count is how many entries the streams hold.
func (s Streams) Count() int {
	n := 0
	for _, es := range s {
		n += len(es)
	}
	return n
}

// Compare compares Debezium Server's streams with pgoutbox's: the same
// streams, and in each the same entries in order, field for field (names
// and values, in order), with the values of varies not compared. It
// returns one line per difference.
func Compare(dbz, pgo Streams, varies []string) []string {
	var diffs []string
	names := slices.Sorted(maps.Keys(dbz))
	if other := slices.Sorted(maps.Keys(pgo)); !slices.Equal(names, other) {
		diffs = append(diffs, fmt.Sprintf("streams: Debezium Server %v, pgoutbox %v", names, other))
	}
	for _, name := range names {
		d, p := dbz[name], pgo[name]
		if len(d) != len(p) {
			diffs = append(diffs, fmt.Sprintf("%s: Debezium Server wrote %d entries, pgoutbox %d", name, len(d), len(p)))
		}
		for i := range min(len(d), len(p)) {
			df, pf := comparable(d[i].Fields, varies), comparable(p[i].Fields, varies)
			if !slices.Equal(df, pf) {
				diffs = append(diffs, fmt.Sprintf("%s entry %d:\n  %s\npgoutbox\n  %s", name, i, render(df), render(pf)))
			}
		}
	}
	return diffs
}

// CompareHeartbeats takes the heartbeat stream out of both sides and
// compares each side's first entry there, ts_ms set aside.
func CompareHeartbeats(stream string, dbz, pgo Streams, varies []string) []string {
	d, p := dbz[stream], pgo[stream]
	delete(dbz, stream)
	delete(pgo, stream)
	if m := corpusrun.MissingHeartbeat(stream, "Debezium Server", len(d), len(p)); m != "" {
		return []string{m}
	}
	beat := func(fields []string) []string {
		out := comparable(fields, varies)
		for i := 1; i < len(out); i += 2 {
			out[i] = string(corpusrun.HeartbeatValue([]byte(out[i])))
		}
		return out
	}
	if df, pf := beat(d[0].Fields), beat(p[0].Fields); !slices.Equal(df, pf) {
		return []string{fmt.Sprintf("%s entry 0:\n  %s\npgoutbox\n  %s", stream, render(df), render(pf))}
	}
	return nil
}

// comparable is fields with the values of varies replaced by a mark.
func comparable(fields, varies []string) []string {
	out := slices.Clone(fields)
	for i := 0; i+1 < len(out); i += 2 {
		if slices.Contains(varies, out[i]) {
			out[i+1] = "(varies)"
		}
	}
	return out
}

func render(fields []string) string {
	var lines []string
	for i := 0; i+1 < len(fields); i += 2 {
		lines = append(lines, fields[i]+" = "+fields[i+1])
	}
	return strings.Join(lines, "\n  ")
}
