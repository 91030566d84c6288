// Package sns publishes records to Amazon SNS topics, as Debezium Server's
// sns sink does: each record to the topic its destination names (an ARN
// as it is, or after topic.arn.prefix, or else topic.arn), its value as
// the message and its headers as String message attributes; on a FIFO
// topic (an ARN ending in .fifo) in the message group of its
// fifo.message.group.id.header header, or else of its key. It publishes
// with PublishBatch, one request at a time, in order, and gives each FIFO
// message its event id as the deduplication id (unless the configured
// header has one), so that SNS drops a copy sent again within its
// five-minute window.
//
// A standard topic keeps no order; a FIFO topic keeps each group's, and a
// group appears at most once in a request (inflight.Batch): SNS answers
// each entry on its own, and a group's later message published ahead of
// one that failed could not be taken back. A record counts as sent once
// it and every record before it were; after a request failed none after
// it counts, and the relay sends them again from its last confirmed
// position. It knows nothing of the relay: package broker puts it behind
// the relay's interfaces.
package sns

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/pgoutbox/pgoutbox/awsbatch"
)

// SNS's limits.
const (
	// MaxBatch is the most messages one PublishBatch request takes.
	MaxBatch = 10
	// MaxMessageBytes is a message's, and a request's, most bytes: the
	// messages with their attributes' names, types and values.
	MaxMessageBytes = 256 << 10
	// MaxAttributes is the most message attributes a message carries.
	MaxAttributes = 10
)

// Debezium Server's defaults (SnsChangeConsumerConfig).
const (
	DefaultGroupHeader = "aggregateId"
	DefaultGroupID     = "default"
	DefaultRetries     = 5
)

// Defaults of pgoutbox's own.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxPending = 5_000
)

// Config configures the publisher.
type Config struct {
	// Region is the topics' region.
	Region string
	// Endpoint replaces the region's endpoint (endpoint): a VPC endpoint,
	// or an emulator.
	Endpoint string
	// Credentials sign the requests.
	Credentials aws.CredentialsProvider
	// TopicARN is where a record goes whose destination is not an ARN,
	// when TopicARNPrefix is empty (topic.arn).
	TopicARN string
	// TopicARNPrefix, set, makes a destination that is not an ARN the
	// ARN TopicARNPrefix+destination (topic.arn.prefix).
	TopicARNPrefix string
	// DeadLetterARN is the topic dead letters go to; "" keeps them in
	// pgoutbox's dead-letter table only (pgoutbox dlq list).
	DeadLetterARN string
	// DeadLetterTopic is the relay's dead-letter topic, which tells a dead
	// letter.
	DeadLetterTopic string
	// GroupHeader names the header whose value is a FIFO message's group
	// (fifo.message.group.id.header); without it the group is the key's
	// text, and without a key GroupID (fifo.default.group.id).
	GroupHeader, GroupID string
	// DedupHeader names the header whose value is a FIFO message's
	// deduplication id (fifo.message.dedup.id.header); without one the
	// id is the event id.
	DedupHeader string
	// Retries is how many times a request's unsent entries are sent
	// before the request counts as failed (default.retries).
	Retries int
	// Timeout bounds each request.
	Timeout time.Duration
	// MaxPending bounds the records waiting; Produce blocks beyond it.
	MaxPending int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.GroupHeader == "" {
		c.GroupHeader = DefaultGroupHeader
	}
	if c.GroupID == "" {
		c.GroupID = DefaultGroupID
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

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Region == "":
		return errors.New("sns: no region: set the region (debezium.sink.sns.region, --sns-region) or AWS_REGION")
	case c.Credentials == nil:
		return errors.New("sns: no credentials")
	case c.Retries < 1:
		return fmt.Errorf("sns: retries %d: at least 1 (default.retries)", c.Retries)
	case c.Timeout <= 0 || c.MaxPending < 1:
		return errors.New("sns: the timeout and the pending bound must be positive")
	}
	if why := awsbatch.CheckID(c.GroupID); why != "" {
		return fmt.Errorf("sns: default message group %q: %s (fifo.default.group.id)", c.GroupID, why)
	}
	for _, a := range []struct{ what, arn string }{{"topic ARN (topic.arn)", c.TopicARN}, {"dead-letter topic ARN", c.DeadLetterARN}} {
		if a.arn == "" {
			continue
		}
		if why := ARNProblem(a.arn); why != "" {
			return fmt.Errorf("sns: the %s %q: %s", a.what, a.arn, why)
		}
	}
	if c.TopicARNPrefix != "" && !strings.HasPrefix(c.TopicARNPrefix, "arn:") {
		return fmt.Errorf("sns: the topic ARN prefix %q does not start with arn: (topic.arn.prefix, e.g. arn:aws:sns:us-east-1:123456789012:)", c.TopicARNPrefix)
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("sns: the endpoint is not an http:// or https:// URL (endpoint)")
		}
	}
	return nil
}

// ARNProblem says why s is not a topic's ARN, "" when it is:
// arn:<partition>:sns:<region>:<account>:<name>, the name 1 to 256
// letters, digits, hyphens and underscores, a FIFO topic's with .fifo
// at its end.
func ARNProblem(s string) string {
	parts := strings.Split(s, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "sns" || parts[3] == "" || parts[4] == "" {
		return "not an SNS topic's ARN (arn:aws:sns:<region>:<account>:<topic>)"
	}
	name := strings.TrimSuffix(parts[5], ".fifo")
	if name == "" || len(parts[5]) > 256 {
		return "a topic's name has 1 to 256 characters"
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "a topic's name has only letters, digits, hyphens and underscores (and .fifo at a FIFO topic's end)"
		}
	}
	return ""
}

// fifo tells a FIFO topic's ARN, as Debezium Server tells it.
func fifo(arn string) bool { return strings.HasSuffix(arn, ".fifo") }
