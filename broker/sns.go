package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/sns"
)

// SNS opens an Amazon SNS publisher (*sns.Publisher): PublishBatch
// requests in order, a FIFO topic's messages deduplicated by event id.
type SNS struct {
	Config sns.Config
}

var _ relay.Opener = (*SNS)(nil)

// errSNSExactlyOnce is exactly-once delivery asked of SNS.
var errSNSExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; SNS has none " +
	"(a FIFO topic drops a copy with the same event id within five minutes): run with --delivery at-least-once")

// Open creates the publisher; it sends nothing.
func (s *SNS) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	p, err := sns.New(s.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: p, EventIDs: true}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (s *SNS) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errSNSExactlyOnce
	}
	cfg := s.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "sns", Debezium Server's name of the sink.
func (s *SNS) Name() string { return "sns" }
