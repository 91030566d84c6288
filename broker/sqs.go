package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/sqs"
)

// SQS opens an Amazon SQS publisher (*sqs.Publisher): SendMessageBatch
// requests in order, a FIFO queue's messages deduplicated by event id.
type SQS struct {
	Config sqs.Config
}

var _ relay.Opener = (*SQS)(nil)

// errSQSExactlyOnce is exactly-once delivery asked of SQS.
var errSQSExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; SQS has none " +
	"(a FIFO queue drops a copy with the same event id within five minutes): run with --delivery at-least-once")

// Open creates the publisher; it sends nothing.
func (s *SQS) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	p, err := sqs.New(s.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: p, EventIDs: true}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (s *SQS) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errSQSExactlyOnce
	}
	cfg := s.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "sqs", Debezium Server's name of the sink.
func (s *SQS) Name() string { return "sqs" }
