package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/rabbitmq"
	"github.com/pgoutbox/pgoutbox/relay"
)

// RabbitMQ opens a RabbitMQ AMQP 0-9-1 publisher (*rabbitmq.Publisher):
// at-least-once, each message mandatory and confirmed, with its event id
// as message-id.
type RabbitMQ struct {
	Config rabbitmq.Config
}

var _ relay.Opener = (*RabbitMQ)(nil)

// errRabbitMQExactlyOnce is exactly-once delivery asked of RabbitMQ.
var errRabbitMQExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; RabbitMQ has none and does not deduplicate " +
	"(each message carries its event id as message-id, by which consumers can recognise a copy sent again): " +
	"run with --delivery at-least-once")

// Open creates the publisher; it does not connect.
func (r *RabbitMQ) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	p, err := rabbitmq.New(r.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: p, EventIDs: true}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (r *RabbitMQ) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errRabbitMQExactlyOnce
	}
	cfg := r.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "rabbitmq", Debezium Server's name of the sink.
func (r *RabbitMQ) Name() string { return "rabbitmq" }
