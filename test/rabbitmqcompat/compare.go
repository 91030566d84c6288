package rabbitmqcompat

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
)

// Compare compares Debezium Server's messages with pgoutbox's, in order:
// exchange, routing key, body, delivery mode, content-type, and the
// headers as a table of typed values (the values of varies not compared).
// pgoutbox's message-id, the event id, is its own: Debezium Server sets
// none. It returns one line per difference.
func Compare(dbz, pgo []rabbitmqtest.Message, varies []string) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server published %d messages, pgoutbox %d", len(dbz), len(pgo)))
	}
	for i := range min(len(dbz), len(pgo)) {
		d, p := dbz[i], pgo[i]
		for _, f := range []struct{ name, dbz, pgo string }{
			{"exchange", d.Exchange, p.Exchange},
			{"routing key", d.RoutingKey, p.RoutingKey},
			{"body", string(d.Body), string(p.Body)},
			{"delivery mode", fmt.Sprint(d.DeliveryMode), fmt.Sprint(p.DeliveryMode)},
			{"content-type", d.ContentType, p.ContentType},
		} {
			if f.dbz != f.pgo {
				diffs = append(diffs, fmt.Sprintf("message %d: %s\n  %s\npgoutbox\n  %s", i, f.name, f.dbz, f.pgo))
			}
		}
		if d.MessageID != "" {
			diffs = append(diffs, fmt.Sprintf("message %d: Debezium Server set message-id %q", i, d.MessageID))
		}
		if p.MessageID == "" {
			diffs = append(diffs, fmt.Sprintf("message %d: pgoutbox set no message-id", i))
		}
		if dh, ph := typed(d.Headers, varies), typed(p.Headers, varies); !maps.Equal(dh, ph) {
			diffs = append(diffs, fmt.Sprintf("message %d: headers\n  %s\npgoutbox\n  %s", i, render(dh), render(ph)))
		}
	}
	return diffs
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
