// Package sink is the Kafka producer: idempotent, acks from all in-sync
// replicas, an acknowledgement per record, bounded buffering, and a size
// check before a record is handed to the client.
package sink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
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
	// the topic is first used, applies when it is lower.
	MaxMessageBytes int
	// CreateTopics asks the broker to create missing topics (the broker
	// must allow it). Off in the zero value, and Defaults leaves it so; pgoutbox
	// run sets it from --kafka-create-topics, whose default is true.
	CreateTopics bool
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
}

// SASL mechanisms.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// SASL is a SASL mechanism and its credentials. The password never
// appears in an error or a log line.
type SASL struct {
	Mechanism, Username, Password string
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
	}
	return nil, fmt.Errorf("SASL mechanism %q: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
}

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
	if _, err := c.SASL.mechanism(); err != nil {
		return err
	}
	if c.SASL.Mechanism != "" && (c.SASL.Username == "" || c.SASL.Password == "") {
		return errors.New("SASL needs a username and a password")
	}
	if c.SASL.Mechanism == "" && (c.SASL.Username != "" || c.SASL.Password != "") {
		return errors.New("a Kafka username or password was given without a SASL mechanism")
	}
	if c.TransactionalID != "" && (c.TransactionTimeout < time.Second || c.TransactionTimeout > 15*time.Minute) {
		return fmt.Errorf("transaction timeout %s: must be between 1s and 15m", c.TransactionTimeout)
	}
	return nil
}

// limitRetry is how long a topic whose limit could not be read uses the
// configured limit before the broker is asked again.
const limitRetry = time.Minute

// topicLimit is the largest record a topic accepts, as learned.
type topicLimit struct {
	max     int
	retryAt time.Time // zero once the broker answered
}

// Kafka produces records to Kafka.
type Kafka struct {
	client      atomic.Pointer[kgo.Client]
	opts        []kgo.Opt
	max         int
	sasl, tls   bool
	brokers     []string
	dialTimeout time.Duration
	log         *slog.Logger

	// limits are the topics' maximum message sizes: read on every
	// record, written once per topic (copy on write).
	limits   atomic.Pointer[map[string]topicLimit]
	lookupMu sync.Mutex // one lookup at a time; serializes writers
	// parts are the partition counts of topics that records name a
	// partition of (partition.go).
	parts partitionCounts

	// gate is the context every record is produced with: AbortBuffered
	// cancels it, so that nothing produced since goes out, and Resume
	// and Renew replace it.
	gate atomic.Pointer[gate]

	abortMu sync.Mutex
	aborts  []chan struct{} // AbortBuffered's goroutines, closed when done

	// txnID is the transactional id; empty for an idempotent producer.
	txnID      string
	txnTimeout time.Duration
	txnBegan   atomic.Int64 // unix nanoseconds of the open transaction's first Produce; 0 before it
	// owner is the producer id and epoch last known to own txnID (after
	// Fence and each commit), endSent whether the open transaction's
	// EndTxn was sent; for ProbeFailed.
	owner   atomic.Pointer[producerEpoch]
	endSent atomic.Bool
}

