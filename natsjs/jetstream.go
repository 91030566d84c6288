package natsjs

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
	"github.com/pgoutbox/pgoutbox/outbox"
)

// inboxPrefix starts the subjects replies come to.
const inboxPrefix = "_INBOX.pgoutbox"

// The headers JetStream reads on a published message.
const (
	headerMsgID        = "Nats-Msg-Id"
	headerExpectLastID = "Nats-Expected-Last-Msg-Id"
)

// JetStream publishes records to NATS JetStream. One goroutine produces;
// promises run on the acker's.
type JetStream struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex // connecting, replacing and closing the connection
	conn atomic.Pointer[conn]
	// halted is set by AbortBuffered, cleared by Resume and Renew.
	halted atomic.Bool
	// dlqWarned is set once a dead-letter subject no stream takes was
	// said.
	dlqWarned atomic.Bool
}

// conn is one connection and what lives as long as it: the acker, the
// streams looked up, and the chain of message ids.
type conn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	acks    *acker
	streams *streams
	// broken is set when a message failed: what follows it could land
	// ahead of it when it is sent again, so nothing is published until
	// Resume or Renew, between the relay's sessions.
	broken atomic.Bool
	// checked is set once JetStream answered on this connection (Ping).
	checked atomic.Bool
	// last is, per stream, the id of the message published last: the next
	// one expects it to be the stream's last (producer goroutine only).
	last map[string]string
	// own numbers the ids of records of no event; nonce, random per
	// connection, keeps them apart from another connection's.
	own   atomic.Uint64
	nonce string
}

// ownIDPrefix starts the id of a record of no event.
const ownIDPrefix = "pgoutbox-"

// New creates a publisher. It does not connect; Ping and the first
// record do.
func New(cfg Config, log *slog.Logger) (*JetStream, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &JetStream{cfg: cfg, log: log}, nil
}

// connect returns the connection, connecting first when there is none:
// a server that refuses the credentials or the certificate is an
// *AuthError.
func (j *JetStream) connect(ctx context.Context) (*conn, error) {
	if c := j.conn.Load(); c != nil {
		return c, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if c := j.conn.Load(); c != nil {
		return c, nil
	}
	nc, err := nats.Connect(strings.Join(j.cfg.URLs, ","), j.options()...)
	if err != nil {
		return nil, classifyConnect(err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(j.cfg.AckTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	c := &conn{nc: nc, js: js, streams: newStreams(js, nc, j.cfg.MaxMessageBytes), last: map[string]string{}, nonce: hex.EncodeToString(nonce[:])}
	c.acks = newAcker(j.cfg.MaxPending, js, j.cfg.AckTimeout, func(error) { c.broken.Store(true) })
	if j.cfg.CreateStream {
		if err := j.createStream(ctx, js); err != nil {
			c.close()
			return nil, err
		}
	}
	j.conn.Store(c)
	return c, nil
}

func (j *JetStream) options() []nats.Option {
	opts := []nats.Option{
		nats.Name("pgoutbox"),
		// Replies (acks, API answers) on four tokens: a stream over
		// *.*.* (Debezium Server's default subjects) would store
		// _INBOX.<id>.<token> replies, and every message stored between
		// two of pgoutbox's breaks its chain of ids.
		nats.CustomInboxPrefix(inboxPrefix),
		nats.Timeout(j.cfg.ConnectTimeout),
		// A server that restarts is reconnected to: the messages waiting
		// for their ack fail (jetstream fails them at the reconnect), the
		// relay sends them again, and the duplicate window drops the
		// copies of those that were stored.
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			j.log.Warn("nats: asynchronous error", "err", err)
		}),
	}
	switch {
	case j.cfg.JWT != "":
		opts = append(opts, nats.UserJWTAndSeed(j.cfg.JWT, j.cfg.Seed))
	case j.cfg.User != "":
		opts = append(opts, nats.UserInfo(j.cfg.User, j.cfg.Password))
	}
	if j.cfg.TLS != nil {
		opts = append(opts, nats.Secure(j.cfg.TLS))
	}
	return opts
}

// classifyConnect marks a refusal that retrying cannot fix.
func classifyConnect(err error) error {
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		errors.As(err, &unknownAuth) || errors.As(err, &hostErr) {
		return &AuthError{Err: err}
	}
	return fmt.Errorf("nats: connect: %w", err)
}

// createStream creates the stream create-stream names, as Debezium Server
// does at start; one that exists is left as it is.
func (j *JetStream) createStream(ctx context.Context, js jetstream.JetStream) error {
	storage := jetstream.MemoryStorage
	if j.cfg.Storage == "file" {
		storage = jetstream.FileStorage
	}
	subjects := append([]string(nil), j.cfg.Subjects...)
	if s := j.cfg.DeadLetterSubject; s != "" && !covered(subjects, s) {
		subjects = append(subjects, s)
	}
	ctx, cancel := context.WithTimeout(ctx, j.cfg.ConnectTimeout)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: j.cfg.StreamName, Subjects: subjects, Storage: storage})
	switch {
	case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
		j.log.Info("nats: the stream exists; it is used as it is", "stream", j.cfg.StreamName)
	case err != nil:
		return fmt.Errorf("nats: creating stream %s: %w", j.cfg.StreamName, err)
	}
	return nil
}

