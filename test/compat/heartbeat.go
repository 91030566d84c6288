package compat

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/test/corpusrun"
)

// Heartbeat records (heartbeat.interval.ms above 0) come at a rate, not
// one per row: their topic is compared by shape, not count. Each side
// must have written at least one, and each side's first must be equal
// once its ts_ms is normalised.

// heartbeatTopic is the configuration's heartbeat topic, as the harness
// names it (topic.prefix is the run's id), when it writes heartbeats.
func heartbeatTopic(conf map[string]string, id string) (string, bool) {
	if ms, err := strconv.Atoi(strings.TrimSpace(conf["heartbeat.interval.ms"])); err != nil || ms <= 0 {
		return "", false
	}
	if t := strings.TrimSpace(conf["topic.heartbeat.name"]); t != "" {
		return t, true
	}
	p, ok := conf["topic.heartbeat.prefix"]
	if !ok {
		p = "__debezium-heartbeat"
	}
	return p + "." + id, true
}

// splitHeartbeats takes the heartbeat records (topic prefix+topic) out of
// recs.
func splitHeartbeats(recs []Record, topic string) (rest, beats []Record) {
	for _, rec := range recs {
		if rec.Topic == topic {
			beats = append(beats, rec)
		} else {
			rest = append(rest, rec)
		}
	}
	return rest, beats
}

var tsMillis = regexp.MustCompile(`ts_ms=-?\d+`)

// normalizeBeat sets a heartbeat value's ts_ms to null, in JSON with or
// without schemas, or in a Struct's text (StringConverter); the record's
// timestamp is each producer's.
func normalizeBeat(r Record) Record {
	r.Timestamp = 0
	for _, path := range []string{"ts_ms", "payload.ts_ms"} {
		r.Value = corpusrun.NullJSONPath(r.Value, strings.Split(path, "."))
	}
	if r.Value != nil {
		r.Value = Bytes(tsMillis.ReplaceAll(r.Value, []byte("ts_ms=0")))
	}
	return r
}

// compareHeartbeats compares each side's first heartbeat record.
func compareHeartbeats(topic string, want, got []Record, norms []Normalization) []string {
	if m := corpusrun.MissingHeartbeat(topic, "Debezium", len(want), len(got)); m != "" {
		return []string{m}
	}
	w, g := normalizeBeat(normalize(want[0], norms)), normalizeBeat(normalize(got[0], norms))
	var out []string
	for _, d := range compareRecord(w, g) {
		out = append(out, fmt.Sprintf("%s #0: %s", topic, d))
	}
	return out
}