// New creates a producer. It does not contact the brokers; Ping does.
func New(cfg Config, log *slog.Logger) (*Kafka, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	k := &Kafka{max: cfg.MaxMessageBytes, sasl: cfg.SASL.Mechanism != "", tls: cfg.TLS != nil, log: log,
		brokers: cfg.Brokers, dialTimeout: cfg.DialTimeout}
	k.limits.Store(&map[string]topicLimit{})
	k.opts = []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.Linger),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.MaxBufferedBytes(cfg.MaxBufferedBytes),
		// Batches never exceed what the topic accepts: franz-go asks
		// once per partition, after Fits learned the topic's limit.
		kgo.ProducerBatchMaxBytesFn(func(topic string) int32 { return int32(k.cachedLimit(topic)) }),
		kgo.WithLogger(logger{log}),
		// Latency-first batches are small; compressing them costs CPU
		// on every record and saves nothing.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(newPartitioner()),
	}
	if cfg.CreateTopics {
		k.opts = append(k.opts, kgo.AllowAutoTopicCreation())
	}
	if cfg.TransactionalID != "" {
		k.txnID, k.txnTimeout = cfg.TransactionalID, cfg.TransactionTimeout
		k.opts = append(k.opts, kgo.TransactionalID(cfg.TransactionalID), kgo.TransactionTimeout(cfg.TransactionTimeout))
	}
	if m, _ := cfg.SASL.mechanism(); m != nil {
		k.opts = append(k.opts, kgo.SASL(m))
	}
	k.opts = append(k.opts, kgo.Dialer(dialer(cfg)))
	client, err := kgo.NewClient(k.opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	k.client.Store(client)
	k.gate.Store(newGate())
	return k, nil
}

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
// block): franz-go failed the refused record's partition when the broker
// answered, and a record handed over since would go out in a fresh batch,
// ahead of the refused one's dead letter. Sending waits for a new producer
// id after such a failure, so the abort normally comes first.
func (k *Kafka) AbortBuffered() {
	// First, at once and without blocking: a batch not yet written whose
	// first record's context is done is failed instead of sent, and the
	// records produced from now on are refused. This closes most of the
	// window in which the client, already on a new producer epoch, could
	// send a later record before the abort below takes hold.
	k.gate.Load().cancel()
	client := k.client.Load()
	done := make(chan struct{})
	k.abortMu.Lock()
	k.aborts = append(k.aborts, done)
	k.abortMu.Unlock()
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.AbortBufferedRecords(ctx); err != nil {
			k.log.Warn("kafka: aborting buffered records", "err", err)
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
// nothing is produced; what the old client still buffered is failed.
func (k *Kafka) Renew() error {
	k.waitAborts()
	client, err := kgo.NewClient(k.opts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	k.lookupMu.Lock()
	k.limits.Store(&map[string]topicLimit{})
	k.lookupMu.Unlock()
	k.client.Swap(client).Close()
	k.gate.Store(newGate())
	return nil
}

// Size is an upper bound of a record's encoded size in a batch of its own,
// which is what the broker compares with its message.max.bytes.
func Size(r *kgo.Record) int {
	const batchOverhead, recordOverhead, headerOverhead = 61, 21, 10
	n := batchOverhead + recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += headerOverhead + len(h.Key) + len(h.Value)
	}
	return n
}

// cachedLimit is a topic's limit as known now, without asking anyone.
func (k *Kafka) cachedLimit(topic string) int {
	if l, ok := (*k.limits.Load())[topic]; ok {
		return l.max
	}
	return k.max
}

// Limit is the largest record topic accepts: the configured maximum, or
// the broker's limit for the topic when that is lower. The broker is asked
// when the topic is first used (and again a minute after it could not
// answer); every other call is a map read.
func (k *Kafka) Limit(ctx context.Context, topic string) int {
	l, ok := (*k.limits.Load())[topic]
	if ok && (l.retryAt.IsZero() || time.Now().Before(l.retryAt)) {
		return l.max
	}
	k.lookupMu.Lock()
	defer k.lookupMu.Unlock()
	if l, ok := (*k.limits.Load())[topic]; ok && (l.retryAt.IsZero() || time.Now().Before(l.retryAt)) {
		return l.max
	}
	l = topicLimit{max: k.max}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	broker, err := k.brokerLimit(lctx, topic)
	cancel()
	switch {
	case err != nil:
		l.retryAt = time.Now().Add(limitRetry)
		k.log.Warn("kafka: cannot read the topic's maximum message size; using --max-message-bytes until it can be read",
			"topic", topic, "max_message_bytes", k.max, "err", err)
	case broker > 0 && broker < k.max:
		l.max = broker
		k.log.Info("kafka: the topic accepts smaller records than --max-message-bytes; larger ones are dead-lettered",
			"topic", topic, "max_message_bytes", broker)
	}
	next := make(map[string]topicLimit, len(*k.limits.Load())+1)
	for t, v := range *k.limits.Load() {
		next[t] = v
	}
	next[topic] = l
	k.limits.Store(&next)
	return l.max
}

// brokerLimit reads the topic's max.message.bytes, or the broker's
// message.max.bytes for a topic that does not exist yet (it is created
// with that default); 0 when neither is reported.
func (k *Kafka) brokerLimit(ctx context.Context, topic string) (int, error) {
	adm := kadm.NewClient(k.client.Load())
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, err
	}
	rc, err := rcs.On(topic, nil)
	if err == nil && rc.Err == nil {
		// Set on the topic itself: that is the limit. Otherwise the
		// broker's message.max.bytes is (kfake reports Kafka's default
		// for the topic then, not the broker's setting).
		if n, ok := configInt(rc.Configs, "max.message.bytes", kmsg.ConfigSourceDynamicTopicConfig); ok {
			return n, nil
		}
	} else if rc.Err != nil && !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		return 0, rc.Err
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return 0, err
	}
	for _, b := range brokers {
		if b.Err != nil {
			return 0, b.Err
		}
		if n, ok := configInt(b.Configs, "message.max.bytes"); ok {
			return n, nil
		}
	}
	if n, ok := configInt(rc.Configs, "max.message.bytes"); ok {
		return n, nil
	}
	return 0, nil
}

