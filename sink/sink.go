// Package sink is the Kafka producer: idempotent, acks from all in-sync
// replicas, an acknowledgement per record, bounded buffering, and a size
// check before a record is handed to the client.
package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures the producer.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// ClientID is the Kafka client id (default "pgoutbox").
	ClientID string
	// Linger is how long a partition waits for more records before sending
	// (default 0: latency first; batches still form while a request is in
	// flight).
	Linger time.Duration
	// MaxBufferedRecords and MaxBufferedBytes bound what waits for an ack;
	// Produce blocks beyond them, which is the pipeline's backpressure
	// (defaults 10,000 records and 64 MiB).
	MaxBufferedRecords int
	MaxBufferedBytes   int
	// MaxMessageBytes is the largest record accepted, matching the
	// broker's message.max.bytes (default 1,000,012, Kafka's default).
	MaxMessageBytes int
	// CreateTopics asks the broker to create missing topics (default true
	// through Defaults; the broker must allow it).
	CreateTopics bool
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.ClientID == "" {
		c.ClientID = "pgoutbox"
	}
	if c.MaxBufferedRecords == 0 {
		c.MaxBufferedRecords = 10_000
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = 64 << 20
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1_000_012
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka brokers are required")
	}
	for _, b := range c.Brokers {
		if b == "" {
			return errors.New("kafka brokers: empty address")
		}
	}
	if c.Linger < 0 || c.Linger > time.Minute {
		return fmt.Errorf("linger %s: must be between 0 and 1m", c.Linger)
	}
	if c.MaxBufferedRecords < 1 || c.MaxBufferedBytes < 1 {
		return errors.New("buffer limits must be positive")
	}
	if c.MaxMessageBytes < 512 || c.MaxMessageBytes > 1<<30 {
		return fmt.Errorf("max message bytes %d: must be between 512 and 1 GiB", c.MaxMessageBytes)
	}
	if c.MaxBufferedBytes < c.MaxMessageBytes {
		return fmt.Errorf("max buffered bytes %d is smaller than max message bytes %d", c.MaxBufferedBytes, c.MaxMessageBytes)
	}
	return nil
}

// TooLargeError is a record larger than the broker accepts. It is never
// handed to the client, so it can neither block nor reorder its key.
type TooLargeError struct {
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("record of %d bytes exceeds the maximum message size of %d bytes", e.Size, e.Max)
}

// Kafka produces records to Kafka.
type Kafka struct {
	client *kgo.Client
	max    int
}

// New creates a producer. It does not contact the brokers; Ping does.
func New(cfg Config, log *slog.Logger) (*Kafka, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.Linger),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.MaxBufferedBytes(cfg.MaxBufferedBytes),
		kgo.ProducerBatchMaxBytes(int32(cfg.MaxMessageBytes)),
		kgo.WithLogger(logger{log}),
	}
	if cfg.CreateTopics {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &Kafka{client: client, max: cfg.MaxMessageBytes}, nil
}

// Size is an upper bound of a record's encoded size in a batch of its own,
// which is what the broker compares with its message.max.bytes.
func Size(r *kgo.Record) int {
	const batchOverhead, recordOverhead, headerOverhead = 61, 21, 10
	n := batchOverhead + recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += headerOverhead + len(h.Key) + len(h.Value)
	}
	return n
}

// Produce hands r to the client; promise is called once with its ack or
// its failure. It blocks while the buffer is full, until ctx ends. A record
// over the size limit is refused with *TooLargeError and promise is not
// called.
func (k *Kafka) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if n := Size(r); n > k.max {
		return &TooLargeError{Size: n, Max: k.max}
	}
	k.client.Produce(ctx, r, promise)
	return nil
}

// Flush waits until every buffered record is acked or failed.
func (k *Kafka) Flush(ctx context.Context) error { return k.client.Flush(ctx) }

// Ping checks that a broker answers.
func (k *Kafka) Ping(ctx context.Context) error {
	if err := k.client.Ping(ctx); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

// Close fails what is still buffered and closes the connections.
func (k *Kafka) Close() { k.client.Close() }

// logger passes franz-go's warnings and errors to slog; its info and debug
// lines describe every request and would drown the relay's own.
type logger struct{ log *slog.Logger }

func (l logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	l.log.Log(context.Background(), lvl, "kafka: "+msg, keyvals...)
}
