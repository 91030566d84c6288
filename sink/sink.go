// Package sink is the Kafka producer: idempotent, acks from all in-sync
// replicas, an acknowledgement per record, bounded buffering, and a size
// check before a record is handed to the client.
//
// One franz-go client (client.go) serves four types, one per concern,
// which the relay uses through small interfaces of its own so that each
// can be faked:
//   - Kafka (sink.go, limits.go, partition.go): the producer (Produce,
//     Fits, Flush, AbortBuffered, Renew), with the topics' size limits;
//   - Txn (txn.go, hanging.go, orphan.go): transactions (Fence, Begin,
//     Commit, Abort, Probe), and the ranges Kafka left open;
//   - Topics (admin.go): topics and what they hold (EnsureCompactedTopic,
//     LastCommitted);
//   - Health (ping.go): whether a broker answers, and why not.
package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	awssasl "github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/pgoutbox/pgoutbox/rawconn"
)

// DefaultMaxBufferedRecords is Config.MaxBufferedRecords's default.
const DefaultMaxBufferedRecords = 5_000

// DefaultMaxBufferedBytes is Config.MaxBufferedBytes's default; Defaults
// raises it to twice MaxMessageBytes where that is more, so that a larger
// message limit alone never makes the configuration invalid. Small events
// reach MaxBufferedRecords first (5,000 with 200-byte payloads are about
// 2.5 MiB); with 4 KB payloads this bound holds about 1,900 records, and a
// drain's peak RSS fell from 104-139 MB (64 MiB) to 78 MB at the same rate.
const DefaultMaxBufferedBytes = 8 << 20

// Config configures the producer.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// ClientID is the Kafka client id (default "pgoutbox").
	ClientID string
	// Linger is how long a partition waits for more records before sending
	// (default 0: latency first; batches still form while a request is in
	// flight).
	Linger time.Duration
	// MaxBufferedRecords and MaxBufferedBytes bound what waits for an ack;
	// Produce blocks beyond them, which is the pipeline's backpressure
	// (defaults 5,000 records and 8 MiB, or twice MaxMessageBytes if that
	// is more). 5,000 records are still tens of milliseconds of a drain at
	// 100,000 events/s, more than a produce round trip; each costs about
	// 2 KiB of heap while it waits.
	MaxBufferedRecords int
	MaxBufferedBytes   int
	// MaxMessageBytes is the largest record accepted (default 1,000,012,
	// Kafka's default). The broker's own limit for a topic, learned when
	// the topic is first used, applies when it is lower. It bounds each
	// partition's batch too: franz-go refuses a record larger than its
	// batch limit, where Kafka's Java producer sends it alone.
	MaxMessageBytes int
	// Compression is the codec batches are compressed with
	// (producer.go): none (the default: latency-first batches are small,
	// and compressing them costs CPU on every record), gzip, snappy, lz4
	// or zstd. CompressionLevel is the codec's level as Kafka's producer
	// takes it (compression.<codec>.level); 0 is the codec's default.
	Compression      string
	CompressionLevel int
	// MaxRequestBytes bounds what one produce request to a broker holds
	// (default 100 MiB, the broker's socket.request.max.bytes); at least
	// MaxMessageBytes.
	MaxRequestBytes int
	// RequestTimeout is how long a broker may take to answer a produce
	// request (default 10s).
	RequestTimeout time.Duration
	// CreateTopics asks the broker to create missing topics (the broker
	// must allow it). Off in the zero value, and Defaults leaves it so; pgoutbox
	// run sets it from --kafka-create-topics, whose default is true.
	CreateTopics bool
	// TopicCreation, with CreateTopics, creates each missing topic before
	// the first record to it is produced, with its group's partitions,
	// replication factor and configs (topics.go), as Kafka Connect's
	// topic.creation.* do; nil leaves missing topics to the broker's
	// auto-creation.
	TopicCreation *TopicCreation
	// SASL authenticates to the brokers when Mechanism is set.
	SASL SASL
	// TLS encrypts the connections when set; nil means plaintext. There is
	// no fallback to plaintext when the handshake fails.
	TLS *tls.Config
	// DialTimeout bounds connecting to a broker, TLS handshake included
	// (default 10s).
	DialTimeout time.Duration
	// TransactionalID makes the producer transactional (txn.go): records
	// are produced between Begin and Commit, and a producer started
	// later with the same id fences this one. Empty: idempotent only.
	TransactionalID string
	// TransactionTimeout is how long the broker lets a transaction stay
	// open before it aborts it (default 60s): what a reader with
	// isolation.level=read_committed may wait behind a relay that died
	// with a transaction open and is not restarted.
	TransactionTimeout time.Duration
	// PositionTopic is where a transaction's record of what it published
	// goes (exactly-once). A transaction left open there after its
	// coordinator moved on is committed only when it is known to have
	// committed (hanging.go).
	PositionTopic string
}

