package corpusrun

import "regexp"

// Heartbeat records (heartbeat.interval.ms above 0) come at a rate, not
// one per row: the sink corpora compare each side's first one, with the
// time it carries set aside.

var (
	tsJSON   = regexp.MustCompile(`"ts_ms":-?\d+`)
	tsStruct = regexp.MustCompile(`ts_ms=-?\d+`)
)

// HeartbeatValue is a heartbeat record's value with its ts_ms set to 0, in
// JSON with or without schemas, or in a Struct's text (StringConverter).
func HeartbeatValue(v []byte) []byte {
	v = tsJSON.ReplaceAll(v, []byte(`"ts_ms":0`))
	return tsStruct.ReplaceAll(v, []byte("ts_ms=0"))
}

// MissingHeartbeat says which side wrote no heartbeat record to dest, ""
// when both did: other is the side pgoutbox is compared with, of n
// heartbeats to pgoutbox's pgo.
func MissingHeartbeat(dest, other string, n, pgo int) string {
	switch {
	case n == 0 && pgo == 0:
		return dest + ": no heartbeat from either side"
	case n == 0:
		return dest + ": no heartbeat from " + other
	case pgo == 0:
		return dest + ": no heartbeat from pgoutbox"
	}
	return ""
}