// configInt reads a positive integer config, from one of sources if any
// are given.
func configInt(cs []kadm.Config, key string, sources ...kmsg.ConfigSource) (int, bool) {
	for _, c := range cs {
		if c.Key == key && c.Value != nil && (len(sources) == 0 || slices.Contains(sources, c.Source)) {
			n, err := strconv.Atoi(*c.Value)
			return n, err == nil && n > 0
		}
	}
	return 0, false
}

// Fits returns *TooLargeError when r exceeds what its topic accepts, and
// *PartitionError when it names a partition the topic does not have.
func (k *Kafka) Fits(ctx context.Context, r *kgo.Record) error {
	if n, max := Size(r), k.Limit(ctx, r.Topic); n > max {
		return &TooLargeError{Topic: r.Topic, Size: n, Max: max}
	}
	return k.checkPartition(ctx, r)
}

// Produce hands r to the client; promise is called once with its ack or
// its failure. It blocks while the buffer is full, until ctx ends. A record
// over the size limit is refused with *TooLargeError, and any record after
// AbortBuffered with ErrHalted; promise is not called then.
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
	if k.txnID != "" && k.txnBegan.Load() == 0 {
		k.txnBegan.Store(time.Now().UnixNano()) // one goroutine produces
	}
	k.client.Load().Produce(ctx, r, promise)
	return nil
}

// Flush waits until every buffered record is acked or failed.
func (k *Kafka) Flush(ctx context.Context) error {
	err := k.client.Load().Flush(ctx)
	k.waitAborts()
	return err
}

// plaintextAfter is how long Ping waits for a TLS answer before it checks
// whether the broker speaks plaintext Kafka instead: a plaintext listener
// takes the ClientHello for the start of a huge request and waits for the
// rest, so the handshake only ends at the dial timeout.
const plaintextAfter = time.Second

// Ping checks that a broker answers. A SASL or TLS failure wraps ErrAuth
// and says which. A broker that drops the connection three times in a row
// while SASL is configured is taken to refuse the credentials (kfake, and
// some proxies, close instead of answering SASL_AUTHENTICATION_FAILED).
// With TLS, a seed broker that answers a plaintext Kafka request is a
// plaintext listener: ErrAuth at once, without waiting for the dial
// timeout. Without TLS, a seed broker that answers one with a TLS alert
// is a TLS listener (Apache Kafka answers so; kfake closes): ErrAuth too.
func (k *Kafka) Ping(ctx context.Context) error {
	if !k.tls {
		err := k.ping(ctx)
		if err == nil || ctx.Err() != nil {
			return k.explain(err)
		}
		if addr, ok := askSeeds(ctx, k.brokers, min(k.dialTimeout, 3*time.Second), tlsAlert); ok {
			return fmt.Errorf("%w: the broker at %s requires TLS: it answered with a TLS alert (add --kafka-tls, and --kafka-tls-ca if its certificate is not signed by a public CA)", ErrAuth, addr)
		}
		return k.explain(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- k.ping(pctx) }()
	var (
		err      error
		finished bool
	)
	select {
	case err = <-done:
		finished = true
		if err == nil {
			return nil
		}
	case <-time.After(plaintextAfter):
	case <-ctx.Done():
	}
	if addr, ok := askSeeds(ctx, k.brokers, min(k.dialTimeout, 3*time.Second), kafkaAnswer); ok {
		cancel()
		if !finished {
			<-done
		}
		return fmt.Errorf("%w: the broker at %s speaks plaintext, not TLS: drop --kafka-tls, or use its TLS listener", ErrAuth, addr)
	}
	if !finished {
		err = <-done
	}
	return k.explain(err)
}

// ping pings, again after a connection closed at once (up to 3 tries);
// a timeout is not tried again.
func (k *Kafka) ping(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = k.client.Load().Ping(ctx); err == nil {
			return nil
		}
		// A connection closed at once shows as EOF, or, when the close
		// came while the request waited, as a dead connection the client
		// would retry: both are tried again, so that the third close says
		// what the listener wants.
		var netErr net.Error
		timeout := errors.As(err, &netErr) && netErr.Timeout() || ctx.Err() != nil
		if timeout || !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !kgo.IsRetryableBrokerErr(err) {
			break
		}
	}
	return err
}

