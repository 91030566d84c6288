package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/pubsub"
	"github.com/pgoutbox/pgoutbox/relay"
)

// PubSub opens a Google Cloud Pub/Sub publisher (*pubsub.Publisher): a
// publisher per topic, each message answered, at-least-once.
type PubSub struct {
	Config pubsub.Config
}

var _ relay.Opener = (*PubSub)(nil)

// errPubSubExactlyOnce is exactly-once delivery asked of Pub/Sub.
var errPubSubExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; Pub/Sub has none: run with --delivery at-least-once")

// Open creates the publisher; it connects at the first record.
func (p *PubSub) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	pub, err := pubsub.New(p.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: pub}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (p *PubSub) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errPubSubExactlyOnce
	}
	cfg := p.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "pubsub", Debezium Server's name of the sink.
func (p *PubSub) Name() string { return "pubsub" }
