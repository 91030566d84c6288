package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/kinesis"
	"github.com/pgoutbox/pgoutbox/relay"
)

// Kinesis opens an Amazon Kinesis Data Streams publisher
// (*kinesis.Publisher): PutRecords requests in order, each partition key
// once per request, at-least-once.
type Kinesis struct {
	Config kinesis.Config
}

var _ relay.Opener = (*Kinesis)(nil)

// errKinesisExactlyOnce is exactly-once delivery asked of Kinesis.
var errKinesisExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; Kinesis has none and does not deduplicate: run with --delivery at-least-once")

// Open creates the publisher; it sends nothing.
func (k *Kinesis) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	p, err := kinesis.New(k.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: p}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (k *Kinesis) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errKinesisExactlyOnce
	}
	cfg := k.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "kinesis", Debezium Server's name of the sink.
func (k *Kinesis) Name() string { return "kinesis" }