// explain turns a ping's error into one that says what to change. Callers
// say that it is Kafka's.
func (k *Kafka) explain(err error) error {
	if err == nil {
		return nil
	}
	var certErr *tls.CertificateVerificationError
	var recordHeader tls.RecordHeaderError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var netErr net.Error
	var firstEOF *kgo.ErrFirstReadEOF
	eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("%w: SASL authentication failed (check the mechanism, --kafka-username and --kafka-password): %v", ErrAuth, err)
	case k.sasl && k.tls && eof:
		return fmt.Errorf("%w: the broker closed the connection during SASL authentication (check the mechanism, --kafka-username and --kafka-password)", ErrAuth)
	case k.sasl && eof:
		return fmt.Errorf("%w: the broker closed the connection: the SASL credentials are wrong, or it requires TLS (--kafka-tls)", ErrAuth)
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		return fmt.Errorf("%w: the broker's TLS certificate is not trusted (check --kafka-tls-ca and the broker's name): %v", ErrAuth, err)
	case errors.As(err, &recordHeader):
		return fmt.Errorf("%w: the broker does not speak TLS (drop --kafka-tls, or use its TLS listener): %v", ErrAuth, err)
	case k.tls && errors.As(err, &firstEOF):
		// A plaintext listener closes on a ClientHello (Kafka does: the
		// hello reads as an oversized request).
		return fmt.Errorf("%w: the broker closed the connection at the TLS handshake: it does not speak TLS on this port (drop --kafka-tls, or use its TLS listener)", ErrAuth)
	case errors.As(err, &firstEOF):
		// Closed right after the first request, three times: the
		// listener wants SASL or TLS that is not configured.
		return fmt.Errorf("%w: the broker closed the connection after the first request: it requires SASL (--kafka-sasl-mechanism) or TLS (--kafka-tls)", ErrAuth)
	case k.tls && errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("no TLS handshake within the dial timeout: is this the broker's TLS listener? (%v)", err)
	case !k.tls && eof:
		return fmt.Errorf("the broker closed the connection: does it require TLS (--kafka-tls) or SASL (--kafka-sasl-mechanism)? (%v)", err)
	}
	return err
}

// correlation is the id of the ApiVersions request askSeeds sends.
const correlation = 0x70676f78

// kafkaAnswer tells an answer to askSeeds's request with its correlation
// id: a Kafka listener without TLS.
func kafkaAnswer(resp [8]byte) bool {
	return binary.BigEndian.Uint32(resp[4:]) == correlation && binary.BigEndian.Uint32(resp[:4]) >= 4
}

// tlsAlert tells a TLS alert record (content type 21, major version 3): a
// TLS listener that took the request for a broken handshake.
func tlsAlert(resp [8]byte) bool { return resp[0] == 21 && resp[1] == 3 }

// askSeeds sends each seed broker a plaintext ApiVersions request (v0) and
// reports the first whose answer's first 8 bytes match.
func askSeeds(ctx context.Context, brokers []string, timeout time.Duration, match func([8]byte) bool) (string, bool) {
	req := []byte{
		0, 0, 0, 18, // size of what follows
		0, 18, // api key: ApiVersions
		0, 0, // version 0
		0x70, 0x67, 0x6f, 0x78, // correlation id
		0, 8, 'p', 'g', 'o', 'u', 't', 'b', 'o', 'x', // client id
	}
	for _, addr := range brokers {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
		cancel()
		if err != nil {
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(timeout))
		var resp [8]byte
		_, err = conn.Write(req)
		if err == nil {
			// An alert record is 7 bytes: the rest may never come.
			var n int
			n, err = io.ReadAtLeast(conn, resp[:], 3)
			if err == nil && n < len(resp) && !tlsAlert(resp) {
				_, err = io.ReadFull(conn, resp[n:])
			}
		}
		conn.Close()
		if err == nil && match(resp) {
			return addr, true
		}
	}
	return "", false
}

// Close fails what is still buffered and closes the connections.
func (k *Kafka) Close() {
	k.waitAborts()
	k.client.Load().Close()
}

// logger passes franz-go's warnings and errors to slog; its info and debug
// lines describe every request and would drown the relay's own.
type logger struct{ log *slog.Logger }

func (l logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
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
