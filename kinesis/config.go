// Package kinesis publishes records to Amazon Kinesis Data Streams, as
// Debezium Server's kinesis sink does: each record to the stream named
// like its topic, its key's text as the partition key (NullKey for a
// record without a key), its value as the data (none for a tombstone), no
// headers.
//
// Records go out in PutRecords requests, one at a time, in order. A
// partition key appears at most once in a request: Kinesis reports each
// entry's failure on its own, and the entries of a key after a failed one
// would otherwise be written ahead of it. Entries that failed (the
// shard's throughput, an internal failure) are sent again, alone, until
// they are written or Retries attempts have failed; a record counts as
// sent only once it and every record before it were written, and after a
// request failed none after it counts: the relay sends them again from
// its last confirmed position. Delivery is at-least-once; Kinesis has no
// deduplication. It knows nothing of the relay: package broker puts it
// behind the relay's interfaces.
package kinesis

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Kinesis's limits (PutRecords).
const (
	// MaxBatch is the most entries one PutRecords request takes.
	MaxBatch = 500
	// MaxRequestBytes is the most one request's data and partition keys
	// may add up to.
	MaxRequestBytes = 5 << 20
	// DefaultMaxRecordBytes is a record's largest data and partition key
	// together, Kinesis's limit unless the stream was raised above it.
	DefaultMaxRecordBytes = 1 << 20
	// maxPartitionKey is a partition key's most Unicode characters.
	maxPartitionKey = 256
)

// Debezium Server's defaults (KinesisChangeConsumerConfig).
const (
	DefaultNullKey = "default"
	DefaultRetries = 5
)

// DefaultTimeout bounds one request.
const DefaultTimeout = 30 * time.Second

// DefaultMaxPending bounds the records waiting to be sent or written, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// Config configures the publisher.
type Config struct {
	// Region is the streams' region.
	Region string
	// Endpoint replaces the region's endpoint (endpoint): a VPC endpoint,
	// or an emulator.
	Endpoint string
	// Credentials sign the requests.
	Credentials aws.CredentialsProvider
	// NullKey is the partition key of a record without a key (null.key).
	NullKey string
	// BatchSize is the most entries in one request (batch.size).
	BatchSize int
	// Retries is how many times a request's failed entries are sent
	// before the request counts as failed (default.retries).
	Retries int
	// MaxRecordBytes is the largest data and partition key a record may
	// have; a larger one is refused by Fits, before it is sent.
	MaxRecordBytes int
	// Timeout bounds each request.
	Timeout time.Duration
	// MaxPending bounds the records waiting; Produce blocks beyond it.
	MaxPending int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.NullKey == "" {
		c.NullKey = DefaultNullKey
	}
	if c.BatchSize == 0 {
		c.BatchSize = MaxBatch
	}
	if c.Retries == 0 {
		c.Retries = DefaultRetries
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = DefaultMaxRecordBytes
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
		return errors.New("kinesis: no region: set the region (debezium.sink.kinesis.region, --kinesis-region) or AWS_REGION")
	case c.Credentials == nil:
		return errors.New("kinesis: no credentials")
	case c.BatchSize < 1 || c.BatchSize > MaxBatch:
		return fmt.Errorf("kinesis: batch size %d: a request takes 1 to %d records (batch.size)", c.BatchSize, MaxBatch)
	case c.Retries < 1:
		return fmt.Errorf("kinesis: retries %d: at least 1 (default.retries)", c.Retries)
	case c.MaxRecordBytes < 1 || c.MaxRecordBytes > MaxRequestBytes:
		return fmt.Errorf("kinesis: largest record %d bytes: 1 to %d", c.MaxRecordBytes, MaxRequestBytes)
	case c.Timeout <= 0 || c.MaxPending < 1:
		return errors.New("kinesis: the timeout and the pending bound must be positive")
	case len([]rune(c.NullKey)) > maxPartitionKey:
		return fmt.Errorf("kinesis: null key of %d characters: a partition key has at most %d (null.key)", len([]rune(c.NullKey)), maxPartitionKey)
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("kinesis: the endpoint is not an http:// or https:// URL (endpoint)")
		}
	}
	return nil
}
