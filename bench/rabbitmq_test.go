package bench

import (
	"context"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
)

// TestRabbitMQTarget runs the RabbitMQ target against a real
// rabbitmq-server: after Prepare, messages published as the relays publish
// them (mandatory, to the exchange named like the topic, in each form the
// bench meets) before and after Consume starts all reach
// the consumer, each once with its event id; the dead-letter queue
// exists; stop deletes the run's queue and exchange and keeps the
// dead-letter queue.
func TestRabbitMQTarget(t *testing.T) {
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{})
	target := RabbitMQ{URL: s.URL}
	const topic, dlq = "outbox.event.bench_target", "bench_target.dlq"
	// A second Prepare of the same run finds what the first declared.
	for range 2 {
		if err := target.Prepare(context.Background(), topic, dlq); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Count(dlq); n != 0 {
		t.Fatalf("dead-letter queue %s: %d messages (-1: missing)", dlq, n)
	}

	ch := s.Channel()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	checkConsume(t, target, topic, func(i int) string {
		id := testEventID(i)
		// The empty routing key as at Debezium Server's defaults, or
		// another, which the fanout exchange routes alike.
		key := ""
		if i%2 == 1 {
			key = fmt.Sprintf("agg-%d", i)
		}
		dc, err := ch.PublishWithDeferredConfirm(topic, key, true, false, messageForms(id)[i%3])
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatalf("message %d not confirmed", i)
		}
		return id
	})

	if n := s.Count(topic); n != -1 {
		t.Errorf("queue %s still there after stop, %d messages", topic, n)
	}
	probe := s.Channel()
	if err := probe.ExchangeDeclarePassive(topic, amqp.ExchangeFanout, true, false, false, false, nil); err == nil {
		t.Errorf("exchange %s still there after stop", topic)
	}
	if n := s.Count(dlq); n != 0 {
		t.Errorf("dead-letter queue %s after stop: %d messages (-1: missing)", dlq, n)
	}
}

// messageForms are an event as each relay the bench measures publishes
// it: pgoutbox's structured CloudEvent, its binary CloudEvent (the AMQP
// binding's cloudEvents:id header), and Debezium Server's outbox router
// (the id header, JSON in its schema envelope, a body of the payload that
// holds an "id" of its own).
func messageForms(id string) []amqp.Publishing {
	return []amqp.Publishing{
		{ContentType: "application/cloudevents+json", MessageId: id,
			Body: []byte(`{"specversion":"1.0","id":"` + id + `","source":"/bench","type":"t","data":{"id":"not-this"}}`)},
		{Headers: amqp.Table{"cloudEvents:id": id, "cloudEvents:specversion": "1.0"}, Body: []byte(`{"id":"not-this"}`)},
		{Headers: amqp.Table{"id": `{"schema":{"type":"string","optional":false},"payload":"` + id + `"}`,
			"__debezium.context.taskId": `{"schema":{"type":"string","optional":false},"payload":"0"}`},
			DeliveryMode: 2, Body: []byte(`{"schema":{"type":"string","optional":true},"payload":"{\"id\":\"not-this\"}"}`)},
	}
}
