package rabbitstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// Publisher publishes records to RabbitMQ streams. One goroutine
// produces; promises run on the confirms' queue's.
type Publisher struct {
	cfg     Config
	at      endpoint
	log     *slog.Logger
	mapping mapping
	// Link is the connection between the relay's sessions, and the halt
	// after a failed message: AbortBuffered, Resume, Flush, Buffered,
	// Renew, Close.
	inflight.Link[conn, *conn]
	// limit is the largest frame, lowered when the server refused a
	// message that fit in Config.MaxFrameBytes.
	limit atomic.Int64
}

// conn is one environment (the client's connections) with its producers
// and what lives as long as it.
type conn struct {
	env  *stream.Environment
	acks *inflight.Confirms[pending]
	// producers are the producers by stream (the producing goroutine's,
	// and Renew's while nothing is produced).
	producers map[string]*stream.Producer
	readers   sync.WaitGroup // the producers' confirmation readers
	// broken is set when a message failed: nothing is published until
	// Resume or Renew, between the relay's sessions.
	broken atomic.Bool
	// lost is set when a producer closed on its own (the connection
	// ended): the next record connects again.
	lost atomic.Bool
}

// New creates a publisher. It does not connect; Ping and the first
// record do.
func New(cfg Config, log *slog.Logger) (*Publisher, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	at, err := parseURI(cfg.URI)
	if err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, at: at, log: log, mapping: mapping{stream: cfg.Stream, deadLetters: cfg.DeadLetterStream, nullValue: cfg.NullValue, contentType: cfg.ContentType}}
	p.limit.Store(int64(cfg.MaxFrameBytes))
	return p, nil
}

// connect returns the connection, connecting first when there is none or
// the last one was lost with nothing failed on it.
func (p *Publisher) connect(ctx context.Context) (*conn, error) {
	return p.Connect(ctx, p.dial)
}

// dial connects.
func (p *Publisher) dial(ctx context.Context) (*conn, error) {
	opts := stream.NewEnvironmentOptions().SetUri(p.at.plain).
		// Always the configured address, as Debezium Server's
		// addressResolver: the one the server advertises may not be
		// reachable from here.
		SetAddressResolver(stream.AddressResolver{Host: p.at.host, Port: p.at.port}).
		SetRequestedMaxFrameSize(p.cfg.MaxFrameBytes).
		SetRPCTimeout(p.cfg.RPCTimeout)
	if p.at.tls {
		t := p.cfg.TLS.Clone()
		if t == nil {
			t = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if t.ServerName == "" {
			t.ServerName = p.at.host
		}
		// The client does not report a failed handshake (it waits for an
		// answer until its timeout): one handshake first says why.
		if err := handshake(ctx, p.at, t, p.cfg.RPCTimeout); err != nil {
			return nil, classifyConnect(err, p.at)
		}
		opts = opts.IsTLS(true).SetTLSConfig(t)
	}
	env, err := stream.NewEnvironment(opts)
	if err != nil {
		if env != nil {
			_ = env.Close()
		}
		return nil, classifyConnect(err, p.at)
	}
	c := &conn{env: env, producers: map[string]*stream.Producer{}}
	c.acks = newConfirms(p.cfg.MaxPending, p.cfg.AckTimeout, func(error) { c.broken.Store(true) })
	return c, nil
}

// handshake connects to at over TLS and closes the connection.
func handshake(ctx context.Context, at endpoint, t *tls.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{Config: t}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(at.host, fmt.Sprint(at.port)))
	if err != nil {
		return err
	}
	return c.Close()
}

// classifyConnect marks a refusal that retrying cannot fix. Only the
// server's address reaches an error, never the URI with its password.
func classifyConnect(err error, at endpoint) error {
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr *x509.CertificateInvalidError
	if errors.Is(err, stream.AuthenticationFailure) || errors.Is(err, stream.VirtualHostAccessFailure) ||
		errors.Is(err, stream.AuthenticationFailureLoopbackError) ||
		errors.As(err, &unknownAuth) || errors.As(err, &hostErr) || errors.As(err, &certErr) {
		return &AuthError{Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("rabbitmq streams: connect to %s: %w", net.JoinHostPort(at.host, fmt.Sprint(at.port)), err)
	}
	return fmt.Errorf("rabbitmq streams: connect to %s: %s", net.JoinHostPort(at.host, fmt.Sprint(at.port)), err)
}

// producer is the producer of name, creating the stream when it does not
// exist (with the configured retention) and the producer on first use,
// as Debezium Server does.
func (p *Publisher) producer(c *conn, name string) (*stream.Producer, error) {
	if pr, ok := c.producers[name]; ok {
		return pr, nil
	}
	// The metadata tells a stream that does not exist from one whose
	// leader is not up yet (after a restart), which must not be created.
	_, err := c.env.StreamMetaData(name)
	switch {
	case err == nil:
	case !errors.Is(err, stream.StreamDoesNotExist):
		return nil, fmt.Errorf("rabbitmq streams: stream %q: %w", name, err)
	default:
		opts := &stream.StreamOptions{MaxAge: p.cfg.MaxAge}
		if n := p.cfg.MaxLengthBytes; n > 0 {
			opts.MaxLengthBytes = stream.ByteCapacity{}.B(n)
		}
		if n := p.cfg.MaxSegmentBytes; n > 0 {
			opts.MaxSegmentSizeBytes = stream.ByteCapacity{}.B(n)
		}
		if err := c.env.DeclareStream(name, opts); err != nil && !errors.Is(err, stream.StreamAlreadyExists) {
			return nil, fmt.Errorf("rabbitmq streams: creating stream %q: %w", name, err)
		}
		p.log.Info("rabbitmq streams: created a stream", "stream", name)
	}
	po := stream.NewProducerOptions().SetBatchSize(p.cfg.BatchSize).
		SetConfirmationTimeOut(p.cfg.AckTimeout).SetClientProvidedName("pgoutbox")
	if p.cfg.ProducerName != "" {
		po = po.SetProducerName(p.cfg.ProducerName)
	}
	pr, err := c.env.NewProducer(name, po)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq streams: producer for stream %q: %w", name, err)
	}
	confirmations, closed := pr.NotifyPublishConfirmation(), pr.NotifyClose()
	c.readers.Add(2)
	go func() {
		defer c.readers.Done()
		deliver(confirmations)
	}()
	go func() {
		defer c.readers.Done()
		if ev, ok := <-closed; ok && ev.Reason != stream.DeletePublisher {
			c.lost.Store(true)
		}
	}()
	c.producers[name] = pr
	return pr, nil
}

// Fits returns *TooLargeError when r's message does not fit in the
// largest frame the server takes, and *NameError for a stream name
// RabbitMQ cannot take. It does not connect.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	name := p.mapping.streamOf(r)
	if len(name) > maxStreamName || name == "" {
		return &NameError{Name: name}
	}
	max := int(p.limit.Load())
	if p.mapping.size(r) <= max {
		return nil
	}
	n, err := p.mapping.exactSize(r)
	if err != nil {
		return fmt.Errorf("rabbitmq streams: encoding the message: %w", err)
	}
	if n > max {
		return &TooLargeError{Stream: name, Size: n, Max: max}
	}
	return nil
}

// Produce sends r; promise is called once with its confirm or its
// failure, in send order. Produce blocks while MaxPending messages wait
// for their confirm, until ctx ends.
func (p *Publisher) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := p.Fits(ctx, r); err != nil {
		return err
	}
	if p.Halted() {
		return ErrHalted
	}
	c, err := p.connect(ctx)
	if err != nil {
		return err
	}
	if c.broken.Load() {
		return ErrHalted
	}
	name := p.mapping.streamOf(r)
	pr, err := p.producer(c, name)
	if err != nil {
		return err
	}
	if err := c.acks.Acquire(ctx); err != nil {
		if errors.Is(err, inflight.ErrStopped) {
			return errClosed
		}
		return err
	}
	msg := p.mapping.message(r)
	if err := pr.Send(msg); err != nil {
		c.acks.Release()
		c.broken.Store(true) // the next session connects again
		if errors.Is(err, stream.FrameTooLarge) {
			if n, serr := p.mapping.exactSize(r); serr == nil {
				p.learn(n)
			}
		}
		return fmt.Errorf("rabbitmq streams: send to stream %q: %w", name, err)
	}
	c.acks.Push(pending{rec: r, promise: promise, msg: msg, stream: name, sent: time.Now()})
	return nil
}

// learn lowers the frame limit below a message of n bytes that the
// client found larger than the frame it agreed with the server (which
// took a smaller frame_max than configured), so that the next session
// dead-letters it instead of sending it again.
func (p *Publisher) learn(n int) {
	if n <= minFrame || int64(n) > p.limit.Load() {
		return
	}
	p.limit.Store(int64(n - 1))
	p.log.Warn("rabbitmq streams: the server takes smaller frames than configured (--rabbitmqstream-max-frame-bytes); a message of this size or larger is dead-lettered from now on",
		"bytes", n, "configured", p.cfg.MaxFrameBytes)
}

// The connection's side of inflight.Conn.

// Failed tells a connection on which a message failed.
func (c *conn) Failed() bool { return c.broken.Load() }

// Lost tells a connection whose producer closed on its own.
func (c *conn) Lost() bool { return c.lost.Load() }

// Len is how many messages wait for their confirm.
func (c *conn) Len() int64 { return c.acks.Len() }

// Wait waits until none does.
func (c *conn) Wait(ctx context.Context) error { return c.acks.Wait(ctx) }

// Close fails what waits, closes the producers (which ends their
// readers) and the environment, and waits for the readers.
func (c *conn) Close() {
	c.acks.Close()
	for _, pr := range c.producers {
		_ = pr.Close()
	}
	_ = c.env.Close()
	c.readers.Wait()
}

// Ping checks that the server answers, connecting first when there is no
// connection. Streams are created on first use: one that does not exist
// yet is no error.
func (p *Publisher) Ping(ctx context.Context) error {
	c, err := p.connect(ctx)
	if err != nil {
		return err
	}
	if c.lost.Load() {
		return errors.New("rabbitmq streams: not connected")
	}
	name := p.cfg.Stream
	if name == "" {
		name = "pgoutbox" // any name: the answer is what counts
	}
	if _, err := c.env.StreamExists(name); err != nil {
		return fmt.Errorf("rabbitmq streams: asking for stream %q: %w", name, err)
	}
	return nil
}
