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
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

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
	// (defaults 10,000 records and 64 MiB).
	MaxBufferedRecords int
	MaxBufferedBytes   int
	// MaxMessageBytes is the largest record accepted, matching the
	// broker's message.max.bytes (default 1,000,012, Kafka's default).
	MaxMessageBytes int
	// CreateTopics asks the broker to create missing topics (default true
	// through Defaults; the broker must allow it).
	CreateTopics bool
	// SASL authenticates to the brokers when Mechanism is set.
	SASL SASL
	// TLS encrypts the connections when set; nil means plaintext. There is
	// no fallback to plaintext when the handshake fails.
	TLS *tls.Config
	// DialTimeout bounds connecting to a broker, TLS handshake included
	// (default 10s).
	DialTimeout time.Duration
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
		c.MaxBufferedRecords = 10_000
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = 64 << 20
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1_000_012
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 10 * time.Second
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
	return nil
}

// TooLargeError is a record larger than the broker accepts. It is never
// handed to the client, so it can neither block nor reorder its key.
type TooLargeError struct {
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("record of %d bytes exceeds the maximum message size of %d bytes", e.Size, e.Max)
}

// Kafka produces records to Kafka.
type Kafka struct {
	client      *kgo.Client
	max         int
	sasl, tls   bool
	brokers     []string
	dialTimeout time.Duration
}

// New creates a producer. It does not contact the brokers; Ping does.
func New(cfg Config, log *slog.Logger) (*Kafka, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(cfg.Linger),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.MaxBufferedBytes(cfg.MaxBufferedBytes),
		kgo.ProducerBatchMaxBytes(int32(cfg.MaxMessageBytes)),
		kgo.WithLogger(logger{log}),
		kgo.DialTimeout(cfg.DialTimeout),
		// Latency-first batches are small; compressing them costs CPU
		// on every record and saves nothing.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	if cfg.CreateTopics {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	if m, _ := cfg.SASL.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	if cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg.TLS.Clone()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &Kafka{client: client, max: cfg.MaxMessageBytes, sasl: cfg.SASL.Mechanism != "", tls: cfg.TLS != nil,
		brokers: cfg.Brokers, dialTimeout: cfg.DialTimeout}, nil
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

// Fits returns *TooLargeError when r exceeds the maximum message size.
func (k *Kafka) Fits(r *kgo.Record) error {
	if n := Size(r); n > k.max {
		return &TooLargeError{Size: n, Max: k.max}
	}
	return nil
}

// Produce hands r to the client; promise is called once with its ack or
// its failure. It blocks while the buffer is full, until ctx ends. A record
// over the size limit is refused with *TooLargeError and promise is not
// called.
func (k *Kafka) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if n := Size(r); n > k.max {
		return &TooLargeError{Size: n, Max: k.max}
	}
	k.client.Produce(ctx, r, promise)
	return nil
}

// Flush waits until every buffered record is acked or failed.
func (k *Kafka) Flush(ctx context.Context) error { return k.client.Flush(ctx) }

// ErrAuth marks a failure that retrying cannot fix: the broker refused
// the credentials, or TLS or SASL is configured on one side only.
var ErrAuth = errors.New("kafka refused the connection")

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
// timeout.
func (k *Kafka) Ping(ctx context.Context) error {
	if !k.tls {
		return k.explain(k.ping(ctx))
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
	if addr, ok := plaintextKafka(ctx, k.brokers, min(k.dialTimeout, 3*time.Second)); ok {
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

// ping pings, again after a connection closed at once (up to 3 tries).
func (k *Kafka) ping(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = k.client.Ping(ctx); err == nil {
			return nil
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
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

// plaintextKafka reports the first seed broker that answers a plaintext
// ApiVersions request (v0) with its correlation id: a Kafka listener
// without TLS. A TLS listener answers with an alert or closes.
func plaintextKafka(ctx context.Context, brokers []string, timeout time.Duration) (string, bool) {
	const correlation = 0x70676f78
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
			_, err = io.ReadFull(conn, resp[:])
		}
		conn.Close()
		if err == nil && binary.BigEndian.Uint32(resp[4:]) == correlation && binary.BigEndian.Uint32(resp[:4]) >= 4 {
			return addr, true
		}
	}
	return "", false
}

// Close fails what is still buffered and closes the connections.
func (k *Kafka) Close() { k.client.Close() }

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
