// Package pubsub publishes records to Google Cloud Pub/Sub, as Debezium
// Server's pubsub sink does: each record to the topic named like its own
// in the project, its value as the data, its headers as attributes, and
// with ordering (the default) its key's text as the ordering key
// (NullKey for a record without one, or one fixed key).
//
// It publishes over Pub/Sub's REST API, one request at a time, in order,
// each request a topic's messages that arrived meanwhile, up to the batch
// thresholds (inflight.Batch); Pub/Sub takes a request whole or not at
// all, so each ordering key's messages stay in order. A record counts as
// sent once Pub/Sub took it and every record before it, and after a
// request failed none after it counts: the relay sends them again from
// its last confirmed position. Delivery is at-least-once. Google's gRPC
// client would cost every pgoutbox process about 15 MiB more memory, and
// its binary 18 MB, for one sink. It knows nothing of the relay: package
// broker puts it behind the relay's interfaces.
package pubsub

import (
	"errors"
	"net"
	"time"
)

// Debezium Server's defaults (PubSubChangeConsumerConfig).
const (
	DefaultNullKey        = "default"
	DefaultCountThreshold = 100
	DefaultByteThreshold  = 9_500_000
	DefaultTimeout        = 30 * time.Second
)

// DefaultMaxPending bounds the records waiting for Pub/Sub's answer, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// Pub/Sub's limits.
const (
	maxMessageBytes   = 10 << 20
	maxOrderingKey    = 1024
	maxAttributes     = 100
	maxAttributeKey   = 256
	maxAttributeValue = 1024
)

// Config configures the publisher.
type Config struct {
	// ProjectID holds every topic (project.id); empty: the credentials'
	// project, as Google's clients detect it.
	ProjectID string
	// Address is an emulator's host:port, reached without TLS or
	// credentials (address); Region names a regional endpoint
	// (<region>-pubsub.googleapis.com) instead of the global one.
	Address, Region string
	// Ordering gives each message an ordering key (ordering.enabled):
	// OrderingKey for all, else the record's key, NullKey without one.
	Ordering             bool
	OrderingKey, NullKey string
	// CountThreshold and ByteThreshold bound a request
	// (batch.element.count.threshold, batch.request.byte.threshold).
	CountThreshold, ByteThreshold int
	// Timeout bounds each request (wait.message.delivery.timeout.ms).
	Timeout time.Duration
	// MaxPending bounds the records waiting; Produce blocks beyond it.
	MaxPending int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.NullKey == "" {
		c.NullKey = DefaultNullKey
	}
	if c.CountThreshold == 0 {
		c.CountThreshold = DefaultCountThreshold
	}
	if c.ByteThreshold == 0 {
		c.ByteThreshold = DefaultByteThreshold
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
	if c.Address != "" {
		if _, _, err := net.SplitHostPort(c.Address); err != nil {
			return errors.New("pubsub: the address is not host:port (address)")
		}
	}
	switch {
	case c.Address != "" && c.Region != "":
		return errors.New("pubsub: an emulator's address and a region: give one (address, region)")
	case len(c.OrderingKey) > maxOrderingKey || len(c.NullKey) > maxOrderingKey:
		return errors.New("pubsub: an ordering key has at most 1024 bytes (ordering.key, null.key)")
	case c.CountThreshold < 1 || c.CountThreshold > 1000 || c.ByteThreshold < 1:
		return errors.New("pubsub: the batch thresholds must be positive, at most 1000 messages (batch.*)")
	case c.Timeout <= 0 || c.MaxPending < 1:
		return errors.New("pubsub: the delivery timeout and the pending bound must be positive")
	}
	return nil
}
