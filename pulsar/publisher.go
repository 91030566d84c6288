package pulsar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	pc "github.com/apache/pulsar-client-go/pulsar"
	pclog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// Publisher publishes records to their topics. One goroutine produces;
// the confirms are settled on the queue's, in send order.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	limit atomic.Int64 // the largest payload the broker takes, as known
	// Link is the client between the relay's sessions, and the halt
	// after a failed message: AbortBuffered, Resume, Flush, Buffered,
	// Renew, Close.
	inflight.Link[conn, *conn]
}

// conn is one session's client, its producers and its messages in
// flight.
type conn struct {
	client    pc.Client
	producers map[string]pc.Producer // by full topic name; the producing goroutine's
	acks      *inflight.Confirms[*pending]
	// broken is set when a message failed or a producer could not be
	// made: nothing is sent until Resume or Renew.
	broken atomic.Bool
}

// pending is a sent message waiting for its confirm.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
	topic   string
	sent    time.Time
	done    chan struct{} // closed once err is set
	err     error
}

// New creates a publisher; it connects at the first record.
func New(cfg Config, log *slog.Logger) (*Publisher, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, log: log}
	p.limit.Store(int64(cfg.MaxMessageBytes))
	return p, nil
}

func (p *Publisher) dial(context.Context) (*conn, error) {
	opts := pc.ClientOptions{
		URL:                        p.cfg.ServiceURL,
		TLSTrustCertsFilePath:      p.cfg.TLSTrustCertsFile,
		TLSAllowInsecureConnection: p.cfg.TLSAllowInsecure,
		TLSValidateHostname:        p.cfg.TLSValidateHostname,
		ConnectionTimeout:          10 * time.Second,
		OperationTimeout:           30 * time.Second,
		Logger:                     pclog.NewLoggerWithSlog(p.log.With("client", "pulsar")),
	}
	switch {
	case p.cfg.Token != "":
		opts.Authentication = pc.NewAuthenticationToken(p.cfg.Token)
	case p.cfg.TokenFile != "":
		opts.Authentication = pc.NewAuthenticationTokenFromFile(p.cfg.TokenFile)
	}
	client, err := pc.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("pulsar: the client: %w", err)
	}
	c := &conn{client: client, producers: map[string]pc.Producer{}}
	c.acks = inflight.NewConfirms(inflight.ConfirmConfig[*pending]{
		Max: p.cfg.MaxPending, Timeout: p.cfg.SendTimeout + 5*time.Second,
		Sent:    func(m *pending) time.Time { return m.sent },
		Done:    func(m *pending) <-chan struct{} { return m.done },
		Outcome: func(m *pending) error { return m.err },
		Late: func(_ *pending, d time.Duration) error {
			return fmt.Errorf("pulsar: no confirm within %s (timeout, --pulsar-send-timeout)", d)
		},
		Closed: errClosed, After: errAfterFailure,
		Promise: func(m *pending, err error) { m.promise(m.rec, err) },
		Failed:  func(error) { c.broken.Store(true) },
	})
	return c, nil
}

// topic is r's full topic name.
func (p *Publisher) topic(r *kgo.Record) string {
	return "persistent://" + p.cfg.Tenant + "/" + p.cfg.Namespace + "/" + r.Topic
}

// Fits returns *NameError for a topic name Pulsar does not take and
// *TooLargeError for a payload larger than the broker takes. It sends
// nothing.
func (p *Publisher) Fits(_ context.Context, r *kgo.Record) error {
	if r.Topic == "" || strings.Contains(r.Topic, "/") {
		return &NameError{Name: r.Topic}
	}
	if max := p.limit.Load(); int64(len(r.Value)) > max {
		return &TooLargeError{Topic: r.Topic, Size: len(r.Value), Max: int(max)}
	}
	return nil
}

