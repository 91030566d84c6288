package mototest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// LogMessages shows a queue's messages in a -v run, with what Compare
// leaves out.
func LogMessages(t testing.TB, queue string, msgs []Message) {
	t.Helper()
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "\n  %d group=%q dedup=%q seq=%q attrs=%q body=%q", i, m.MessageGroupId, m.MessageDeduplicationId, m.SequenceNumber, m.MessageAttributes, m.Body)
	}
	t.Logf("%s: %d messages%s", queue, len(msgs), b.String())
}

// Bodies are the messages' bodies, in order.
func Bodies(msgs []Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	return out
}

// Compare compares Debezium Server's messages with pgoutbox's: body,
// message attributes and the message group, in the order received when
// ordered (a FIFO queue), else as multisets sorted by body (a standard
// queue keeps no order). It returns the differences.
func Compare(dbz, pgo []Message, ordered bool) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server sent %d messages, pgoutbox %d", len(dbz), len(pgo)))
	}
	if !ordered {
		byBody := func(a, b Message) int { return strings.Compare(a.Body, b.Body) }
		dbz, pgo = slices.SortedStableFunc(slices.Values(dbz), byBody), slices.SortedStableFunc(slices.Values(pgo), byBody)
	}
	for i := range min(len(dbz), len(pgo)) {
		d, p := dbz[i], pgo[i]
		if d.Body != p.Body {
			diffs = append(diffs, fmt.Sprintf("message %d: body\n  %q\npgoutbox\n  %q", i, d.Body, p.Body))
		}
		if d.MessageGroupId != p.MessageGroupId {
			diffs = append(diffs, fmt.Sprintf("message %d: group %q, pgoutbox's %q", i, d.MessageGroupId, p.MessageGroupId))
		}
		if !maps.Equal(d.MessageAttributes, p.MessageAttributes) {
			diffs = append(diffs, fmt.Sprintf("message %d: attributes %q, pgoutbox's %q", i, d.MessageAttributes, p.MessageAttributes))
		}
	}
	return diffs
}
