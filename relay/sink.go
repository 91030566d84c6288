package relay

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/relay/internal/eos"
)

// The relay publishes through a broker that cmd/ chooses: Kafka
// (*sink.Kafka) or another (NATS JetStream). What every broker offers is
// Sink; what only Kafka has, transactions and the position topic that
// exactly-once delivery needs, are Transactions and PositionLog, which a
// broker without them leaves nil. A record is a *kgo.Record whatever the
// broker: its topic, key, value and headers are what any broker's message
// is made of, and the row path builds it once.

// producer is what the row path (publisher.go) needs of a sink.
type producer interface {
	// Fits returns an error (*sink.TooLargeError) when rec is larger than
	// its topic accepts.
	Fits(ctx context.Context, rec *kgo.Record) error
	// Produce hands rec over; promise is called once, from any goroutine,
	// with its ack or its failure, and in produce order per key. When
	// Produce returns an error, promise is not called.
	Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) error
	// AbortBuffered fails what is not sent yet, without blocking: for a
	// refusal seen in a promise.
	AbortBuffered()
	// Flush waits until every record handed over is acked or failed.
	Flush(ctx context.Context) error
}

// Sink is what a session needs of its broker: the row path's producer,
// and the session's own use of it.
type Sink interface {
	producer
	// Resume lets records through again after AbortBuffered or a failed
	// record; Run calls it between sessions, while nothing is produced.
	Resume()
	// Renew replaces the connection and forgets what was learned of the
	// broker's limits; what was still buffered is failed. Call it only
	// while nothing is produced.
	Renew() error
	// Buffered is how many records wait for their ack.
	Buffered() int64
	// Ping checks that the broker answers. An error whose Permanent()
	// says true (credentials, TLS) stops the relay at start.
	Ping(ctx context.Context) error
	// Close fails what is still buffered and closes the connections.
	Close()
}

// Transactions is the producer's transactional side (sink/txn.go), which
// exactly-once delivery (internal/eos) and dlq replay use.
type Transactions = eos.Transactions

// PositionLog is the position topic, where exactly-once delivery's
// position records are read back (sink/admin.go).
type PositionLog = eos.PositionLog

// Broker is what an Opener opens: the sink, and, where the broker has
// them, its transactions and position log.
type Broker struct {
	Sink
	Txn       Transactions // nil: no transactions (exactly-once is refused)
	Positions PositionLog  // nil with Txn
	// EventIDs: the sink reads each record's event id from its Context
	// (outbox.EventID), to deduplicate by it; a dead letter's is its
	// event's with DeadLetterIDPrefix before it.
	EventIDs bool
}

// DeadLetterIDPrefix starts the event id a dead letter carries
// (Broker.EventIDs): the event itself may be published under its own id
// later (dlq replay), which a broker that deduplicates by id must not take
// for a copy of the dead letter.
const DeadLetterIDPrefix = "dlq:"

// SinkUse is what a Run or a dlq replay asks of the broker it opens.
type SinkUse struct {
	// TransactionalID is set for exactly-once delivery: the producer is
	// transactional, and a later one with the same id fences it.
	TransactionalID string
	// PositionTopic is where exactly-once position records go.
	PositionTopic string
}

// Opener opens the broker of one Run or one dlq replay. cmd/ chooses it.
type Opener interface {
	Open(use SinkUse, log *slog.Logger) (Broker, error)
	// Validate checks the broker's settings for a delivery before
	// anything connects; a broker without transactions refuses
	// exactly-once here, with the reason.
	Validate(d Delivery) error
	// Name names the broker ("kafka"), for log lines.
	Name() string
}

// sinkName is o's name, "kafka" while none is chosen (Validate refuses
// that).
func sinkName(o Opener) string {
	if o == nil {
		return "kafka"
	}
	return o.Name()
}

// ErrNoTransactions is a broker without transactions opened for
// exactly-once delivery.
var ErrNoTransactions = errors.New("exactly-once delivery needs Kafka transactions, which this broker does not have")

// open opens the pipeline's broker for use: a transactional one under
// exactly-once delivery.
func (p *pipeline) open(use SinkUse) (Broker, error) {
	b, err := p.cfg.Sink.Open(use, p.log)
	if err != nil {
		return Broker{}, err
	}
	if use.TransactionalID != "" && (b.Txn == nil || b.Positions == nil) {
		b.Close()
		return Broker{}, ErrNoTransactions
	}
	return b, nil
}
