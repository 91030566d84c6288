// Package pulsar publishes records to Apache Pulsar, as Debezium Server's
// pulsar sink does: each record to the topic named like its own in the
// configured tenant and namespace, its key's text as the message key
// (NullKey for a record without one), its headers as properties, its
// value as the payload: a STRING-schema message for a format of text, a
// message without schema for one of bytes. A tombstone is an empty
// payload, which Pulsar's compaction takes as the key's deletion (the Go
// client cannot mark a value null, as Debezium Server's Java client
// does).
//
// One producer per topic, batching as the Java client does; a record
// counts as sent once the broker confirmed it and every record before it
// (inflight.Confirms), and after one failed none after it counts: the
// relay sends them again from its last confirmed position. Delivery is
// at-least-once. It knows nothing of the relay: package broker puts it
// behind the relay's interfaces.
package pulsar

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Debezium Server's defaults (PulsarChangeConsumerConfig).
const (
	DefaultTenant    = "public"
	DefaultNamespace = "default"
	DefaultNullKey   = "default"
)

// DefaultMaxMessageBytes is a Pulsar broker's maxMessageSize unless it
// was set otherwise: a larger payload is refused by Fits.
const DefaultMaxMessageBytes = 5 << 20

// DefaultSendTimeout bounds each message's wait for its confirm.
const DefaultSendTimeout = 30 * time.Second

// DefaultMaxPending bounds the records waiting for their confirm, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// Config configures the publisher.
type Config struct {
	// ServiceURL is the broker's, pulsar:// or pulsar+ssl://
	// (client.serviceUrl). It never appears in an error or a log line.
	ServiceURL string
	// Tenant and Namespace hold every topic (tenant, namespace).
	Tenant, Namespace string
	// NullKey is the key of a record without one (null.key).
	NullKey string
	// Text sends the value as a STRING-schema message, as Debezium
	// Server does for a format of text (json, simplestring,
	// cloudevents); otherwise as bytes without schema.
	Text bool
	// KeyBased batches each key's messages apart
	// (producer.batcherBuilder KEY_BASED), for a Key_Shared consumer.
	KeyBased bool
	// Token authenticates with a JWT (authParams token:...); TokenFile
	// reads it from a file (file:...).
	Token, TokenFile string
	// TLSTrustCertsFile holds the CAs a pulsar+ssl:// broker is checked
	// against (tlsTrustCertsFilePath); TLSAllowInsecure skips the check
	// (tlsAllowInsecureConnection); TLSValidateHostname checks the
	// certificate's name (tlsHostnameVerificationEnable).
	TLSTrustCertsFile   string
	TLSAllowInsecure    bool
	TLSValidateHostname bool
	// MaxMessageBytes is the largest payload sent; a broker whose limit is
	// lower refuses a larger one, which is then refused by Fits.
	MaxMessageBytes int
	// SendTimeout bounds each message's wait for its confirm (timeout).
	SendTimeout time.Duration
	// MaxPending bounds the records waiting; Produce blocks beyond it.
	MaxPending int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Tenant == "" {
		c.Tenant = DefaultTenant
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.NullKey == "" {
		c.NullKey = DefaultNullKey
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
}

// Validate reports the first invalid field; it never shows the URL.
func (c Config) Validate() error {
	u, err := url.Parse(c.ServiceURL)
	switch {
	case c.ServiceURL == "":
		return errors.New("pulsar: no service URL (debezium.sink.pulsar.client.serviceUrl, --pulsar-url)")
	case err != nil || (u.Scheme != "pulsar" && u.Scheme != "pulsar+ssl") || u.Host == "":
		return errors.New("pulsar: the service URL is not pulsar://host:port or pulsar+ssl://host:port")
	case strings.Contains(c.Tenant, "/") || strings.Contains(c.Namespace, "/") || c.Tenant == "" || c.Namespace == "":
		return fmt.Errorf("pulsar: tenant %q and namespace %q: each a name without '/'", c.Tenant, c.Namespace)
	case c.Token != "" && c.TokenFile != "":
		return errors.New("pulsar: a token and a token file: give one")
	case c.MaxMessageBytes < 1 || c.SendTimeout <= 0 || c.MaxPending < 1:
		return errors.New("pulsar: the largest message, the send timeout and the pending bound must be positive")
	}
	return nil
}
