package main

import (
	"strings"
	"testing"
)

// The text status names the broker whose problem it shows, and counts the
// held aggregates in words that agree with the number.
func TestOpsStatusText(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name string
		o    opsStatus
		want []string
	}{
		{"one aggregate held", opsStatus{DeadLetters: n(3), HeldAggregates: n(1)}, []string{"dead letters 3 (1 aggregate held)"}},
		{"two held", opsStatus{DeadLetters: n(3), HeldAggregates: n(2)}, []string{"dead letters 3 (2 aggregates held)"}},
		{"none held", opsStatus{DeadLetters: n(0), HeldAggregates: n(0)}, []string{"dead letters 0\n"}},
		{"kafka by default", opsStatus{KafkaKnown: true, KafkaProblem: "unreachable: dial refused"}, []string{"kafka        unreachable: dial refused"}},
		{"the broker named", opsStatus{KafkaKnown: true, Broker: "redis", KafkaProblem: "records fail: OOM"}, []string{"redis        records fail: OOM"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			tc.o.print(&sb)
			for _, w := range tc.want {
				if !strings.Contains(sb.String(), w) {
					t.Errorf("%q lacks %q", sb.String(), w)
				}
			}
		})
	}
}
