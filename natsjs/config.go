// Package natsjs publishes to NATS JetStream as Debezium Server's
// nats-jetstream sink does (subject the topic, data the value, the
// record's headers), and more safely: each message carries its event's id
// as Nats-Msg-Id, so that the stream's duplicate window drops a copy sent
// again, and the id of the message before it as Nats-Expected-Last-Msg-Id,
// so that a message never lands behind one of its session that failed.
// Another publisher's message in between is no failure: the refused
// message is sent again once the one it expected is known stored
// (acks.go).
//
// Many messages are in flight at once; their acks are taken in the order
// they were published (acks.go), and a record's promise runs only once the
// stream acknowledged it. It knows nothing of the relay: package broker
// puts it behind the relay's interfaces.
package natsjs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Debezium Server's defaults (NatsJetStreamChangeConsumerConfig).
const (
	DefaultStreamName = "DebeziumStream"
	DefaultSubjects   = "*.*.*"
	DefaultStorage    = "memory"
	DefaultAckTimeout = 5 * time.Second
)

// DefaultMaxPending bounds the messages waiting for their ack, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// Config configures the publisher.
type Config struct {
	// URLs are the servers, nats://host:port (url, split on ",").
	URLs []string
	// CreateStream creates StreamName over Subjects with Storage at start
	// when no stream of that name exists (create-stream). A stream that
	// exists is used as it is.
	CreateStream bool
	StreamName   string   // default DebeziumStream
	Subjects     []string // default *.*.*
	Storage      string   // memory (default) or file
	// DeadLetterSubject is where dead letters go ("": none). A stream
	// CreateStream creates takes it too, and Ping checks that a stream
	// does: a dead letter no stream takes would stop the relay at the
	// first poison row instead of setting it aside.
	DeadLetterSubject string
	// DeadLetterSubjectOptional lets a DeadLetterSubject no stream takes
	// pass Ping with a warning, as Debezium Server needs none: a dead
	// letter published while no stream takes it fails with a permanent
	// *DeadLetterError, which stops the relay before anything after it,
	// as a message Debezium Server cannot publish stops it.
	DeadLetterSubjectOptional bool
	// RecordSubjects are the subjects of the records the relay writes
	// itself, Debezium's heartbeat and transaction records. Ping checks
	// that a stream takes each: Debezium Server fails at the first such
	// record no stream takes, and its default subjects (*.*.*) take
	// neither __debezium-heartbeat.<prefix> nor <prefix>.transaction.
	RecordSubjects []string
	// JWT and Seed are a user's credentials (auth.jwt, auth.seed); User and
	// Password a user's name and password (auth.user, auth.password), used
	// only without a JWT. They never appear in an error or a log line.
	JWT, Seed      string
	User, Password string
	// TLS encrypts the connection when set.
	TLS *tls.Config
	// AckTimeout is how long a message's ack may take (async.timeout.ms).
	AckTimeout time.Duration
	// Sync publishes one message at a time, each after the last one's ack
	// (async.enabled=false).
	Sync bool
	// MaxPending bounds the messages waiting for their ack; Produce blocks
	// beyond it (default 5,000).
	MaxPending int
	// MaxMessageBytes caps a message's size below what the server and the
	// stream accept (0: theirs).
	MaxMessageBytes int
	// ConnectTimeout bounds connecting to a server (default 5s).
	ConnectTimeout time.Duration
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.StreamName == "" {
		c.StreamName = DefaultStreamName
	}
	if len(c.Subjects) == 0 {
		c.Subjects = []string{DefaultSubjects}
	}
	if c.Storage == "" {
		c.Storage = DefaultStorage
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if len(c.URLs) == 0 {
		return errors.New("nats: a server URL is required")
	}
	for _, u := range c.URLs {
		if strings.TrimSpace(u) == "" {
			return errors.New("nats: empty server URL")
		}
	}
	if c.AckTimeout <= 0 || c.MaxPending < 1 || c.ConnectTimeout <= 0 {
		return errors.New("nats: ack timeout, pending bound and connect timeout must be positive")
	}
	if c.MaxMessageBytes < 0 {
		return fmt.Errorf("nats: max message bytes %d: must not be negative", c.MaxMessageBytes)
	}
	if (c.JWT == "") != (c.Seed == "") {
		return errors.New("nats: auth.jwt and auth.seed go together")
	}
	if c.User == "" && c.Password != "" {
		return errors.New("nats: a password was given without a user")
	}
	for _, s := range c.Subjects {
		if strings.TrimSpace(s) == "" {
			return errors.New("nats: empty stream subject")
		}
	}
	return nil
}
