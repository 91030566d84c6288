// Package rabbitstream publishes to RabbitMQ streams over RabbitMQ's own
// stream protocol, as Debezium Server's rabbitmqstream sink does: each
// record to the stream named like its topic (or one stream for all),
// created on first use, as an AMQP 1.0 message whose message-id is the
// record's key, whose application properties are its headers and whose
// body is its value (null.value for a tombstone).
//
// A message counts as sent only once the broker confirmed it. Many are in
// flight at once; their confirms are taken in the order they were
// published, and after one failed none after it counts as sent: the relay
// sends them again from its last confirmed position. Delivery is
// at-least-once, as Debezium Server's. It knows nothing of the relay:
// package broker puts it behind the relay's interfaces.
package rabbitstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Debezium Server's defaults (RabbitMqStreamNativeChangeConsumerConfig),
// and RabbitMQ's own largest frame (stream.frame_max).
const (
	DefaultNullValue     = "default"
	DefaultAckTimeout    = 30 * time.Second
	DefaultBatchSize     = 100
	DefaultMaxFrameBytes = 1 << 20
	DefaultRPCTimeout    = 10 * time.Second
)

// DefaultMaxPending bounds the messages waiting for their confirm, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// Config configures the publisher.
type Config struct {
	// URI is the server, rabbitmq-stream://user:password@host:port/vhost
	// (rabbitmq-stream+tls:// for TLS). It never appears in an error or a
	// log line. The publisher always connects to its host and port, as
	// Debezium Server does, whatever address the server advertises.
	URI string
	// TLS configures a rabbitmq-stream+tls:// connection (nil: the
	// system's roots).
	TLS *tls.Config
	// Stream is every message's stream; "" publishes each to the stream
	// named like its topic (stream).
	Stream string
	// DeadLetterStream is where dead letters go, whatever Stream says:
	// the relay's dead-letter topic.
	DeadLetterStream string
	// MaxAge, MaxLengthBytes and MaxSegmentBytes are the retention of the
	// streams the publisher creates (stream.maxAge, stream.maxLength,
	// stream.maxSegmentSize); zero: the server's.
	MaxAge          time.Duration
	MaxLengthBytes  int64
	MaxSegmentBytes int64
	// ProducerName names the producers (producer.name): the broker then
	// keeps their last publishing id. Messages are numbered by the client,
	// so a message sent again is not deduplicated, as under Debezium
	// Server.
	ProducerName string
	// BatchSize is the most messages the client sends in one frame
	// (producer.batchSize).
	BatchSize int
	// NullValue is the body of a record without a value (null.value).
	NullValue string
	// ContentType takes a record's content-type header as the message's
	// content-type property, as the CloudEvents AMQP binding does.
	ContentType bool
	// AckTimeout is how long a message's confirm may take
	// (producer.confirmTimeout).
	AckTimeout time.Duration
	// MaxPending bounds the messages waiting for their confirm; Produce
	// blocks beyond it (producer.maxUnconfirmedMessages; default 5,000).
	MaxPending int
	// MaxFrameBytes is the largest frame the client asks for and the
	// server takes (its stream.frame_max, default 1 MiB): a message that
	// does not fit in one is too large.
	MaxFrameBytes int
	// RPCTimeout is how long the server may take to answer a request:
	// the handshake, creating a stream or a producer (rpcTimeout; default
	// 10s).
	RPCTimeout time.Duration
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.NullValue == "" {
		c.NullValue = DefaultNullValue
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.RPCTimeout == 0 {
		c.RPCTimeout = DefaultRPCTimeout
	}
}

// Validate reports the first invalid field; it never shows the URI.
func (c Config) Validate() error {
	if _, err := parseURI(c.URI); err != nil {
		return err
	}
	if c.AckTimeout <= 0 || c.MaxPending < 1 || c.RPCTimeout <= 0 || c.BatchSize < 1 {
		return errors.New("rabbitmq streams: ack timeout, pending bound, batch size and RPC timeout must be positive")
	}
	if c.MaxFrameBytes < minFrame {
		return fmt.Errorf("rabbitmq streams: a largest frame of %d bytes: RabbitMQ takes no less than %d", c.MaxFrameBytes, minFrame)
	}
	if c.MaxAge < 0 || c.MaxLengthBytes < 0 || c.MaxSegmentBytes < 0 {
		return errors.New("rabbitmq streams: a stream's max age, length and segment size cannot be negative")
	}
	for _, name := range []string{c.Stream, c.DeadLetterStream} {
		if len(name) > maxStreamName {
			return fmt.Errorf("rabbitmq streams: stream name of %d bytes: RabbitMQ takes at most %d", len(name), maxStreamName)
		}
	}
	return nil
}

// minFrame is the smallest frame_max RabbitMQ takes (its stream
// plugin's lower bound).
const minFrame = 8192

// maxStreamName is the longest stream name (a queue name, a shortstr).
const maxStreamName = 255

// endpoint is what a URI names.
type endpoint struct {
	host  string
	port  int
	tls   bool
	plain string // the URI as the client takes it
}

// parseURI reads a rabbitmq-stream:// or rabbitmq-stream+tls:// URI;
// errors never show it.
func parseURI(s string) (endpoint, error) {
	bad := errors.New("rabbitmq streams: the server URI is not rabbitmq-stream://[user:password@]host[:port][/vhost] or rabbitmq-stream+tls://")
	if s == "" {
		return endpoint{}, errors.New("rabbitmq streams: a server URI is required")
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return endpoint{}, bad
	}
	e := endpoint{host: u.Hostname(), plain: s}
	switch u.Scheme {
	case "rabbitmq-stream":
		e.port = 5552
	case "rabbitmq-stream+tls":
		e.port, e.tls = 5551, true
	default:
		return endpoint{}, bad
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			return endpoint{}, bad
		}
		e.port = n
	}
	return e, nil
}
