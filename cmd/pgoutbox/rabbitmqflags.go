package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/rabbitmq"
)

// sinkRabbitMQ is Debezium Server's name of the RabbitMQ AMQP 0-9-1 sink.
const sinkRabbitMQ = "rabbitmq"

// rabbitmqFlags are the flags of the RabbitMQ sink, each Debezium Server's
// debezium.sink.rabbitmq.* key of the same name (connection.* for the
// server, user and TLS).
type rabbitmqFlags struct {
	url, host, user, password, vhost string
	port                             int
	exchange, routingKey, source     string
	autoCreate, durable, headerBytes bool
	deliveryMode                     int
	ackTimeout                       time.Duration
	nullValue                        string
	maxMessageBytes                  int
	tls                              tlsFiles
}

func (r *rabbitmqFlags) register(fs *flag.FlagSet) {
	const p = "--sink rabbitmq: "
	fs.StringVar(&r.url, "rabbitmq-url", "", p+"the server, amqp://user:password@host:port/vhost or amqps:// (default amqp://localhost:5672/ as guest; connection.uri); prefer PGOUTBOX_RABBITMQ_URL")
	fs.StringVar(&r.host, "rabbitmq-host", "", p+"the server's host, over --rabbitmq-url's (connection.host)")
	fs.IntVar(&r.port, "rabbitmq-port", 0, p+"the server's port, over --rabbitmq-url's (connection.port)")
	fs.StringVar(&r.user, "rabbitmq-user", "", p+"user name, over --rabbitmq-url's (connection.username)")
	fs.StringVar(&r.password, "rabbitmq-password", "", p+"password, over --rabbitmq-url's (connection.password); prefer PGOUTBOX_RABBITMQ_PASSWORD")
	fs.StringVar(&r.vhost, "rabbitmq-vhost", "", p+"virtual host, over --rabbitmq-url's (connection.virtual.host)")
	fs.StringVar(&r.exchange, "rabbitmq-exchange", "", p+"every message's exchange; empty: the exchange named like the message's topic (exchange)")
	fs.StringVar(&r.routingKey, "rabbitmq-routing-key", "", p+"the routing key of the static source (routingKey)")
	fs.StringVar(&r.source, "rabbitmq-routing-key-source", rabbitmq.DefaultRoutingKeySource, p+"static (--rabbitmq-routing-key), topic (the topic) or key (the aggregate id, the record's key) (routingKey.source)")
	fs.BoolVar(&r.autoCreate, "rabbitmq-auto-create-routing-key", false, p+"declare a queue named like the routing key (no binding), and the dead-letter queue (autoCreateRoutingKey)")
	fs.BoolVar(&r.durable, "rabbitmq-routing-key-durable", true, p+"the queues --rabbitmq-auto-create-routing-key declares are durable (routingKeyDurable)")
	fs.IntVar(&r.deliveryMode, "rabbitmq-delivery-mode", rabbitmq.DefaultDeliveryMode, p+"2 persistent, 1 transient: a transient message is lost when the server stops (deliveryMode)")
	fs.DurationVar(&r.ackTimeout, "rabbitmq-ack-timeout", rabbitmq.DefaultAckTimeout, p+"how long a message's confirm may take (ackTimeout)")
	fs.StringVar(&r.nullValue, "rabbitmq-null-value", rabbitmq.DefaultNullValue, p+"the body of a tombstone (null.value)")
	fs.IntVar(&r.maxMessageBytes, "rabbitmq-max-message-bytes", rabbitmq.DefaultMaxMessageBytes, p+"the largest body the server takes, its max_message_size: a larger event is dead-lettered (a smaller limit the server reports is learned)")
	fs.BoolVar(&r.headerBytes, "rabbitmq-header-bytes", false, p+"header values as AMQP byte arrays, as Debezium Server's debezium.format.header=jsonbytearray; default strings")
	r.tls.register(fs, "rabbitmq-tls", "the RabbitMQ server")
}

