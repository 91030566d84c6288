package bench

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RabbitMQ is a RabbitMQ server as a Target, for relays at Debezium
// Server's defaults: each message to the exchange named like its topic,
// with the empty routing key. Each run gets that exchange (fanout: the
// routing key does not matter), a queue of the same name bound to it,
// which takes every event of the run, and its dead-letter queue, which
// `pgoutbox run` checks for at start. The consumer's stop deletes the
// exchange and the queue; the dead-letter queue stays, with whatever the
// run dead-lettered.
type RabbitMQ struct{ URL string }

func (r RabbitMQ) Name() string    { return "rabbitmq" }
func (r RabbitMQ) Partitions() int { return 1 }
func (r RabbitMQ) Relay() (args, env []string) {
	return []string{"--sink", "rabbitmq"}, []string{"PGOUTBOX_RABBITMQ_URL=" + r.URL}
}

// channel connects and opens a channel; errors never show the URL.
func (r RabbitMQ) channel() (*amqp.Connection, *amqp.Channel, error) {
	c, err := amqp.DialConfig(r.URL, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return nil, nil, fmt.Errorf("rabbitmq: connect: %w", err)
	}
	ch, err := c.Channel()
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("rabbitmq: channel: %w", err)
	}
	return c, ch, nil
}

// Prepare declares the run's exchange, its queue bound to it and the
// dead-letter queue, all durable, as a user's would be.
func (r RabbitMQ) Prepare(_ context.Context, topic, deadLetters string) error {
	c, ch, err := r.channel()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := ch.ExchangeDeclare(topic, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: exchange %s: %w", topic, err)
	}
	if _, err := ch.QueueDeclare(topic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: queue %s: %w", topic, err)
	}
	if err := ch.QueueBind(topic, "", topic, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: binding %s to its exchange: %w", topic, err)
	}
	if _, err := ch.QueueDeclare(deadLetters, true, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: dead-letter queue %s: %w", deadLetters, err)
	}
	return nil
}

// Consume takes the run's queue with basic.consume, acknowledged
// automatically (no round trip per message), each event stamped with the
// time it was handed over. Stop deletes the queue and its exchange.
func (r RabbitMQ) Consume(topic string, fn func(id string, partition int32, at time.Time)) (func(), error) {
	c, ch, err := r.channel()
	if err != nil {
		return nil, err
	}
	const tag = "pgoutbox-bench"
	ds, err := ch.Consume(topic, tag, true, true, false, false, nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("rabbitmq: consuming %s: %w", topic, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range ds {
			at := time.Now()
			if id := amqpEventID(d.Headers, d.Body); id != "" {
				fn(id, 0, at)
			}
		}
	}()
	return func() {
		// The deliveries end once the cancel is confirmed, or when the
		// connection closes.
		if ch.Cancel(tag, false) == nil {
			<-done
			_, _ = ch.QueueDelete(topic, false, false, false)
			_ = ch.ExchangeDelete(topic, false, false)
		}
		c.Close()
		<-done
	}, nil
}

// amqpEventID is the event id of an AMQP message: in its cloudEvents:id
// (the CloudEvents AMQP binding's binary mode) or id header (Debezium's
// outbox router), else in its body, as eventID finds it.
func amqpEventID(t amqp.Table, body []byte) string {
	var hs []kgo.RecordHeader
	for _, k := range []string{"cloudEvents:id", "id"} {
		switch v := t[k].(type) {
		case string:
			hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
		case []byte:
			hs = append(hs, kgo.RecordHeader{Key: k, Value: v})
		}
	}
	return eventID(hs, body)
}