// Fits returns *TooLargeError when r exceeds what its subject's stream
// and the server accept, *HeaderError for a header NATS cannot carry, and
// *NoStreamError when no stream takes the subject. A tombstone fits: it
// is not published.
func (j *JetStream) Fits(ctx context.Context, r *kgo.Record) error {
	if r.Value == nil {
		return nil
	}
	c, err := j.connect(ctx)
	if err != nil {
		return err
	}
	if err := checkHeaders(r); err != nil {
		return err
	}
	st, err := c.streams.lookup(ctx, r.Topic)
	var none *NoStreamError
	if errors.As(err, &none) && r.Topic == j.cfg.DeadLetterSubject {
		return &DeadLetterError{Subject: r.Topic}
	}
	if err != nil {
		return err
	}
	if n := size(r); n > st.max {
		return &TooLargeError{Subject: r.Topic, Size: n, Max: st.max}
	}
	return nil
}

// Produce publishes r; promise is called once with its ack or its
// failure, in publish order. A tombstone (no value) is not published, as
// Debezium Server publishes none; its promise runs in its turn. Produce
// blocks while MaxPending messages wait for their ack, until ctx ends.
func (j *JetStream) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := j.Fits(ctx, r); err != nil {
		return err
	}
	c, err := j.connect(ctx)
	if err != nil {
		return err
	}
	if j.halted.Load() || c.broken.Load() {
		return ErrHalted
	}
	if err := c.acks.Acquire(ctx); err != nil {
		if errors.Is(err, inflight.ErrStopped) {
			return errClosed
		}
		return err
	}
	if r.Value == nil {
		c.acks.Push(pending{rec: r, promise: promise})
		return nil
	}
	st, err := c.streams.lookup(ctx, r.Topic)
	if err != nil {
		c.acks.Release()
		return err
	}
	msg := message(r)
	id := outbox.EventID(r.Context)
	if id == "" {
		// A record of no event (a heartbeat, a transaction's BEGIN or
		// END) gets an id of its own, used once: the chain of expected
		// last ids must not break, or a message after it could overtake
		// one refused before it (acker.settle).
		id = ownIDPrefix + strconv.FormatUint(c.own.Add(1), 10) + "-" + c.nonce
	}
	msg.Header.Set(headerMsgID, id)
	if prev := c.last[st.name]; prev != "" {
		msg.Header.Set(headerExpectLastID, prev)
	}
	fut, err := c.js.PublishMsgAsync(msg)
	if err != nil {
		c.acks.Release()
		return fmt.Errorf("nats: publish to %s: %w", r.Topic, err)
	}
	c.last[st.name] = id
	c.acks.Push(pending{rec: r, promise: promise, fut: fut, msg: msg, stream: st.name})
	if j.cfg.Sync {
		return c.acks.Wait(ctx)
	}
	return nil
}

// message is r as a NATS message: subject the topic, data the value, the
// headers with a value (a header given twice keeps its last value, as
// Debezium Server's map of them does).
func message(r *kgo.Record) *nats.Msg {
	m := &nats.Msg{Subject: r.Topic, Data: r.Value, Header: make(nats.Header, len(r.Headers)+2)}
	for _, h := range r.Headers {
		if h.Value != nil {
			m.Header[h.Key] = []string{string(h.Value)}
		}
	}
	return m
}

// checkHeaders refuses a header that would break the message's header
// block.
func checkHeaders(r *kgo.Record) error {
	for _, h := range r.Headers {
		if h.Key == "" {
			return &HeaderError{Key: h.Key, Reason: "an empty name"}
		}
		for i := 0; i < len(h.Key); i++ {
			if c := h.Key[i]; c <= ' ' || c >= 0x7f || c == ':' {
				return &HeaderError{Key: h.Key, Reason: fmt.Sprintf("the name holds %q, which NATS header names cannot", c)}
			}
		}
		if strings.ContainsAny(string(h.Value), "\r\n") {
			return &HeaderError{Key: h.Key, Reason: "the value holds a line break, which NATS header values cannot"}
		}
	}
	return nil
}