// secrets are the values the logger must mask: the password, given alone
// or in the URL.
func (r *rabbitmqFlags) secrets() []string {
	out := r.tls.secrets()
	if r.password != "" {
		out = append(out, r.password)
	}
	if r.url != "" {
		if u, err := amqp.ParseURI(r.url); err == nil && u.Password != "" && u.Password != "guest" {
			out = append(out, u.Password)
		}
	}
	return out
}

// serverURL is --rabbitmq-url with the other connection flags over it, as
// amqp-client's ConnectionFactoryConfigurator sets the uri first and the
// host, port, user, password and virtual host after it. TLS turns amqp://
// into amqps://, on 5671 unless a port is given. Errors never show the
// URL.
func (r *rabbitmqFlags) serverURL(tlsOn bool) (string, error) {
	base := r.url
	if base == "" {
		base = "amqp://localhost/"
	}
	u, err := amqp.ParseURI(base)
	if err != nil {
		return "", errors.New("--rabbitmq-url is not amqp://[user:password@]host[:port][/vhost] or amqps://... (connection.uri)")
	}
	if tlsOn && u.Scheme == "amqp" {
		u.Scheme = "amqps"
		if u.Port == 5672 {
			u.Port = 5671
		}
	}
	if r.host != "" {
		u.Host = r.host
	}
	if r.port != 0 {
		if r.port < 0 || r.port > 65535 {
			return "", fmt.Errorf("--rabbitmq-port %d: not a port", r.port)
		}
		u.Port = r.port
	}
	if r.user != "" {
		u.Username = r.user
	}
	if r.password != "" {
		u.Password = r.password
	}
	if r.vhost != "" {
		u.Vhost = r.vhost
	}
	return u.String(), nil
}

// opener is the RabbitMQ sink these flags describe; deadLetters is the
// dead-letter queue ("" under --on-poison halt), which may be missing
// unless --dlq-topic named it (dlqNamed), contentType tells a CloudEvents
// format, whose content-type header is the message's property, and
// maxPending is --max-buffered-records.
func (r *rabbitmqFlags) opener(deadLetters string, dlqNamed, contentType bool, maxPending int) (*broker.RabbitMQ, error) {
	t, err := r.tls.config()
	if err != nil {
		return nil, err
	}
	u, err := r.serverURL(t != nil)
	if err != nil {
		return nil, err
	}
	if r.deliveryMode != 1 && r.deliveryMode != 2 {
		return nil, fmt.Errorf("--rabbitmq-delivery-mode %d: use 2 (persistent) or 1 (transient)", r.deliveryMode)
	}
	switch r.source {
	case rabbitmq.SourceStatic, rabbitmq.SourceTopic, rabbitmq.SourceKey:
	default:
		return nil, fmt.Errorf("--rabbitmq-routing-key-source %q: use static, topic or key", r.source)
	}
	cfg := rabbitmq.Config{
		URL: u, TLS: t, Exchange: r.exchange, RoutingKey: r.routingKey, RoutingKeySource: r.source,
		AutoCreateRoutingKey: r.autoCreate, RoutingKeyDurable: r.durable, DeliveryMode: uint8(r.deliveryMode),
		AckTimeout: r.ackTimeout, NullValue: r.nullValue, HeaderBytes: r.headerBytes, ContentType: contentType,
		DeadLetterQueue: deadLetters, DeadLetterQueueOptional: !dlqNamed, MaxPending: maxPending, MaxMessageBytes: r.maxMessageBytes,
	}
	return &broker.RabbitMQ{Config: cfg}, nil
}

// rabbitmqGuarantee is what run's start line says of the RabbitMQ sink.
const rabbitmqGuarantee = "at-least-once, each message mandatory and confirmed; RabbitMQ does not deduplicate: consumers recognise a copy by its message-id, the event id"
