package rabbitmqcompat

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
)

// Compare compares Debezium Server's messages with pgoutbox's, in order:
// exchange, routing key, body, delivery mode, content-type, and the
// headers as a table of typed values (the values of varies not compared).
// pgoutbox's message-id, the event id, is its own: Debezium Server sets
// none, and pgoutbox sets none on the records of the exchanges withoutID,
// which have no event. It returns one line per difference.
func Compare(dbz, pgo []rabbitmqtest.Message, varies, withoutID []string) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server published %d messages, pgoutbox %d", len(dbz), len(pgo)))
	}
	for i := range min(len(dbz), len(pgo)) {
		withID := !slices.Contains(withoutID, dbz[i].Exchange)
		diffs = append(diffs, compareMessage(fmt.Sprint("message ", i), dbz[i], pgo[i], varies, withID)...)
	}
	return diffs
}

// compareMessage compares one message of each side; withID: pgoutbox's
// carries the event id as its message-id.
func compareMessage(what string, d, p rabbitmqtest.Message, varies []string, withID bool) []string {
	var diffs []string
	for _, f := range []struct{ name, dbz, pgo string }{
		{"exchange", d.Exchange, p.Exchange},
		{"routing key", d.RoutingKey, p.RoutingKey},
		{"body", string(d.Body), string(p.Body)},
		{"delivery mode", fmt.Sprint(d.DeliveryMode), fmt.Sprint(p.DeliveryMode)},
		{"content-type", d.ContentType, p.ContentType},
	} {
		if f.dbz != f.pgo {
			diffs = append(diffs, fmt.Sprintf("%s: %s\n  %s\npgoutbox\n  %s", what, f.name, f.dbz, f.pgo))
		}
	}
	if d.MessageID != "" {
		diffs = append(diffs, fmt.Sprintf("%s: Debezium Server set message-id %q", what, d.MessageID))
	}
	if withID != (p.MessageID != "") {
		diffs = append(diffs, fmt.Sprintf("%s: pgoutbox's message-id %q", what, p.MessageID))
	}
	if dh, ph := typed(d.Headers, varies), typed(p.Headers, varies); !maps.Equal(dh, ph) {
		diffs = append(diffs, fmt.Sprintf("%s: headers\n  %s\npgoutbox\n  %s", what, render(dh), render(ph)))
	}
	return diffs
}

// CompareHeartbeats compares each side's first heartbeat message as
// Compare compares messages, ts_ms set aside; a heartbeat has no event
// id, so pgoutbox sets no message-id on it.
func CompareHeartbeats(exchange string, dbz, pgo []rabbitmqtest.Message, varies []string) []string {
	if m := corpusrun.MissingHeartbeat(exchange, "Debezium Server", len(dbz), len(pgo)); m != "" {
		return []string{m}
	}
	d, p := dbz[0], pgo[0]
	d.Body, p.Body = corpusrun.HeartbeatValue(d.Body), corpusrun.HeartbeatValue(p.Body)
	return compareMessage("heartbeat", d, p, varies, false)
}

// SplitHeartbeats takes the messages to exchange out of msgs.
func SplitHeartbeats(msgs []rabbitmqtest.Message, exchange string) (rest, beats []rabbitmqtest.Message) {
	for _, m := range msgs {
		if exchange != "" && m.Exchange == exchange {
			beats = append(beats, m)
		} else {
			rest = append(rest, m)
		}
	}
	return rest, beats
}

// typed is each header's AMQP type (as amqp091-go decodes it) and value;
// the values of varies replaced by a mark.
func typed(h map[string]any, varies []string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if slices.Contains(varies, k) {
			out[k] = fmt.Sprintf("%T (varies)", v)
			continue
		}
		out[k] = fmt.Sprintf("%T %s", v, v)
	}
	return out
}

func render(h map[string]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		lines = append(lines, k+": "+h[k])
	}
	return strings.Join(lines, "\n  ")
}
