package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/rabbitstream"
	"github.com/pgoutbox/pgoutbox/relay"
)

// RabbitStream opens a RabbitMQ Streams publisher (*rabbitstream.Publisher):
// at-least-once, each message confirmed by the broker.
type RabbitStream struct {
	Config rabbitstream.Config
}

var _ relay.Opener = (*RabbitStream)(nil)

// errRabbitStreamExactlyOnce is exactly-once delivery asked of RabbitMQ
// Streams.
var errRabbitStreamExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; RabbitMQ Streams have none, " +
	"and deduplicate only by a producer's own numbering, which a message sent again after a restart does not keep: " +
	"run with --delivery at-least-once")

// Open creates the publisher; it does not connect.
func (r *RabbitStream) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	p, err := rabbitstream.New(r.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: p}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (r *RabbitStream) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errRabbitStreamExactlyOnce
	}
	cfg := r.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "rabbitmqstream", Debezium Server's name of the sink.
func (r *RabbitStream) Name() string { return "rabbitmqstream" }