// SASL mechanisms.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
	MechanismAWSMSKIAM   = "AWS_MSK_IAM"
)

// SASL is a SASL mechanism and its credentials: a username and password
// (PLAIN, SCRAM), a token endpoint (OAUTHBEARER) or AWS credentials
// (AWS_MSK_IAM). No secret appears in an error or a log line.
type SASL struct {
	Mechanism, Username, Password string
	OAuth                         *OAuth
	// AWS gives the credentials each AWS_MSK_IAM authentication signs
	// with (package awsauth: AWS's default chain).
	AWS aws.CredentialsProvider
}

func (s SASL) mechanism() (sasl.Mechanism, error) {
	switch strings.ToUpper(s.Mechanism) {
	case "":
		return nil, nil
	case MechanismPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case MechanismScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case MechanismScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	case MechanismOAuthBearer:
		if s.OAuth == nil {
			return nil, errors.New("SASL OAUTHBEARER needs a token endpoint")
		}
		t, ext := newTokens(*s.OAuth), s.OAuth.Extensions
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			token, err := t.get(ctx)
			return oauth.Auth{Token: token, Extensions: ext}, err
		}), nil
	case MechanismAWSMSKIAM:
		if s.AWS == nil {
			return nil, errors.New("SASL AWS_MSK_IAM needs AWS credentials")
		}
		return awssasl.ManagedStreamingIAM(func(ctx context.Context) (awssasl.Auth, error) {
			c, err := s.AWS.Retrieve(ctx)
			if err != nil {
				return awssasl.Auth{}, &AWSCredentialsError{Err: err}
			}
			return awssasl.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "pgoutbox"}, nil
		}), nil
	}
	return nil, fmt.Errorf("SASL mechanism %q: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM", s.Mechanism)
}

// who is whom the mechanism authenticates, for errors.
func (s SASL) who() string {
	switch strings.ToUpper(s.Mechanism) {
	case MechanismOAuthBearer:
		return fmt.Sprintf("OAuth client %q", s.OAuth.ClientID)
	case MechanismAWSMSKIAM:
		return "the AWS credentials"
	}
	return fmt.Sprintf("user %q", s.Username)
}

// validate checks that the mechanism has its credentials, and only its.
func (s SASL) validate() error {
	if _, err := s.mechanism(); err != nil {
		return err
	}
	mech := strings.ToUpper(s.Mechanism)
	password := mech == MechanismPlain || mech == MechanismScramSHA256 || mech == MechanismScramSHA512
	switch {
	case password && (s.Username == "" || s.Password == ""):
		return errors.New("SASL needs a username and a password")
	case !password && (s.Username != "" || s.Password != ""):
		if mech == "" {
			return errors.New("a Kafka username or password was given without a SASL mechanism")
		}
		return fmt.Errorf("SASL %s takes no username or password", mech)
	case mech != MechanismOAuthBearer && s.OAuth != nil:
		return errors.New("an OAuth token endpoint was given without SASL OAUTHBEARER")
	case mech == MechanismOAuthBearer:
		u, err := url.Parse(s.OAuth.TokenURL)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("OAuth token endpoint %q: want an http or https URL", redactURL(s.OAuth.TokenURL))
		}
	}
	return nil
}

// AWSCredentialsError is AWS's default chain finding no credentials, or
// failing to refresh them.
type AWSCredentialsError struct{ Err error }

func (e *AWSCredentialsError) Error() string {
	return fmt.Sprintf("AWS credentials for AWS_MSK_IAM: %v", e.Err)
}

