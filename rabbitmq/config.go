// Package rabbitmq publishes to RabbitMQ over AMQP 0-9-1 as Debezium
// Server's rabbitmq sink does (exchange, routing key, body, headers and
// delivery mode from the same settings), and more safely: every message is
// published mandatory, so that one no queue takes comes back as a failure
// instead of being dropped, carries its event's id as message-id, so that
// consumers can recognise a copy sent again, and counts as sent only once
// the broker confirmed it (publisher confirms).
//
// Many messages are in flight at once on one channel; their confirms are
// taken in the order they were published (acks.go), and after one failed,
// none after it counts as sent: the relay sends them again from its last
// confirmed position. RabbitMQ does not deduplicate: delivery is
// at-least-once. It knows nothing of the relay: package broker puts it
// behind the relay's interfaces.
package rabbitmq

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// The routing key sources (routingKey.source).
const (
	SourceStatic = "static"
	SourceTopic  = "topic"
	SourceKey    = "key"
)

// Debezium Server's defaults (RabbitMqStreamChangeConsumerConfig), and
// RabbitMQ's own largest message (max_message_size).
const (
	DefaultRoutingKeySource = SourceStatic
	DefaultDeliveryMode     = 2
	DefaultAckTimeout       = 30 * time.Second
	DefaultNullValue        = "default"
	DefaultMaxMessageBytes  = 128 << 20
)

// DefaultMaxPending bounds the messages waiting for their confirm, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// Config configures the publisher.
type Config struct {
	// URL is the server, amqp://user:password@host:port/vhost (amqps://
	// for TLS). It never appears in an error or a log line.
	URL string
	// TLS configures an amqps:// connection (nil: the system's roots).
	TLS *tls.Config
	// Exchange is every message's exchange; "" publishes each to the
	// exchange named like its topic (exchange).
	Exchange string
	// RoutingKey is the routing key of the static source (routingKey).
	RoutingKey string
	// RoutingKeySource is static (RoutingKey), topic (the topic) or key
	// (the record's key); Debezium Server routes with "" for any other
	// value, which Validate refuses (routingKey.source).
	RoutingKeySource string
	// AutoCreateRoutingKey declares a queue named like the routing key,
	// once at connect for the static and key sources (with RoutingKey),
	// and once per topic for the topic source (autoCreateRoutingKey).
	AutoCreateRoutingKey bool
	// RoutingKeyDurable makes those queues durable (routingKeyDurable).
	RoutingKeyDurable bool
	// DeliveryMode is 1 (transient) or 2 (persistent) (deliveryMode).
	DeliveryMode uint8
	// AckTimeout is how long a message's confirm may take (ackTimeout).
	AckTimeout time.Duration
	// NullValue is the body of a record without a value (null.value).
	NullValue string
	// HeaderBytes carries header values as byte arrays, as Debezium Server
	// does under debezium.format.header=jsonbytearray; else as strings.
	HeaderBytes bool
	// ContentType takes a record's content-type header as the message's
	// content-type property, as the CloudEvents AMQP binding does.
	ContentType bool
	// DeadLetterQueue is where dead letters go: the queue of that name,
	// through the default exchange ("": none). Ping checks that it exists,
	// and declares it under AutoCreateRoutingKey.
	DeadLetterQueue string
	// DeadLetterQueueOptional lets a missing DeadLetterQueue pass Ping
	// with a warning, as Debezium Server needs no such queue: a dead
	// letter published while it is still missing fails with a permanent
	// *MissingError, which stops the relay before anything after it, as a
	// message Debezium Server cannot publish stops it.
	DeadLetterQueueOptional bool
	// MaxPending bounds the messages waiting for their confirm; Produce
	// blocks beyond it (default 5,000).
	MaxPending int
	// MaxMessageBytes is the largest body the server accepts (its
	// max_message_size; default RabbitMQ's, 128 MiB).
	MaxMessageBytes int
	// ConnectTimeout bounds connecting (default 10s).
	ConnectTimeout time.Duration
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.RoutingKeySource == "" {
		c.RoutingKeySource = DefaultRoutingKeySource
	}
	if c.DeliveryMode == 0 {
		c.DeliveryMode = DefaultDeliveryMode
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.NullValue == "" {
		c.NullValue = DefaultNullValue
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
}

// Validate reports the first invalid field; it never shows the URL.
func (c Config) Validate() error {
	if c.URL == "" {
		return errors.New("rabbitmq: a server URL is required")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
		return errors.New("rabbitmq: the server URL is not amqp://[user:password@]host[:port][/vhost] or amqps://")
	}
	switch c.RoutingKeySource {
	case SourceStatic, SourceTopic, SourceKey:
	default:
		return fmt.Errorf("rabbitmq: routing key source %q: use static, topic or key", c.RoutingKeySource)
	}
	if c.DeliveryMode != 1 && c.DeliveryMode != 2 {
		return fmt.Errorf("rabbitmq: delivery mode %d: use 1 (transient) or 2 (persistent)", c.DeliveryMode)
	}
	if c.AckTimeout <= 0 || c.MaxPending < 1 || c.ConnectTimeout <= 0 || c.MaxMessageBytes < 1 {
		return errors.New("rabbitmq: ack timeout, pending bound, connect timeout and max message bytes must be positive")
	}
	for what, name := range map[string]string{"exchange": c.Exchange, "routing key": c.RoutingKey, "dead-letter queue": c.DeadLetterQueue} {
		if len(name) > maxShortString {
			return fmt.Errorf("rabbitmq: %s of %d bytes: AMQP allows at most %d", what, len(name), maxShortString)
		}
	}
	return nil
}

// maxShortString is the longest exchange name, routing key or header
// name AMQP 0-9-1 carries (a shortstr).
const maxShortString = 255