// producer is c's producer for topic, created on first use.
func (p *Publisher) producer(c *conn, topic string) (pc.Producer, error) {
	if pr, ok := c.producers[topic]; ok {
		return pr, nil
	}
	opts := pc.ProducerOptions{
		Topic:                   topic,
		SendTimeout:             p.cfg.SendTimeout,
		MaxPendingMessages:      p.cfg.MaxPending,
		BatchingMaxPublishDelay: time.Millisecond, // the Java client's default, latency first
	}
	if p.cfg.Text {
		opts.Schema = pc.NewStringSchema(nil)
	}
	if p.cfg.KeyBased {
		opts.BatcherBuilderType = pc.KeyBasedBatchBuilder
	}
	pr, err := c.client.CreateProducer(opts)
	if err != nil {
		return nil, &ProducerError{Topic: topic, Err: err}
	}
	c.producers[topic] = pr
	return pr, nil
}

// message is r as Pulsar's: its key, its headers as properties (the last
// value of a name, as Debezium Server's map of them keeps), its value.
func (p *Publisher) message(r *kgo.Record) *pc.ProducerMessage {
	m := &pc.ProducerMessage{Key: p.cfg.NullKey}
	if r.Key != nil {
		m.Key = string(r.Key)
	}
	for _, h := range r.Headers {
		if h.Value == nil {
			continue
		}
		if m.Properties == nil {
			m.Properties = map[string]string{}
		}
		m.Properties[h.Key] = string(h.Value)
	}
	if p.cfg.Text {
		m.Value = string(r.Value)
	} else {
		m.Payload = r.Value
		if m.Payload == nil {
			m.Payload = []byte{}
		}
	}
	return m
}

// Produce sends r; promise is called once with the broker's confirm or
// the failure, in produce order. Produce blocks while MaxPending records
// wait, until ctx ends.
func (p *Publisher) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := p.Fits(ctx, r); err != nil {
		return err
	}
	if p.Halted() {
		return ErrHalted
	}
	c, err := p.Connect(ctx, p.dial)
	if err != nil {
		return err
	}
	if c.broken.Load() {
		return ErrHalted
	}
	topic := p.topic(r)
	pr, err := p.producer(c, topic)
	if err != nil {
		c.broken.Store(true) // the next session connects again
		return err
	}
	if err := c.acks.Acquire(ctx); err != nil {
		if errors.Is(err, inflight.ErrStopped) {
			return errClosed
		}
		return err
	}
	m := &pending{rec: r, promise: promise, topic: topic, sent: time.Now(), done: make(chan struct{})}
	size := len(r.Value)
	// The message outlives ctx, a session's: it ends with its confirm,
	// the send timeout, or the client's close.
	pr.SendAsync(context.Background(), p.message(r), func(_ pc.MessageID, _ *pc.ProducerMessage, err error) {
		if err != nil {
			if errors.Is(err, pc.ErrMessageTooLarge) {
				p.learn(size)
			}
			err = &SendError{Topic: r.Topic, Err: err}
		}
		m.err = err
		close(m.done)
	})
	c.acks.Push(m)
	return nil
}

// learn lowers the limit below a payload of n bytes the broker's was
// lower than, so that it is dead-lettered when it comes again instead of
// sent.
func (p *Publisher) learn(n int) {
	for {
		cur := p.limit.Load()
		if int64(n) > cur || p.limit.CompareAndSwap(cur, int64(n-1)) {
			return
		}
	}
}

// Ping has nothing to ask before the first record: a producer's creation
// is the first request, and reports what is wrong.
func (p *Publisher) Ping(context.Context) error { return nil }

// The connection's side of inflight.Conn.

// Failed tells a client on which a message failed.
func (c *conn) Failed() bool { return c.broken.Load() }

// Lost is never: the client connects again itself.
func (c *conn) Lost() bool { return false }

// Len is how many messages wait for their confirm.
func (c *conn) Len() int64 { return c.acks.Len() }

// Wait waits until none does.
func (c *conn) Wait(ctx context.Context) error { return c.acks.Wait(ctx) }

// Close fails what waits and closes the client.
func (c *conn) Close() {
	c.acks.Close()
	c.client.Close()
}
