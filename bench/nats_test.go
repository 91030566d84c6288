package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/test/natstest"
)

// TestNATSTarget runs the NATS target against a real nats-server: after
// Prepare, messages published to the run's subject before and after
// Consume starts all reach the consumer, each once with its event id;
// stop deletes the run's stream, unless it holds dead letters.
func TestNATSTarget(t *testing.T) {
	s := natstest.Start(t)
	target := NATS{URL: s.URL}
	_, js := s.Connect()
	ctx := context.Background()
	prepare := func(topic, dlq string) {
		t.Helper()
		for range 2 { // a second Prepare of the same run finds the stream
			if err := target.Prepare(ctx, topic, dlq); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish := func(subject string, i int) string {
		t.Helper()
		id := testEventID(i)
		// A structured CloudEvent, or a binary one as the relay's NATS
		// sink writes them.
		msg := nats.NewMsg(subject)
		msg.Data = []byte(`{"specversion":"1.0","id":"` + id + `","source":"/bench","type":"t","data":{"id":"not-this"}}`)
		if i%2 == 1 {
			msg.Header.Set("ce-id", id)
			msg.Data = []byte(`{"id":"not-this"}`)
		}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
		return id
	}

	const topic, dlq = "outbox.event.bench_target", "bench_target.dlq"
	prepare(topic, dlq)
	checkConsume(t, target, topic, func(i int) string { return publish(topic, i) })
	if _, err := js.Stream(ctx, streamOf(topic)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream of %s after stop: %v, want it deleted", topic, err)
	}

	const failed, failedDLQ = "outbox.event.bench_failed", "bench_failed.dlq"
	prepare(failed, failedDLQ)
	publish(failedDLQ, 0)
	stop, err := target.Consume(failed, func(string, int32, time.Time) {})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if n := s.Count(streamOf(failed)); n != 1 {
		t.Errorf("stream of %s after stop: %d messages, want its dead letter kept", failed, n)
	}
}
