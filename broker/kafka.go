// Package broker holds the brokers a relay can publish to, each as a
// relay.Opener that cmd/ chooses: Kafka (package sink) and NATS JetStream
// (package natsjs). A broker's own package knows nothing of the relay;
// this one puts it behind the relay's interfaces.
package broker

import (
	"log/slog"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/sink"
)

// Kafka opens a Kafka producer (*sink.Kafka), transactional for
// exactly-once delivery.
type Kafka struct {
	Config sink.Config
}

var _ relay.Opener = (*Kafka)(nil)

// Open creates the producer; it does not contact the brokers.
func (k *Kafka) Open(use relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	cfg := k.Config
	cfg.TransactionalID, cfg.PositionTopic = use.TransactionalID, use.PositionTopic
	p, err := sink.New(cfg, log)
	if err != nil {
		return relay.Broker{}, err
	}
	b := relay.Broker{Sink: p}
	if use.TransactionalID != "" {
		b.Txn, b.Positions = p.Txn(), p.Topics()
	}
	return b, nil
}

// Validate checks the producer's settings, a transactional producer's
// under exactly-once delivery.
func (k *Kafka) Validate(d relay.Delivery) error {
	cfg := k.Config
	cfg.Defaults()
	if d == relay.ExactlyOnce {
		cfg.TransactionalID = "pgoutbox.validate"
	}
	return cfg.Validate()
}

// Name is "kafka".
func (k *Kafka) Name() string { return "kafka" }