func (e *AWSCredentialsError) Unwrap() error { return e.Err }

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.ClientID == "" {
		c.ClientID = "pgoutbox"
	}
	if c.MaxBufferedRecords == 0 {
		c.MaxBufferedRecords = DefaultMaxBufferedRecords
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1_000_012
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = max(DefaultMaxBufferedBytes, 2*c.MaxMessageBytes)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = time.Minute
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("kafka brokers are required")
	}
	for _, b := range c.Brokers {
		if b == "" {
			return errors.New("kafka brokers: empty address")
		}
	}
	if c.Linger < 0 || c.Linger > time.Minute {
		return fmt.Errorf("linger %s: must be between 0 and 1m", c.Linger)
	}
	if c.MaxBufferedRecords < 1 || c.MaxBufferedBytes < 1 {
		return errors.New("buffer limits must be positive")
	}
	if c.MaxMessageBytes < 512 || c.MaxMessageBytes > 1<<30 {
		return fmt.Errorf("max message bytes %d: must be between 512 and 1 GiB", c.MaxMessageBytes)
	}
	if c.MaxBufferedBytes < c.MaxMessageBytes {
		return fmt.Errorf("max buffered bytes %d is smaller than max message bytes %d", c.MaxBufferedBytes, c.MaxMessageBytes)
	}
	if err := c.SASL.validate(); err != nil {
		return err
	}
	if err := c.validateProducer(); err != nil {
		return err
	}
	if c.TransactionalID != "" && (c.TransactionTimeout < time.Second || c.TransactionTimeout > 15*time.Minute) {
		return fmt.Errorf("transaction timeout %s: must be between 1s and 15m", c.TransactionTimeout)
	}
	return nil
}

// Kafka produces records to Kafka. Its transactions (Txn), its topics
// (Topics) and its health (Health) are types of their own, over the same
// client.
type Kafka struct {
	c      *client
	limits *limits
	// parts are the partition counts of topics that records name a
	// partition of (partition.go).
	parts partitionCounts

	// gate is the context every record is produced with: AbortBuffered,
	// or a failed record of an idempotent producer, cancels it, so that
	// nothing produced since goes out, and Resume and Renew replace it.
	gate atomic.Pointer[gate]

	abortMu sync.Mutex
	aborts  []chan struct{} // AbortBuffered's goroutines, closed when done

	txn    *Txn // nil for an idempotent producer
	topics *Topics
	health *Health
	// create creates missing topics (topics.go); nil without
	// Config.TopicCreation.
	create *creator
}

// newTopicLookups is how many metadata lookups may find a topic that is
// created on first use missing before its records fail: about a minute
// (franz-go backs off between them; 16 took 47 s against Apache Kafka).
const newTopicLookups = 19

// New creates a producer. It does not contact the brokers; Ping does.
func New(cfg Config, log *slog.Logger) (*Kafka, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &client{log: log}
	c.life, c.stop = context.WithCancel(context.Background())
	written := new(writtenTopics)
	k := &Kafka{c: c, limits: newLimits(c, cfg.MaxMessageBytes, written)}
	k.health = &Health{c: c, brokers: cfg.Brokers, sasl: cfg.SASL.Mechanism != "", tls: cfg.TLS != nil,
		mechanism: strings.ToUpper(cfg.SASL.Mechanism), who: cfg.SASL.who(), clientCert: cfg.TLS != nil && len(cfg.TLS.Certificates) > 0,
		dialTimeout: cfg.DialTimeout, dial: dialer(cfg), written: written, positionTopic: cfg.PositionTopic}
	k.topics = &Topics{c: c, brokers: cfg.Brokers}
	if cfg.CreateTopics && cfg.TopicCreation != nil {
		if err := cfg.TopicCreation.compile(); err != nil {
			c.stop()
			return nil, err
		}
		k.create = newCreator(c, cfg.TopicCreation)
	}
	produce, err := cfg.producerOpts()
	if err != nil {
		c.stop()
		return nil, err
	}
	c.opts = []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.Linger),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.MaxBufferedBytes(cfg.MaxBufferedBytes),
		// Batches never exceed what the topic accepts: franz-go asks
		// once per partition, after Fits learned the topic's limit.
		kgo.ProducerBatchMaxBytesFn(func(topic string) int32 { return int32(k.limits.cached(topic)) }),
		kgo.RecordPartitioner(newPartitioner()),
	}
	if cfg.TransactionalID == "" {
		// A record after a failed one must not go out ahead of what the
		// caller makes of the failure: the gate closes as the partition
		// fails, not when its promise runs. A transaction needs no gate:
		// a failed record aborts it, and what went out with it.
		c.opts = append(c.opts, kgo.WithLogger(logger{log: log, idFailed: func() { k.gate.Load().cancel() }}))
	} else {
		c.opts = append(c.opts, kgo.WithLogger(logger{log: log}))
	}
	c.opts = append(c.opts, produce...)
	if cfg.CreateTopics {
		// A topic created on first use takes a while to show in the
		// metadata of a busy cluster: franz-go's default of four
		// lookups failed the records after 2.2 s (Apache Kafka, KRaft,
		// 2 busy cores, many topics created at once), and the relay
		// sent its batch again: duplicates, and a reconnection's delay.
		// The Java producer waits for it up to max.block.ms, a minute.
		c.opts = append(c.opts, kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(newTopicLookups))
	}
	if cfg.TransactionalID != "" {
		book := new(txnBook)
		settle := &settler{c: c, txnID: cfg.TransactionalID, positionTopic: cfg.PositionTopic, book: book, written: written}
		k.txn = &Txn{c: c, producer: k, id: cfg.TransactionalID, timeout: cfg.TransactionTimeout, book: book, settle: settle}
		k.topics.book, k.topics.settle = book, settle
		// The producer's client counts broker failures (hanging.go);
		// the readers built from c.opts do not.
		c.hook = func(life context.Context) kgo.Hook { return failureHook{settle, life} }
		c.opts = append(c.opts, kgo.TransactionalID(cfg.TransactionalID), kgo.TransactionTimeout(cfg.TransactionTimeout))
	}
	if m, _ := cfg.SASL.mechanism(); m != nil {
		c.opts = append(c.opts, kgo.SASL(m))
	}
	c.opts = append(c.opts, kgo.Dialer(k.health.dial))
	cl, err := c.next()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	c.cur.Store(cl)
	k.gate.Store(newGate())
	return k, nil
}

