package broker

import (
	"log/slog"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/sink"
)

// The transaction timeout is a transactional producer's setting: only
// exactly-once delivery checks it.
func TestKafkaValidate(t *testing.T) {
	k := &Kafka{Config: sink.Config{Brokers: []string{"127.0.0.1:9092"}, TransactionTimeout: 20 * time.Minute}}
	if err := k.Validate(relay.AtLeastOnce); err != nil {
		t.Errorf("at-least-once: %v", err)
	}
	if err := k.Validate(relay.ExactlyOnce); err == nil {
		t.Error("exactly-once with a 20m transaction timeout: no error")
	}
	if err := (&Kafka{}).Validate(relay.AtLeastOnce); err == nil {
		t.Error("no brokers: no error")
	}
}

// Exactly-once opens a transactional producer with its position topic;
// at-least-once an idempotent one, without either.
func TestKafkaOpen(t *testing.T) {
	k := &Kafka{Config: sink.Config{Brokers: []string{"127.0.0.1:1"}}}
	log := slog.New(slog.DiscardHandler)
	b, err := k.Open(relay.SinkUse{}, log)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if b.Txn != nil || b.Positions != nil {
		t.Error("at-least-once: a transactional producer")
	}
	b, err = k.Open(relay.SinkUse{TransactionalID: "pgoutbox.t", PositionTopic: "t.position"}, log)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if b.Txn == nil || b.Positions == nil {
		t.Error("exactly-once: no transactions")
	}
}
