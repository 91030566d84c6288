package natscompat

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/pgoutbox/pgoutbox/test/corpusrun"
)

// Message is a stored message, as the comparison reads it.
type Message struct {
	Subject string
	Data    []byte
	Header  nats.Header
}

// Compare compares Debezium Server's messages with pgoutbox's, in order:
// subject, data, and headers, which are a map on both sides (jnats and
// nats.go), less pgoutbox's own (headersOnlyPgoutbox, which it must
// carry) and with the values of varies not compared. It returns one line
// per difference.
func Compare(dbz, pgo []Message, varies []string) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server published %d messages, pgoutbox %d", len(dbz), len(pgo)))
	}
	for i := range min(len(dbz), len(pgo)) {
		d, p := dbz[i], pgo[i]
		if d.Subject != p.Subject {
			diffs = append(diffs, fmt.Sprintf("message %d: subject %q, pgoutbox %q", i, d.Subject, p.Subject))
		}
		if string(d.Data) != string(p.Data) {
			diffs = append(diffs, fmt.Sprintf("message %d: data\n  %s\npgoutbox\n  %s", i, d.Data, p.Data))
		}
		for _, h := range headersOnlyPgoutbox {
			if d.Header.Get(h) != "" {
				diffs = append(diffs, fmt.Sprintf("message %d: Debezium Server set %s", i, h))
			}
		}
		if p.Header.Get("Nats-Msg-Id") == "" {
			diffs = append(diffs, fmt.Sprintf("message %d: pgoutbox set no Nats-Msg-Id", i))
		}
		dh, ph := comparable(d.Header, varies), comparable(p.Header, varies)
		if !maps.EqualFunc(dh, ph, slices.Equal) {
			diffs = append(diffs, fmt.Sprintf("message %d: headers\n  %s\npgoutbox\n  %s", i, render(dh), render(ph)))
		}
	}
	return diffs
}

// CompareHeartbeats compares each side's first heartbeat message: its
// subject, its data with ts_ms set aside, and its headers. A heartbeat has
// no event id, so pgoutbox sets no Nats-Msg-Id on it.
func CompareHeartbeats(subject string, dbz, pgo []Message, varies []string) []string {
	if m := corpusrun.MissingHeartbeat(subject, "Debezium Server", len(dbz), len(pgo)); m != "" {
		return []string{m}
	}
	d, p := dbz[0], pgo[0]
	var diffs []string
	if dd, pd := corpusrun.HeartbeatValue(d.Data), corpusrun.HeartbeatValue(p.Data); string(dd) != string(pd) {
		diffs = append(diffs, fmt.Sprintf("heartbeat: data\n  %s\npgoutbox\n  %s", dd, pd))
	}
	if dh, ph := comparable(d.Header, varies), comparable(p.Header, varies); !maps.EqualFunc(dh, ph, slices.Equal) {
		diffs = append(diffs, fmt.Sprintf("heartbeat: headers\n  %s\npgoutbox\n  %s", render(dh), render(ph)))
	}
	return diffs
}

// SplitHeartbeats takes the messages of subject out of msgs.
func SplitHeartbeats(msgs []Message, subject string) (rest, beats []Message) {
	for _, m := range msgs {
		if subject != "" && m.Subject == subject {
			beats = append(beats, m)
		} else {
			rest = append(rest, m)
		}
	}
	return rest, beats
}

// comparable is h less pgoutbox's own headers, with the values of varies
// replaced by a mark.
func comparable(h nats.Header, varies []string) map[string][]string {
	out := map[string][]string{}
	for k, v := range h {
		switch {
		case slices.Contains(headersOnlyPgoutbox, k):
		case slices.Contains(varies, k):
			out[k] = []string{"(varies)"}
		default:
			out[k] = v
		}
	}
	return out
}

func render(h map[string][]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		lines = append(lines, k+": "+strings.Join(h[k], ", "))
	}
	return strings.Join(lines, "\n  ")
}