// Txn is the producer's transactions; nil for an idempotent producer.
func (k *Kafka) Txn() *Txn { return k.txn }

// Topics is what the producer reads and creates of its topics.
func (k *Kafka) Topics() *Topics { return k.topics }

// Ping checks that a broker answers (Health.Ping).
func (k *Kafka) Ping(ctx context.Context) error { return k.health.Ping(ctx) }

// Writable checks the partitions written to (Health.Writable).
func (k *Kafka) Writable(ctx context.Context) error { return k.health.Writable(ctx) }

type gate struct {
	ctx    context.Context
	cancel context.CancelFunc
	// explicit is ctx for records that name their partition.
	explicit context.Context
}

func newGate() *gate {
	ctx, cancel := context.WithCancel(context.Background())
	return &gate{ctx, cancel, context.WithValue(ctx, explicitKey{}, true)}
}

// Resume lets records through again after AbortBuffered, once its abort has
// finished. Call it only while nothing is produced.
func (k *Kafka) Resume() {
	k.waitAborts()
	k.gate.Store(newGate())
}

// AbortBuffered fails, in the background, every record the client holds
// that is not yet sent, and returns at once; Flush, Renew and Close wait
// for it. It is for a refusal seen in a produce callback (which must not
// block). The refused record's partition is safe already: an idempotent
// producer closed the gate as franz-go failed it (logger.idFailed), so a
// record handed over since is not sent ahead of the refused one's dead
// letter. The abort fails what other partitions still hold.
func (k *Kafka) AbortBuffered() {
	// First, at once and without blocking: a batch not yet written whose
	// first record's context is done is failed instead of sent, and the
	// records produced from now on are refused.
	k.gate.Load().cancel()
	client := k.c.load()
	done := make(chan struct{})
	k.abortMu.Lock()
	k.aborts = append(k.aborts, done)
	k.abortMu.Unlock()
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.AbortBufferedRecords(ctx); err != nil {
			k.c.log.Warn("kafka: aborting buffered records", "err", err)
		}
	}()
}

// waitAborts waits for AbortBuffered's goroutines started so far.
func (k *Kafka) waitAborts() {
	k.abortMu.Lock()
	aborts := k.aborts
	k.aborts = nil
	k.abortMu.Unlock()
	for _, done := range aborts {
		<-done
	}
}

