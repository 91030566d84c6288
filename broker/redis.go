package broker

import (
	"errors"
	"log/slog"

	"github.com/pgoutbox/pgoutbox/redisstream"
	"github.com/pgoutbox/pgoutbox/relay"
)

// Redis opens a Redis Streams publisher (*redisstream.Streams):
// at-least-once; what the relay sends again after a failure is not
// written twice while its event id is among the last ones written.
type Redis struct {
	Config redisstream.Config
}

var _ relay.Opener = (*Redis)(nil)

// errRedisExactlyOnce is exactly-once delivery asked of Redis.
var errRedisExactlyOnce = errors.New("exactly-once delivery needs Kafka transactions; Redis Streams have none, and Redis does not deduplicate entries " +
	"(pgoutbox writes each batch whole or not at all, and does not write again what it finds written after a failure): " +
	"run with --delivery at-least-once")

// Open creates the publisher; it does not connect.
func (r *Redis) Open(_ relay.SinkUse, log *slog.Logger) (relay.Broker, error) {
	s, err := redisstream.New(r.Config, log)
	if err != nil {
		return relay.Broker{}, err
	}
	return relay.Broker{Sink: s, EventIDs: true}, nil
}

// Validate checks the publisher's settings; it refuses exactly-once
// delivery.
func (r *Redis) Validate(d relay.Delivery) error {
	if d == relay.ExactlyOnce {
		return errRedisExactlyOnce
	}
	cfg := r.Config
	cfg.Defaults()
	return cfg.Validate()
}

// Name is "redis", Debezium Server's name of the sink.
func (r *Redis) Name() string { return "redis" }
