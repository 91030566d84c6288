// Package redisstream appends records to Redis streams as Debezium Server's
// redis sink does (XADD <topic> * with the record's key and value, in its
// compact or extended entry format), and more safely: a batch of entries
// goes in one MULTI/EXEC, so that it is written whole or not at all; any
// error reply fails the record it answers; with WAIT, nothing is
// acknowledged before a replica has it; and after a lost connection it
// finds which entries were written, so that what the relay sends again is
// not written twice (within a window of recent event ids).
//
// One goroutine writes, batch after batch, on one connection; a record's
// promise runs once its batch's reply came, in produce order. It knows
// nothing of the relay: package broker puts it behind the relay's
// interfaces.
package redisstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The entry formats (message.format).
const (
	// FormatCompact: one field, the record's key, holding its value.
	FormatCompact = "compact"
	// FormatExtended: the fields key and value, then one per header,
	// named in upper case.
	FormatExtended = "extended"
)

// Debezium Server's defaults (RedisCommonConfig,
// RedisStreamChangeConsumerConfig).
const (
	DefaultConnectTimeout = 2 * time.Second
	DefaultSocketTimeout  = 2 * time.Second
	DefaultWaitTimeout    = time.Second
	DefaultWaitRetryDelay = time.Second
	DefaultBatchSize      = 500
	DefaultNull           = "default"
	DefaultBufferFillRate = 30_000
)

// DefaultMaxPending bounds the records waiting for their reply, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// DefaultWindow is how many event ids of written entries are remembered,
// so that what the relay sends again after a failure is not written
// twice.
const DefaultWindow = 100_000

// Config configures the publisher.
type Config struct {
	// Addrs are the servers, host:port (address: one, or in cluster mode
	// a comma-separated list of some of its nodes; without it, only the
	// first is used).
	Addrs []string
	// Cluster speaks to a Redis Cluster (cluster.enabled).
	Cluster bool
	// User and Password authenticate (user, password); they never appear
	// in an error or a log line.
	User, Password string
	// DB is the database (db.index), 0-15, standalone only.
	DB int
	// TLS encrypts the connection when set (ssl.enabled).
	TLS *tls.Config
	// ConnectTimeout bounds connecting, SocketTimeout a reply
	// (connection.timeout.ms, socket.timeout.ms).
	ConnectTimeout, SocketTimeout time.Duration
	// Wait waits after each batch until a replica acknowledged it (WAIT 1
	// WaitTimeout, repeated every WaitRetryDelay until one did)
	// (wait.enabled, wait.timeout.ms, wait.retry.delay.ms).
	Wait                        bool
	WaitTimeout, WaitRetryDelay time.Duration
	// BatchSize bounds the entries of one MULTI/EXEC (batch.size).
	BatchSize int
	// NullKey is the key of a record without one, NullValue the value of
	// a tombstone (null.key, null.value).
	NullKey, NullValue string
	// Format is FormatCompact (default) or FormatExtended
	// (message.format).
	Format string
	// SkipPrefix, set, acknowledges without writing every record whose
	// stream starts with it, as Debezium Server's sink drops them with
	// skip.heartbeat.messages (its topic.heartbeat.prefix): heartbeats,
	// and any other record of such a stream.
	SkipPrefix string
	// MemoryLimitMB caps the server's memory that writing may fill when
	// the server sets no maxmemory, or a lower one than it does; writing
	// pauses while used memory and BufferFillRate times the next entry's
	// size reach the limit (memory.limit.mb, buffer.fill.rate: Debezium
	// Server's default is DefaultBufferFillRate).
	MemoryLimitMB  int
	BufferFillRate int
	// MaxPending bounds the records waiting for their reply; Produce
	// blocks beyond it (default 5,000).
	MaxPending int
	// MaxEntryBytes caps an entry's size (its fields and values) below
	// what the server accepts (0: the server's proto-max-bulk-len for
	// each part).
	MaxEntryBytes int
	// Window is how many event ids of written entries are remembered
	// (default 100,000; negative: none).
	Window int
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.SocketTimeout == 0 {
		c.SocketTimeout = DefaultSocketTimeout
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	if c.WaitRetryDelay == 0 {
		c.WaitRetryDelay = DefaultWaitRetryDelay
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	// Debezium Server reads an empty value as unset: the default.
	if c.NullKey == "" {
		c.NullKey = DefaultNull
	}
	if c.NullValue == "" {
		c.NullValue = DefaultNull
	}
	if c.Format == "" {
		c.Format = FormatCompact
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if len(c.Addrs) == 0 {
		return errors.New("redis: a server address is required")
	}
	for _, a := range c.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return fmt.Errorf("redis: address %q: want host:port", a)
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("redis: address %q: the port is not a number from 1 to 65535", a)
		}
	}
	if c.DB < 0 || c.DB > 15 {
		return fmt.Errorf("redis: db.index %d: want 0 to 15", c.DB)
	}
	if c.DB != 0 && c.Cluster {
		return errors.New("redis: a cluster has only database 0 (db.index)")
	}
	if c.Wait && c.Cluster {
		return errors.New("redis: wait.enabled with cluster.enabled: WAIT answers for one connection's writes, and a cluster's batches go to several nodes, " +
			"so no replica's acknowledgement could be waited for (Debezium Server skips WAIT in a cluster and confirms without it)")
	}
	if c.ConnectTimeout <= 0 || c.SocketTimeout <= 0 || c.WaitTimeout <= 0 || c.WaitRetryDelay <= 0 {
		return errors.New("redis: the connection, socket and wait timeouts and the wait retry delay must be positive")
	}
	if c.BatchSize < 1 || c.MaxPending < 1 {
		return errors.New("redis: batch.size and the pending bound must be positive")
	}
	if c.Format != FormatCompact && c.Format != FormatExtended {
		return fmt.Errorf("redis: message.format %q: want compact or extended", c.Format)
	}
	if c.MemoryLimitMB < 0 || c.BufferFillRate < 0 {
		return errors.New("redis: memory.limit.mb and buffer.fill.rate must not be negative")
	}
	if c.MaxEntryBytes < 0 {
		return fmt.Errorf("redis: max entry bytes %d: must not be negative", c.MaxEntryBytes)
	}
	return nil
}

// SplitAddrs splits address as Debezium Server reads it: comma-separated
// host:port pairs.
func SplitAddrs(address string) []string {
	var out []string
	for _, a := range strings.Split(address, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
