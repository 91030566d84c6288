package relay

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/sink"
)

func TestDeliveryErrorNamesTopicAndEvent(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{kerr.UnknownTopicOrPartition, "topic orders does not exist"},
		{kerr.TopicAuthorizationFailed, "not authorized to write to topic orders"},
		{kerr.ClusterAuthorizationFailed, "IDEMPOTENT_WRITE"},
		{kerr.MessageTooLarge, "too large for topic orders"},
		{kgo.ErrRecordTimeout, "not acknowledged in time"},
		{errors.New("something else"), "something else"},
	}
	for _, tt := range tests {
		e := &DeliveryError{Topic: "orders", EventID: "ev-1", Err: fmt.Errorf("wrapped: %w", tt.err)}
		if msg := e.Error(); !strings.Contains(msg, "event ev-1 to topic orders") || !strings.Contains(msg, tt.want) {
			t.Errorf("%v: %q lacks the event, the topic or %q", tt.err, msg, tt.want)
		}
		if !errors.Is(e, tt.err) {
			t.Errorf("%v: errors.Is does not see the cause", tt.err)
		}
	}
}

func TestBrokerHealth(t *testing.T) {
	h := newBrokerHealth("kafka")
	if p, _ := h.problem(); p != "" || h.err() != nil {
		t.Fatalf("new: %q", p)
	}
	missing := &DeliveryError{Topic: "a", EventID: "1", Err: kerr.UnknownTopicOrPartition}
	if !h.failed(missing) || h.failed(&DeliveryError{Topic: "a", EventID: "2", Err: kerr.UnknownTopicOrPartition}) {
		t.Fatal("the first failure is a change, the same code again on the same topic is not")
	}
	if p, since := h.problem(); !strings.Contains(p, "topic a") || since.IsZero() {
		t.Fatalf("record problem: %q since %v", p, since)
	}
	if h.acked("b") {
		t.Fatal("an ack to another topic cleared the problem")
	}
	if !h.ping(errors.New("dial refused")) {
		t.Fatal("unreachable is a change")
	}
	if p, _ := h.problem(); !strings.HasPrefix(p, "unreachable") {
		t.Fatalf("unreachable comes first: %q", p)
	}
	if !h.ping(nil) || h.ping(nil) {
		t.Fatal("reachable again is one change")
	}
	if p, _ := h.problem(); !strings.Contains(p, "topic a") {
		t.Fatalf("a ping does not clear a record problem: %q", p)
	}
	before := h.changes.Load()
	if !h.acked("a") || h.acked("a") {
		t.Fatal("an ack to the topic clears it, once")
	}
	if p, _ := h.problem(); p != "" || h.changes.Load() != before+1 {
		t.Fatalf("after the ack: %q", p)
	}
}

// Partitions that cannot take writes are a problem until a check finds
// them writable again; a record that fails, or an unreachable broker,
// says more and comes first.
func TestBrokerHealthUnwritable(t *testing.T) {
	h := newBrokerHealth("kafka")
	refused := &sink.UnwritableError{Topic: "a", Partition: 1, Leader: 2, InSync: 1, Replicas: 3, MinInSync: 2}
	if !h.writes(refused) || h.writes(refused) {
		t.Fatal("the first check that finds the partition refusing is a change, the same again is not")
	}
	p, since := h.problem()
	if !strings.HasPrefix(p, "records wait: ") || !strings.Contains(p, "1 of 3 replicas in sync") ||
		!strings.Contains(p, "min.insync.replicas 2") || !strings.Contains(p, "NOT_ENOUGH_REPLICAS") || since.IsZero() {
		t.Fatalf("problem: %q since %v", p, since)
	}
	if !h.writes(&sink.UnwritableError{Topic: "a", Partition: 1, Leader: -1, Replicas: 3, Others: 2}) {
		t.Fatal("another state of the partitions is a change")
	}
	if p, _ := h.problem(); !strings.Contains(p, "partition 1 has no leader (and 2 other partitions)") {
		t.Fatalf("problem: %q", p)
	}
	h.failed(&DeliveryError{Topic: "a", EventID: "1", Err: kerr.TopicAuthorizationFailed})
	if p, _ := h.problem(); !strings.HasPrefix(p, "records fail") {
		t.Fatalf("a failed record comes first: %q", p)
	}
	h.acked("a")
	before := h.changes.Load()
	if !h.writes(nil) || h.writes(nil) {
		t.Fatal("writable again is one change")
	}
	if p, _ := h.problem(); p != "" || h.changes.Load() != before+1 {
		t.Fatalf("after the partitions took writes again: %q", p)
	}
}
