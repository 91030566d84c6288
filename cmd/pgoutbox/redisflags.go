package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/redisstream"
	"github.com/pgoutbox/pgoutbox/schema"
)

// sinkRedis is Debezium Server's name of the Redis Streams sink.
const sinkRedis = "redis"

// redisGuarantee is what the start line says the Redis sink promises.
const redisGuarantee = "at-least-once; each batch written whole (MULTI/EXEC), and what a failure left written is not written again while its event id is among the last ones written"

// redisFlags are the flags of the Redis Streams sink, each Debezium
// Server's debezium.sink.redis.* key of the same name.
type redisFlags struct {
	address, user, password             string
	db                                  int
	tls                                 tlsFiles
	connectTimeout, socketTimeout       time.Duration
	wait, cluster                       bool
	waitTimeout, waitRetryDelay         time.Duration
	batchSize                           int
	nullKey, nullValue, format          string
	skipPrefix                          string
	memoryLimitMB, bufferFillRate, keep int
}

func (r *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.address, "redis-address", "", "--sink redis: the server, host:port; with --redis-cluster some of the cluster's nodes, comma-separated (required; Debezium Server's address)")
	fs.BoolVar(&r.cluster, "redis-cluster", false, "--sink redis: the server is a Redis Cluster (cluster.enabled)")
	fs.StringVar(&r.user, "redis-user", "", "--sink redis: ACL user name (user)")
	fs.StringVar(&r.password, "redis-password", "", "--sink redis: password (password); prefer PGOUTBOX_REDIS_PASSWORD")
	fs.IntVar(&r.db, "redis-db", 0, "--sink redis: the database, 0-15 (db.index)")
	fs.DurationVar(&r.connectTimeout, "redis-connect-timeout", redisstream.DefaultConnectTimeout, "--sink redis: how long connecting may take (connection.timeout.ms)")
	fs.DurationVar(&r.socketTimeout, "redis-socket-timeout", redisstream.DefaultSocketTimeout, "--sink redis: how long a reply may take (socket.timeout.ms)")
	fs.BoolVar(&r.wait, "redis-wait", false, "--sink redis: confirm nothing before a replica acknowledged it: WAIT 1 after each batch, again while none did (wait.enabled)")
	fs.DurationVar(&r.waitTimeout, "redis-wait-timeout", redisstream.DefaultWaitTimeout, "--sink redis: how long one WAIT waits for a replica (wait.timeout.ms)")
	fs.DurationVar(&r.waitRetryDelay, "redis-wait-retry-delay", redisstream.DefaultWaitRetryDelay, "--sink redis: the pause before WAIT is asked again, and while the server's memory is full (wait.retry.delay.ms)")
	fs.IntVar(&r.batchSize, "redis-batch-size", redisstream.DefaultBatchSize, "--sink redis: entries written by one MULTI/EXEC at most (batch.size)")
	fs.StringVar(&r.nullKey, "redis-null-key", redisstream.DefaultNull, "--sink redis: the key of a record without one (null.key)")
	fs.StringVar(&r.nullValue, "redis-null-value", redisstream.DefaultNull, "--sink redis: the value of a tombstone (null.value)")
	fs.StringVar(&r.skipPrefix, "redis-skip-prefix", "", "--sink redis: acknowledge without writing every record whose stream starts with this, as Debezium Server's skip.heartbeat.messages drops those of topic.heartbeat.prefix (a Debezium Server file sets it)")
	fs.StringVar(&r.format, "redis-message-format", redisstream.FormatCompact, "--sink redis: compact (one field, the key, holding the value) or extended (key, value, and each header in upper case) (message.format)")
	fs.IntVar(&r.memoryLimitMB, "redis-memory-limit-mb", 0, "--sink redis: the server memory writing may fill where it sets no maxmemory or a larger one; 0: its maxmemory (memory.limit.mb)")
	fs.IntVar(&r.bufferFillRate, "redis-buffer-fill-rate", redisstream.DefaultBufferFillRate, "--sink redis: writing pauses while used memory plus this many times an entry's size reaches the limit (buffer.fill.rate)")
	fs.IntVar(&r.keep, "redis-dedup-window", redisstream.DefaultWindow, "--sink redis: how many event ids of written entries are remembered, so that what is sent again after a failure is not written twice (0: none)")
	r.tls.register(fs, "redis-tls", "the Redis server")
}

// secrets are the values the logger must mask.
func (r *redisFlags) secrets() []string {
	out := r.tls.secrets()
	if r.password != "" {
		out = append(out, r.password)
	}
	return out
}

// opener is the Redis sink these flags describe. --max-buffered-records
// bounds its records waiting for a reply; --max-message-bytes, when
// given, caps an entry (else the server's proto-max-bulk-len does).
func (r *redisFlags) opener(format schema.Format, maxMessageBytes, maxPending int) (*broker.Redis, error) {
	if r.address == "" {
		return nil, errors.New("--redis-address is required with --sink redis (or PGOUTBOX_REDIS_ADDRESS)")
	}
	if format == schema.CloudEventsBinary {
		return nil, errors.New("--format cloudevents-binary: CloudEvents has no Redis protocol binding; with --sink redis use --format cloudevents, the structured mode (the event as JSON is the entry's value)")
	}
	t, err := r.tls.config()
	if err != nil {
		return nil, err
	}
	window := r.keep
	if window == 0 {
		window = -1 // none
	}
	cfg := redisstream.Config{
		Addrs: redisstream.SplitAddrs(r.address), Cluster: r.cluster, User: r.user, Password: r.password, DB: r.db, TLS: t,
		ConnectTimeout: r.connectTimeout, SocketTimeout: r.socketTimeout,
		Wait: r.wait, WaitTimeout: r.waitTimeout, WaitRetryDelay: r.waitRetryDelay,
		BatchSize: r.batchSize, NullKey: r.nullKey, NullValue: r.nullValue, Format: r.format, SkipPrefix: r.skipPrefix,
		MemoryLimitMB: r.memoryLimitMB, BufferFillRate: r.bufferFillRate,
		MaxPending: maxPending, MaxEntryBytes: maxMessageBytes, Window: window,
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("--sink redis: %w", err)
	}
	return &broker.Redis{Config: cfg}, nil
}
