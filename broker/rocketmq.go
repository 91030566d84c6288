package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/rocketmq"
)

// RocketMQ opens an Apache RocketMQ publisher (*rocketmq.Publisher):
// batches to a topic's queues, each stored before the next is sent,
// at-least-once.
type RocketMQ struct {
	Config rocketmq.Config
}

var _ relay.Opener = (*RocketMQ)(nil)

// errRocketMQExactlyOnce is exactly-once delivery asked of RocketMQ.
var errRocketMQExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; pgoutbox does not use RocketMQ's: run with --delivery at-least-once")

// Open creates the publisher; it connects at the first record.
func (b *RocketMQ) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	p, err := rocketmq.New(b.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: p}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (b *RocketMQ) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errRocketMQExactlyOnce
	}
	cfg := b.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "rocketmq", Debezium Server's name of the sink.
func (b *RocketMQ) Name() string { return "rocketmq" }