// size is a message's size as the server counts it against max_payload:
// the header block and the data, with room for the ids Produce adds.
func size(r *kgo.Record) int {
	const version, crlf, sep = len("NATS/1.0\r\n"), 2, 2
	n := version + crlf + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + sep + len(h.Value) + crlf
	}
	id := outbox.EventID(r.Context)
	if id == "" {
		id = ownIDPrefix + "18446744073709551615-0123456789abcdef" // the longest own id
	}
	n += len(headerMsgID) + len(headerExpectLastID) + 2*(sep+crlf) + 2*len(id) + len(idPrefixRoom)
	return n
}

// idPrefixRoom leaves room for a dead letter's longer id before it.
const idPrefixRoom = "dlq:"

// AbortBuffered stops publishing until Resume or Renew; what was
// published already gets its ack or its failure as it comes.
func (j *JetStream) AbortBuffered() { j.halted.Store(true) }

// Resume lets records through again, after AbortBuffered or a failed
// message, and starts the chain of ids afresh: the relay's next session
// sends again what was not acknowledged. Call it only while nothing is
// produced.
func (j *JetStream) Resume() {
	j.halted.Store(false)
	if c := j.conn.Load(); c != nil {
		c.broken.Store(false)
		clear(c.last)
	}
}

// Flush waits until every message is acked or failed.
func (j *JetStream) Flush(ctx context.Context) error {
	c := j.conn.Load()
	if c == nil {
		return nil
	}
	return c.acks.Wait(ctx)
}

// Buffered is how many messages wait for their ack.
func (j *JetStream) Buffered() int64 {
	if c := j.conn.Load(); c != nil {
		return c.acks.Len()
	}
	return 0
}

// Renew closes the connection, failing what still waits for its ack; the
// next record connects again. Call it only while nothing is produced.
func (j *JetStream) Renew() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if c := j.conn.Swap(nil); c != nil {
		c.close()
	}
	j.halted.Store(false)
	return nil
}

// Close fails what still waits for its ack and closes the connection.
func (j *JetStream) Close() {
	_ = j.Renew()
}

func (c *conn) close() {
	c.acks.Close()
	c.nc.Close()
}

// Ping checks that a server answers with JetStream enabled, connecting
// first when there is no connection.
func (j *JetStream) Ping(ctx context.Context) error {
	c, err := j.connect(ctx)
	if err != nil {
		return err
	}
	if !c.nc.IsConnected() {
		if err := c.nc.LastError(); err != nil {
			if ce := classifyConnect(err); ce != err {
				var ae *AuthError
				if errors.As(ce, &ae) {
					return ae
				}
			}
			return fmt.Errorf("nats: not connected (%s): %w", c.nc.Status(), err)
		}
		return fmt.Errorf("nats: not connected (%s)", c.nc.Status())
	}
	if c.checked.Load() {
		// A round trip only: $JS.API.INFO is three tokens, which a
		// stream over *.*.* would store between two events.
		if _, ok := ctx.Deadline(); !ok {
			return c.nc.FlushTimeout(j.cfg.ConnectTimeout)
		}
		return c.nc.FlushWithContext(ctx)
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("nats: JetStream does not answer (is the server started with JetStream, -js?): %w", err)
	}
	if s := j.cfg.DeadLetterSubject; s != "" {
		var none *NoStreamError
		_, err := c.streams.lookup(ctx, s)
		switch {
		case errors.As(err, &none) && j.cfg.DeadLetterSubjectOptional:
			if !j.dlqWarned.Swap(true) {
				j.log.Warn("nats: no stream takes the dead-letter subject: an event that cannot be published stops pgoutbox until one does, as it stops Debezium Server",
					"subject", s, "fix", "add it to a stream's subjects, or let pgoutbox create the stream (--nats-create-stream)")
			}
		case errors.As(err, &none):
			return &DeadLetterError{Subject: s}
		case err != nil:
			return err
		}
	}
	for _, s := range j.cfg.RecordSubjects {
		var none *NoStreamError
		_, err := c.streams.lookup(ctx, s)
		switch {
		case errors.As(err, &none):
			return &RecordSubjectError{Subject: s}
		case err != nil:
			return err
		}
	}
	c.checked.Store(true)
	return nil
}