// Renew replaces the client with a new one and forgets the learned
// limits, so that they are read again from the broker: franz-go keeps a
// partition's batch limit for the life of its client. Call it only while
// nothing is produced; what the old client still buffered is failed. A
// transaction the old client left open without sending its EndTxn is
// remembered as one nobody committed.
func (k *Kafka) Renew() error {
	k.waitAborts()
	if k.txn != nil {
		if id, epoch, ok := k.txn.Unsent(); ok {
			k.txn.Unended(id, epoch)
		}
	}
	client, err := k.c.next()
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	k.limits.forget()
	k.c.cur.Swap(client).Close()
	k.gate.Store(newGate())
	return nil
}

// Buffered is how many records the client holds that Kafka has not
// acknowledged yet.
func (k *Kafka) Buffered() int64 { return k.c.load().BufferedProduceRecords() }

// Fits returns *TooLargeError when r exceeds what its topic accepts, and
// *PartitionError when it names a partition the topic does not have. With
// Config.TopicCreation it first creates r's topic if it is missing
// (*TopicCreationError when that fails).
func (k *Kafka) Fits(ctx context.Context, r *kgo.Record) error {
	// A topic is created before its limit is read: a topic's own
	// max.message.bytes is among the settings it may be created with.
	if err := k.create.ensure(ctx, r.Topic); err != nil {
		return err
	}
	if n, max := Size(r), k.limits.get(ctx, r.Topic); n > max {
		return &TooLargeError{Topic: r.Topic, Size: n, Max: max}
	}
	return k.checkPartition(ctx, r)
}

// Produce hands r to the client; promise is called once with its ack or
// its failure. It blocks while the buffer is full, until ctx ends. A record
// over the size limit is refused with *TooLargeError, and any record after
// AbortBuffered or a failed record with ErrHalted; promise is not called
// then.
func (k *Kafka) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := k.Fits(ctx, r); err != nil {
		return err
	}
	g := k.gate.Load()
	if g.ctx.Err() != nil {
		return ErrHalted
	}
	if isExplicit(r) {
		r.Context = g.explicit
	} else {
		r.Context = g.ctx
	}
	if k.txn != nil {
		if err := k.txn.firstRecord(ctx); err != nil {
			return err
		}
	}
	k.c.load().Produce(ctx, r, promise)
	return nil
}

// Flush waits until every buffered record is acked or failed.
func (k *Kafka) Flush(ctx context.Context) error {
	err := k.c.load().Flush(ctx)
	k.waitAborts()
	return err
}

// Close fails what is still buffered and closes the connections.
func (k *Kafka) Close() {
	k.c.stop()
	k.waitAborts()
	k.c.load().Close()
	k.limits.lookups.Wait()
}

// Limit is the largest record topic accepts: the configured maximum, or
// the broker's limit for the topic when that is lower (limits.go).
func (k *Kafka) Limit(ctx context.Context, topic string) int { return k.limits.get(ctx, topic) }

// logger passes franz-go's warnings and errors to slog; its info and debug
// lines describe every request and would drown the relay's own. One info
// line is a signal: idFailed, when set, is called when franz-go fails its
// producer id after a record failed.
type logger struct {
	log      *slog.Logger
	idFailed func()
}

// producerIDFailed is what franz-go logs when a produce error fails its
// producer id: from failAllRecords, which fails the partition of a
// refused record, while it still holds the partition, so before any later
// record can join it, and before the next epoch sends anything. It is the
// only sign of a failure franz-go gives in step with its sending (the
// promises run later, on a goroutine of their own);
// TestNoRecordOvertakesARefusal fails should franz-go change it.
const producerIDFailed = "producer ID failed due to a produce error, next produce will reinitialize the producer epoch"

func (l logger) Level() kgo.LogLevel {
	if l.idFailed != nil {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (l logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level > kgo.LogLevelWarn {
		if msg == producerIDFailed && l.idFailed != nil {
			l.idFailed()
		}
		return
	}
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	l.log.Log(context.Background(), lvl, "kafka: "+msg, keyvals...)
}

// dialer connects to a broker as franz-go's own dialer does, TLS included,
// within DialTimeout, over a connection whose reads and writes skip the
// scheduler's system-call path (package rawconn): every produce request
// and its answer cross it.
func dialer(cfg Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := rawconn.Dial(&net.Dialer{Timeout: cfg.DialTimeout})
	if cfg.TLS == nil {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		tcfg := cfg.TLS.Clone()
		if tcfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("broker address %q: %w", addr, err)
			}
			tcfg.ServerName = host
		}
		ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		defer cancel()
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, tcfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}
