// Package pulsar publishes records to Apache Pulsar, as Debezium Server's
// pulsar sink does: each record to the topic named like its own in the
// configured tenant and namespace (a partitioned topic's partition by its
// key, as Pulsar's Java client routes it), its key's text as the message
// key (NullKey for a record without one), its headers as properties, its
// value as the payload: a STRING-schema message for a format of text, a
// message without schema for one of bytes, a tombstone a null value.
//
// It speaks Pulsar's binary protocol itself (wire.go, conn.go): what a
// producer needs, with token authentication and TLS, each message a
// batch of one as the Java client sends it. Pulsar's Go client links
// packages a shipped binary must not (the testing package, Kubernetes'
// client) and costs every process memory. One producer per topic; a
// record counts as sent once the broker confirmed it and every record
// before it (inflight.Confirms), and after one failed none after it
// counts: the relay sends them again from its last confirmed position.
// Delivery is at-least-once. It knows nothing of the relay: package
// broker puts it behind the relay's interfaces.
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
	// (client.serviceUrl); several hosts, comma-separated, are tried in
	// turn. It holds no secret: the token is apart.
	ServiceURL string
	// Tenant and Namespace hold every topic (tenant, namespace).
	Tenant, Namespace string
	// NullKey is the key of a record without one (null.key).
	NullKey string
	// Text sends the value as a STRING-schema message, as Debezium
	// Server does for a format of text (json, simplestring,
	// cloudevents); otherwise as bytes without schema.
	Text bool
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
	_, _, err := serviceHosts(c.ServiceURL)
	switch {
	case c.ServiceURL == "":
		return errors.New("pulsar: no service URL (debezium.sink.pulsar.client.serviceUrl, --pulsar-url)")
	case err != nil:
		return err
	case strings.Contains(c.Tenant, "/") || strings.Contains(c.Namespace, "/") || c.Tenant == "" || c.Namespace == "":
		return fmt.Errorf("pulsar: tenant %q and namespace %q: each a name without '/'", c.Tenant, c.Namespace)
	case c.Token != "" && c.TokenFile != "":
		return errors.New("pulsar: a token and a token file: give one")
	case c.MaxMessageBytes < 1 || c.SendTimeout <= 0 || c.MaxPending < 1:
		return errors.New("pulsar: the largest message, the send timeout and the pending bound must be positive")
	}
	return nil
}

// serviceHosts reads a service URL: its scheme and hosts (host or
// host:port, several comma-separated, as Pulsar's clients take them).
func serviceHosts(s string) (scheme string, hosts []string, err error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != "pulsar" && scheme != "pulsar+ssl") {
		return "", nil, errBadURL
	}
	rest, _, _ = strings.Cut(rest, "/")
	for _, h := range strings.Split(rest, ",") {
		u, err := url.Parse(scheme + "://" + h)
		if err != nil || u.Host != h || u.Hostname() == "" {
			return "", nil, errBadURL
		}
		hosts = append(hosts, h)
	}
	return scheme, hosts, nil
}

var errBadURL = errors.New("pulsar: the service URL is not pulsar://host:port or pulsar+ssl://host:port (several hosts comma-separated)")
