package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/natsjs"
	"github.com/pgoutbox/pgoutbox/relay"
)

// NATS opens a NATS JetStream publisher (*natsjs.JetStream): at-least-once,
// deduplicated by event id within the stream's duplicate window.
type NATS struct {
	Config natsjs.Config
}

var _ relay.Opener = (*NATS)(nil)

// errNATSExactlyOnce is exactly-once delivery asked of NATS JetStream.
var errNATSExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; NATS JetStream has none " +
	"(each message carries its event id as Nats-Msg-Id, and the stream drops a copy sent again within its duplicate window, 2 minutes by default): " +
	"run with --delivery at-least-once")

// Open creates the publisher; it does not connect.
func (n *NATS) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	js, err := natsjs.New(n.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: js, EventIDs: true}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (n *NATS) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errNATSExactlyOnce
	}
	cfg := n.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "nats-jetstream", Debezium Server's name of the sink.
func (n *NATS) Name() string { return "nats-jetstream" }
