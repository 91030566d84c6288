package awsbatch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
)

func TestCheckID(t *testing.T) {
	for s, ok := range map[string]bool{"o-1": true, "a/b:c": true, strings.Repeat("x", 128): true,
		"": false, strings.Repeat("x", 129): false, "a b": false, "café": false, "a\tb": false} {
		if got := CheckID(s) == ""; got != ok {
			t.Errorf("CheckID(%q) = %q", s, CheckID(s))
		}
	}
}

// The deduplication id is the event id, or the value's hash when the
// event has none that SQS and SNS take.
func TestDedupID(t *testing.T) {
	rec := func(id string) *kgo.Record {
		return &kgo.Record{Value: []byte("{}"), Context: outbox.WithEventID(context.Background(), id)}
	}
	if got := DedupID(rec("dlq:e-1")); got != "dlq:e-1" {
		t.Errorf("DedupID = %q, want the event id", got)
	}
	for _, id := range []string{"", strings.Repeat("x", 129), "id with spaces"} {
		if got := DedupID(rec(id)); len(got) != 64 || got != DedupID(rec("")) {
			t.Errorf("DedupID of event id %q = %q, want the value's SHA-256", id, got)
		}
	}
}

// Failures are read by place; those the service blamed on the message
// are refused when they come again, to the same target only.
func TestRefusals(t *testing.T) {
	var rs Refusals
	a, b := &kgo.Record{Key: []byte("k"), Value: []byte("a")}, &kgo.Record{Key: []byte("k"), Value: []byte("b")}
	if err := rs.Check("q", a); err != nil {
		t.Fatalf("Check before any refusal: %v", err)
	}
	failed, last, err := rs.Failed(EntryError{Service: "sqs", Target: "the queue", Attempts: 3}, "q", []*kgo.Record{a, b},
		[]Failure{{ID: "1", Code: "Throttled"}, {ID: "0", Code: "InvalidParameterValue", Message: "bad", SenderFault: true}})
	if err != nil || len(failed) != 2 || failed[0] != 1 || failed[1] != 0 || last.Code != "InvalidParameterValue" || last.Attempts != 3 {
		t.Fatalf("Failed = %v, %+v, %v", failed, last, err)
	}
	var re *RefusedError
	if err := rs.Check("q", a); !errors.As(err, &re) || !re.Poison() || !strings.Contains(err.Error(), "the queue did not take the message after 3 attempts: InvalidParameterValue: bad") {
		t.Errorf("Check of the refused message: %v", err)
	}
	if err := rs.Check("q", b); err != nil {
		t.Errorf("Check of a message not blamed: %v", err)
	}
	if err := rs.Check("other", a); err != nil {
		t.Errorf("Check of the message sent elsewhere: %v", err)
	}
	if _, _, err := rs.Failed(EntryError{}, "q", []*kgo.Record{a}, []Failure{{ID: "1"}}); err == nil {
		t.Error("an answer for an entry not sent was taken")
	}
}
