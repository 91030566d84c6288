// Package sqs sends records to an Amazon SQS queue, as Debezium Server's
// sqs sink does: every record to the one queue, its value as the message
// body; on a FIFO queue (a URL ending in .fifo) in the message group the
// configuration names. It sends with SendMessageBatch, one request at a
// time, in order, and on a FIFO queue gives each message its event id as
// the deduplication id, so that SQS drops a copy sent again within its
// five-minute window.
//
// A standard queue keeps no order; a FIFO queue keeps each group's, and
// a group appears at most once in a request (inflight.Batch): SQS answers
// each entry on its own, and a group's later message written ahead of one
// that failed could not be taken back. A record counts as sent once it
// and every record before it were; after a request failed none after it
// counts, and the relay sends them again from its last confirmed
// position. It knows nothing of the relay: package broker puts it behind
// the relay's interfaces.
package sqs

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// SQS's limits.
const (
	// MaxBatch is the most messages one SendMessageBatch request takes.
	MaxBatch = 10
	// DefaultMaxMessageBytes is a queue's MaximumMessageSize unless it
	// says otherwise: a message's and a request's largest body.
	DefaultMaxMessageBytes = 256 << 10
)

// DefaultGroupID is Debezium Server's fifo.message.group.id.
const DefaultGroupID = "cdc-group"

// Defaults of pgoutbox's own.
const (
	DefaultRetries    = 5
	DefaultTimeout    = 30 * time.Second
	DefaultMaxPending = 5_000
)

// Config configures the publisher.
type Config struct {
	// Region is the queue's region.
	Region string
	// Endpoint replaces the region's endpoint (endpoint): a VPC endpoint,
	// or an emulator.
	Endpoint string
	// Credentials sign the requests.
	Credentials aws.CredentialsProvider
	// QueueURL is the queue every record goes to (queue.url).
	QueueURL string
	// DeadLetterURL is the queue dead letters go to; "" keeps them in
	// pgoutbox's dead-letter table only (pgoutbox dlq list).
	DeadLetterURL string
	// DeadLetterTopic is the relay's dead-letter topic, which tells a dead
	// letter.
	DeadLetterTopic string
	// GroupID is a FIFO queue's message group (fifo.message.group.id);
	// GroupByKey puts each record in the group of its key instead (its
	// aggregate), so that a FIFO queue keeps each aggregate's order and
	// consumers may read the groups side by side.
	GroupID    string
	GroupByKey bool
	// MaxMessageBytes is the largest body sent when the queue's own
	// MaximumMessageSize cannot be read; the queue's applies when it can.
	MaxMessageBytes int
	// Retries is how many times a request's unsent entries are sent
	// before the request counts as failed.
	Retries int
	// Timeout bounds each request.
	Timeout time.Duration
	// MaxPending bounds the records waiting; Produce blocks beyond it.
	MaxPending int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.GroupID == "" {
		c.GroupID = DefaultGroupID
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.Retries == 0 {
		c.Retries = DefaultRetries
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
}

// Validate reports the first invalid field; it never shows a URL's
// credentials (a queue URL holds none).
func (c Config) Validate() error {
	switch {
	case c.QueueURL == "":
		return errors.New("sqs: no queue URL (debezium.sink.sqs.queue.url, --sqs-queue-url)")
	case c.Region == "":
		return errors.New("sqs: no region: set the region (debezium.sink.sqs.region, --sqs-region) or AWS_REGION")
	case c.Credentials == nil:
		return errors.New("sqs: no credentials")
	case c.Retries < 1:
		return fmt.Errorf("sqs: retries %d: at least 1", c.Retries)
	case c.MaxMessageBytes < 1:
		return fmt.Errorf("sqs: largest message %d bytes: at least 1", c.MaxMessageBytes)
	case c.Timeout <= 0 || c.MaxPending < 1:
		return errors.New("sqs: the timeout and the pending bound must be positive")
	case len(c.GroupID) > 128:
		return fmt.Errorf("sqs: message group %q: at most 128 characters (fifo.message.group.id)", c.GroupID)
	}
	for _, u := range []struct{ what, url string }{{"queue URL", c.QueueURL}, {"dead-letter queue URL", c.DeadLetterURL}} {
		if u.url == "" {
			continue
		}
		p, err := url.Parse(u.url)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("sqs: the %s %q is not an http:// or https:// URL", u.what, u.url)
		}
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("sqs: the endpoint is not an http:// or https:// URL (endpoint)")
		}
	}
	return nil
}

// fifo tells a FIFO queue's URL, as Debezium Server tells it.
func fifo(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }
