package rabbitmq

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// Publisher publishes records to RabbitMQ. One goroutine produces;
// promises run on the acker's.
type Publisher struct {
	cfg     Config
	log     *slog.Logger
	mapping mapping
	// Link is the connection between the relay's sessions, and the halt
	// after a failed message: AbortBuffered, Resume, Flush, Buffered,
	// Renew, Close.
	inflight.Link[conn, *conn]
	// limit is the largest body, lowered when the server refused a larger
	// one than Config.MaxMessageBytes said it takes.
	limit atomic.Int64
	// dlqMissing is set while an optional dead-letter queue was last
	// found missing; dlqWarned once that was said.
	dlqMissing, dlqWarned atomic.Bool
}

// conn is one connection with its publishing channel and what lives as
// long as it.
type conn struct {
	c    *amqp.Connection
	ch   *amqp.Channel
	acks *confirms
	// broken is set when a message failed: nothing is published until
	// Resume or Renew, between the relay's sessions.
	broken atomic.Bool
	// checked is set once Ping found the exchange and dead-letter queue.
	checked atomic.Bool
	// declared are the queues autoCreateRoutingKey declared (producer
	// goroutine only).
	declared map[string]bool
}

// New creates a publisher. It does not connect; Ping and the first
// record do.
func New(cfg Config, log *slog.Logger) (*Publisher, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, log: log, mapping: newMapping(cfg)}
	p.limit.Store(int64(cfg.MaxMessageBytes))
	return p, nil
}

// connect returns the connection, connecting first when there is none
// or the last one closed: a server that refuses the credentials, the
// virtual host or the certificate is an *AuthError.
func (p *Publisher) connect(ctx context.Context) (*conn, error) {
	return p.Connect(ctx, p.dial)
}

// dial connects.
func (p *Publisher) dial(context.Context) (*conn, error) {
	cfg := amqp.Config{
		TLSClientConfig: p.cfg.TLS,
		Dial:            amqp.DefaultDial(p.cfg.ConnectTimeout),
		Heartbeat:       10 * time.Second,
		Properties:      amqp.Table{"connection_name": "pgoutbox"},
	}
	ac, err := amqp.DialConfig(p.cfg.URL, cfg)
	if err != nil {
		return nil, classifyConnect(err)
	}
	ch, err := ac.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		ac.Close()
		return nil, fmt.Errorf("rabbitmq: opening a channel in confirm mode: %w", err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, p.cfg.MaxPending+1))
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	c := &conn{c: ac, ch: ch, declared: map[string]bool{}}
	c.acks = newConfirms(p.cfg.MaxPending, p.cfg.AckTimeout, returns, closed, func(err error) {
		c.broken.Store(true)
		p.learn(err)
	})
	if p.cfg.AutoCreateRoutingKey && p.cfg.RoutingKeySource != SourceTopic && p.cfg.RoutingKey != "" {
		// Debezium Server declares the static routing key's queue at
		// start, whatever the source; with none, it declares a queue the
		// server names, of use to no one, which pgoutbox does not.
		if err := c.declare(p.cfg.RoutingKey, p.cfg.RoutingKeyDurable); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// classifyConnect marks a refusal that retrying cannot fix. Only the
// server's address reaches an error, never the URL with its password.
func classifyConnect(err error) error {
	var ae *amqp.Error
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr *x509.CertificateInvalidError
	if errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == amqp.NotAllowed) ||
		errors.As(err, &unknownAuth) || errors.As(err, &hostErr) || errors.As(err, &certErr) {
		return &AuthError{Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.As(err, &ae) {
		return fmt.Errorf("rabbitmq: connect: %w", err)
	}
	return errors.New("rabbitmq: connect: " + err.Error())
}

// declare declares the queue autoCreateRoutingKey names, once per
// connection, as Debezium Server does: not exclusive, not auto-deleted,
// no arguments, and no binding.
func (c *conn) declare(name string, durable bool) error {
	if c.declared[name] {
		return nil
	}
	if _, err := c.ch.QueueDeclare(name, durable, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: declaring queue %q (autoCreateRoutingKey): %w", name, err)
	}
	c.declared[name] = true
	return nil
}

// Fits returns *TooLargeError when r's body exceeds what the server
// accepts, and *FieldError for a routing key or header name AMQP cannot
// carry. It does not connect.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	exchange, key, _ := p.mapping.destination(r)
	if len(exchange) > maxShortString {
		return &FieldError{Field: "exchange", Value: exchange}
	}
	if len(key) > maxShortString {
		return &FieldError{Field: "routing key", Value: key}
	}
	for _, h := range r.Headers {
		if len(h.Key) > maxShortString {
			return &FieldError{Field: "header name", Value: h.Key}
		}
	}
	if n, max := len(p.mapping.body(r)), int(p.limit.Load()); n > max {
		return &TooLargeError{Exchange: exchange, Size: n, Max: max}
	}
	return nil
}

// Produce publishes r; promise is called once with its confirm or its
// failure, in publish order. Produce blocks while MaxPending messages
// wait for their confirm, until ctx ends.
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
	exchange, key, deadLetter := p.mapping.destination(r)
	if deadLetter && p.dlqMissing.Load() {
		// Published to a missing queue, it would be returned unroutable:
		// looked for again, it stops the relay here while still missing.
		missing, err := p.queueMissing(c, key)
		if err != nil {
			return fmt.Errorf("rabbitmq: dead-letter queue %q: %w", key, err)
		}
		if missing {
			return p.dlqMissingError()
		}
		p.dlqMissing.Store(false)
	}
	if !deadLetter && p.cfg.AutoCreateRoutingKey && p.cfg.RoutingKeySource == SourceTopic {
		if err := c.declare(r.Topic, p.cfg.RoutingKeyDurable); err != nil {
			return err
		}
	}
	if err := c.acks.Acquire(ctx); err != nil {
		if errors.Is(err, inflight.ErrStopped) {
			return errClosed
		}
		return err
	}
	msg := p.mapping.message(r)
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil {
		c.acks.Release()
		c.broken.Store(true) // the channel is gone: the next session reconnects
		return fmt.Errorf("rabbitmq: publish to exchange %q: %w", exchange, err)
	}
	c.acks.Push(pending{rec: r, promise: promise, dc: dc, id: msg.MessageId, sent: time.Now()})
	return nil
}

// sizeRefusal reads the limit from RabbitMQ's refusal of a message larger
// than its max_message_size (rabbit_channel: "message size N is larger
// than configured max size M"): the code alone does not say it.
var sizeRefusal = regexp.MustCompile(`larger than configured max size (\d+)`)

// learn lowers the body limit to what the server said it is, so that the
// next session dead-letters the message instead of sending it again.
func (p *Publisher) learn(err error) {
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.PreconditionFailed {
		return
	}
	m := sizeRefusal.FindStringSubmatch(ae.Reason)
	if m == nil {
		return
	}
	if n, perr := strconv.ParseInt(m[1], 10, 64); perr == nil && n < p.limit.Load() {
		p.limit.Store(n)
		p.log.Warn("rabbitmq: the server takes smaller messages than configured; larger ones are dead-lettered from now on",
			"max_message_size", n, "configured", p.cfg.MaxMessageBytes)
	}
}

// The connection's side of inflight.Conn.

// Failed tells a connection on which a message failed.
func (c *conn) Failed() bool { return c.broken.Load() }

// Lost tells a connection whose channel closed with no message waiting
// for its confirm: one dropped while idle, which the next message
// replaces. With messages waiting it is not lost but failing: a new one
// could publish a later event before an earlier one's failure is known.
func (c *conn) Lost() bool { return c.ch.IsClosed() && c.acks.Len() == 0 }

// Len is how many messages wait for their confirm.
func (c *conn) Len() int64 { return c.acks.Len() }

// Wait waits until none does.
func (c *conn) Wait(ctx context.Context) error { return c.acks.Wait(ctx) }

// Close fails what waits for its confirm and closes the connection.
func (c *conn) Close() {
	c.acks.Close()
	_ = c.c.Close()
}

// Ping checks that the server answers, connecting first when there is no
// connection; the first time on a connection, that the exchange and the
// dead-letter queue exist (declaring the queue under
// autoCreateRoutingKey).
func (p *Publisher) Ping(ctx context.Context) error {
	c, err := p.connect(ctx)
	if err != nil {
		return err
	}
	if c.c.IsClosed() {
		return errors.New("rabbitmq: not connected")
	}
	if c.checked.Load() {
		return nil
	}
	if err := p.check(c); err != nil {
		return err
	}
	c.checked.Store(true)
	return nil
}

// probe runs f on a channel of its own, where a passive declaration of
// what is missing closes the channel; missing tells that answer.
func (c *conn) probe(f func(ch *amqp.Channel) error) (missing bool, err error) {
	ch, err := c.c.Channel()
	if err != nil {
		return false, fmt.Errorf("rabbitmq: opening a channel: %w", err)
	}
	defer ch.Close()
	err = f(ch)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return true, nil
	}
	return false, err
}

// queueMissing tells whether queue q does not exist.
func (p *Publisher) queueMissing(c *conn, q string) (bool, error) {
	return c.probe(func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
		return err
	})
}

// dlqMissingError is the missing dead-letter queue's error.
func (p *Publisher) dlqMissingError() error {
	return &MissingError{What: "dead-letter queue", Name: p.cfg.DeadLetterQueue,
		Fix: "declare it (dead letters go to it through the default exchange), name another (--dlq-topic), let pgoutbox declare it (autoCreateRoutingKey, --rabbitmq-auto-create-routing-key), or run with --on-poison halt"}
}

// check looks for the exchange and the dead-letter queue.
func (p *Publisher) check(c *conn) error {
	probe := c.probe
	if x := p.cfg.Exchange; x != "" {
		missing, err := probe(func(ch *amqp.Channel) error { return ch.ExchangeDeclarePassive(x, "", false, false, false, false, nil) })
		if err != nil {
			return fmt.Errorf("rabbitmq: exchange %q: %w", x, err)
		}
		if missing {
			return &MissingError{What: "exchange", Name: x, Fix: "declare it, or name another (exchange, --rabbitmq-exchange)"}
		}
	}
	q := p.cfg.DeadLetterQueue
	if q == "" {
		return nil
	}
	missing, err := p.queueMissing(c, q)
	if err != nil {
		return fmt.Errorf("rabbitmq: dead-letter queue %q: %w", q, err)
	}
	p.dlqMissing.Store(false)
	if !missing {
		return nil
	}
	if p.cfg.AutoCreateRoutingKey {
		_, err := probe(func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(q, p.cfg.RoutingKeyDurable, false, false, false, nil)
			return err
		})
		return err
	}
	if !p.cfg.DeadLetterQueueOptional {
		return p.dlqMissingError()
	}
	p.dlqMissing.Store(true)
	if !p.dlqWarned.Swap(true) {
		p.log.Warn("rabbitmq: the dead-letter queue does not exist: an event that cannot be published stops pgoutbox until it is declared, as it stops Debezium Server",
			"queue", q, "fix", "declare it (dead letters go to it through the default exchange), or let pgoutbox declare it (--rabbitmq-auto-create-routing-key)")
	}
	return nil
}
