package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/pulsar"
	"github.com/pgoutbox/pgoutbox/relay"
)

// Pulsar opens an Apache Pulsar publisher (*pulsar.Publisher): a
// producer per topic, each message confirmed, at-least-once.
type Pulsar struct {
	Config pulsar.Config
}

var _ relay.Opener = (*Pulsar)(nil)

// errPulsarExactlyOnce is exactly-once delivery asked of Pulsar.
var errPulsarExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; pgoutbox does not use Pulsar's: run with --delivery at-least-once")

// Open creates the publisher; it connects at the first record.
func (p *Pulsar) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	pub, err := pulsar.New(p.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: pub}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (p *Pulsar) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errPulsarExactlyOnce
	}
	cfg := p.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "pulsar", Debezium Server's name of the sink.
func (p *Pulsar) Name() string { return "pulsar" }
