// Package webhook publishes each record as an HTTP POST, as Debezium
// Server's http sink does: the value as the body, with the sink's
// content-type, each header as an X-DEBEZIUM-<NAME> header (its value in
// base64 by default), a tombstone not sent; signed as Standard Webhooks
// sign a message when a secret is given, or with a token of an OAuth2
// token endpoint or a JWT auth server, as Debezium Server's oauth2 and jwt
// authentication ask for it.
//
// Requests go one at a time, in order: a record counts as sent only once
// the endpoint answered 2xx, and after one failed none after it counts as
// sent; the relay sends them again from its last confirmed position. A
// request the endpoint refuses with a 4xx other than 401, 403, 408 or 429
// is that record's: it is dead-lettered when it comes again, so that one
// record the endpoint cannot take never blocks the others. Delivery is
// at-least-once; the Standard Webhooks message id is the event id, by
// which a receiver recognises a copy. With BatchMaxSize, the records that
// waited go together as a JSON array of their values, as Debezium Server's
// sink sends a batch; a refused batch is sent again record by record. It knows nothing of the relay:
// package broker puts it behind the relay's interfaces.
package webhook

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Debezium Server's defaults (HttpChangeConsumerConfig).
const (
	DefaultTimeout      = 60 * time.Second
	DefaultHeaderPrefix = "X-DEBEZIUM-"
	DefaultContentType  = "application/json"
)

// DefaultMaxPending bounds the records waiting to be sent or answered, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// Config configures the publisher.
type Config struct {
	// URL is the endpoint every record is POSTed to. It never appears in
	// an error or a log line (it may hold credentials).
	URL string
	// DeadLetterURL is where dead letters are POSTed; "" keeps them in
	// pgoutbox's dead-letter table only (pgoutbox dlq list).
	DeadLetterURL string
	// DeadLetterTopic is the relay's dead-letter topic, which tells a dead
	// letter.
	DeadLetterTopic string
	// ContentType is every request's content-type.
	ContentType string
	// HeaderPrefix starts each record header's name (headers.prefix).
	HeaderPrefix string
	// RawHeaders sends header values as they are; by default in base64
	// (headers.encode.base64).
	RawHeaders bool
	// WebhookSecret signs each request as Standard Webhooks do
	// ("whsec_" and the base64 of 24 to 64 bytes); "" for none.
	WebhookSecret string
	// OAuth2 gives each request a bearer token; nil for none.
	OAuth2 *OAuth2
	// JWT gives each request a JWT auth server's token; nil for none.
	// One of WebhookSecret, OAuth2 and JWT at most, as Debezium Server's
	// authentication.type chooses one.
	JWT *JWT
	// Timeout bounds each request (timeout.ms).
	Timeout time.Duration
	// TLS configures an https:// endpoint (nil: the system's roots).
	TLS *tls.Config
	// MaxPending bounds the records waiting; Produce blocks beyond it.
	MaxPending int
	// BatchMaxSize, when positive, sends the records that waited while a
	// request was out together, up to this many a request, as a JSON array
	// of their values (batch.enabled, batch.max-size); 0 sends a request
	// per record. Dead letters go one a request.
	BatchMaxSize int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.ContentType == "" {
		c.ContentType = DefaultContentType
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	// Copies: the caller's stay as they were.
	if c.OAuth2 != nil {
		o := *c.OAuth2
		o.defaults()
		c.OAuth2 = &o
	}
	if c.JWT != nil {
		j := *c.JWT
		j.defaults()
		c.JWT = &j
	}
}

// Validate reports the first invalid field; it never shows a URL.
func (c Config) Validate() error {
	for _, u := range []struct{ what, url string }{{"the endpoint URL", c.URL}, {"the dead-letter URL", c.DeadLetterURL}} {
		what := u.what
		if u.url == "" && what == "the dead-letter URL" {
			continue
		}
		p, err := url.Parse(u.url)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("webhook: %s is not an http:// or https:// URL", what)
		}
	}
	if c.Timeout <= 0 || c.MaxPending < 1 {
		return errors.New("webhook: the timeout and the pending bound must be positive")
	}
	if c.BatchMaxSize < 0 {
		return fmt.Errorf("webhook: batch max size %d: 0 for none, or positive (batch.max-size)", c.BatchMaxSize)
	}
	if strings.ContainsAny(c.HeaderPrefix, " \t\r\n:") {
		return fmt.Errorf("webhook: header prefix %q: a header name takes no spaces or colons", c.HeaderPrefix)
	}
	n := 0
	for _, set := range []bool{c.WebhookSecret != "", c.OAuth2 != nil, c.JWT != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("webhook: one authentication at most: a Standard Webhooks secret, OAuth2 or JWT (authentication.type)")
	}
	if c.WebhookSecret != "" {
		if _, err := webhookKey(c.WebhookSecret); err != nil {
			return err
		}
	}
	if c.OAuth2 != nil {
		if err := c.OAuth2.validate(); err != nil {
			return err
		}
	}
	if c.JWT != nil {
		return c.JWT.validate()
	}
	return nil
}

// webhookKey is a Standard Webhooks secret's key.
func webhookKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) < 24 || len(key) > 64 {
		return nil, errors.New("webhook: the webhook secret is not whsec_ and the base64 of 24 to 64 bytes (authentication.webhook.secret)")
	}
	return key, nil
}
