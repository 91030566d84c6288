package pulsar

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// Publisher publishes records to their topics. One goroutine produces;
// the confirms are settled on the queue's, in send order.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	limit atomic.Int64 // the largest payload the broker takes, as known
	// Link is the session's connections between the relay's sessions,
	// and the halt after a failed message: AbortBuffered, Resume, Flush,
	// Buffered, Renew, Close.
	inflight.Link[conn, *conn]
}

// conn is one session's connections, producers and messages in flight.
// Its maps are the producing goroutine's.
type conn struct {
	p          *Publisher
	wires      map[string]*wire     // by address and the broker a proxy reaches
	producers  map[string]*producer // by full topic name (a partition's)
	partitions map[string]int       // by full topic name; 0 for a topic without
	acks       *inflight.Confirms[*pending]
	// broken is set when a message failed or a producer could not be
	// made: nothing is sent until Resume or Renew.
	broken atomic.Bool
}

// pending is a sent message waiting for its confirm.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
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
	c := &conn{p: p, wires: map[string]*wire{}, producers: map[string]*producer{}, partitions: map[string]int{}}
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

// key is r's message key: its key's text, or NullKey.
func (p *Publisher) key(r *kgo.Record) string {
	if r.Key != nil {
		return string(r.Key)
	}
	return p.cfg.NullKey
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
	key := p.key(r)
	pr, err := c.producer(ctx, p.topic(r), key)
	if err != nil {
		c.broken.Store(true) // the next session looks the topic up again
		return err
	}
	if err := c.acks.Acquire(ctx); err != nil {
		if errors.Is(err, inflight.ErrStopped) {
			return errClosed
		}
		return err
	}
	m := &pending{rec: r, promise: promise, sent: time.Now(), done: make(chan struct{})}
	var props [][2]string
	seen := map[string]int{}
	for _, h := range r.Headers {
		if h.Value == nil {
			continue
		}
		// The last value of a name, as Debezium Server's map of them keeps.
		if i, ok := seen[h.Key]; ok {
			props[i][1] = string(h.Value)
			continue
		}
		seen[h.Key] = len(props)
		props = append(props, [2]string{h.Key, string(h.Value)})
	}
	pr.send(key, props, r.Value, r.Value == nil, func(err error) {
		if err != nil {
			err = &SendError{Topic: r.Topic, Err: err}
		}
		m.err = err
		close(m.done)
	})
	c.acks.Push(m)
	return nil
}

// producer is c's producer for the topic (for a partitioned topic the
// partition key's, as Pulsar's Java client routes it), created on first
// use on the connection the topic's lookup names.
func (c *conn) producer(ctx context.Context, topic, key string) (*producer, error) {
	n, ok := c.partitions[topic]
	if !ok {
		w, err := c.service(ctx)
		if err != nil {
			return nil, &ProducerError{Topic: topic, Err: err}
		}
		ans, err := w.request(ctx, func(id uint64) []byte { return partitionedMetadataCmd(topic, id) })
		if err != nil {
			return nil, &ProducerError{Topic: topic, Err: err}
		}
		n = ans.partitions
		c.partitions[topic] = n
	}
	if n > 0 {
		topic += "-partition-" + strconv.Itoa(partition(key, n))
	}
	if pr, ok := c.producers[topic]; ok {
		return pr, nil
	}
	w, err := c.lookup(ctx, topic)
	if err != nil {
		return nil, &ProducerError{Topic: topic, Err: err}
	}
	pr, err := w.newProducer(ctx, topic, c.p.cfg.Text)
	if err != nil {
		return nil, &ProducerError{Topic: topic, Err: err}
	}
	if max := w.maxMessageSize; max > 0 {
		c.p.lower(max)
	}
	c.producers[topic] = pr
	return pr, nil
}

// partition is a key's partition of n, as Pulsar's Java client picks it
// by default: Java's String.hashCode of the key, its sign bit cleared,
// modulo n (JavaStringHash, signSafeMod).
func partition(key string, n int) int {
	var h int32
	for _, u := range utf16.Encode([]rune(key)) {
		h = 31*h + int32(u)
	}
	return int(h&0x7fffffff) % n
}

// service is the connection to the service URL's broker (or proxy).
func (c *conn) service(ctx context.Context) (*wire, error) {
	return c.wire(ctx, "", "")
}

// lookup finds the broker that serves topic, following redirects, and
// returns a connection to it (through the service URL when the answer
// says so).
func (c *conn) lookup(ctx context.Context, topic string) (*wire, error) {
	w, err := c.service(ctx)
	if err != nil {
		return nil, err
	}
	authoritative := false
	for range 10 {
		ans, err := w.request(ctx, func(id uint64) []byte { return lookupCmd(topic, id, authoritative) })
		if err != nil {
			return nil, fmt.Errorf("looking the topic up: %w", err)
		}
		broker := ans.brokerURL
		if c.p.tls() {
			broker = ans.brokerURLTLS
		}
		proxyTo := ""
		if ans.proxyThroughServiceURL {
			proxyTo, broker = hostPort(broker), ""
		}
		if w, err = c.wire(ctx, broker, proxyTo); err != nil {
			return nil, err
		}
		if ans.lookupType == lookupConnect {
			return w, nil
		}
		authoritative = ans.authoritative
	}
	return nil, errors.New("looking the topic up: too many redirects")
}

// wire is the connection to broker (a pulsar:// URL; "" for the service
// URL), through the service URL's proxy to proxyTo when that is set.
func (c *conn) wire(ctx context.Context, broker, proxyTo string) (*wire, error) {
	addrs := c.p.serviceAddrs()
	if broker != "" {
		addrs = []string{hostPort(broker)}
	}
	key := strings.Join(addrs, ",") + "|" + proxyTo
	if w, ok := c.wires[key]; ok && w.failure() == nil {
		return w, nil
	}
	tlsCfg, err := c.p.tlsConfig()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, addr := range addrs {
		w, err := dialWire(ctx, addr, tlsCfg, c.p.auth, proxyTo)
		if err == nil {
			c.wires[key] = w
			return w, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// tls tells a pulsar+ssl:// service URL.
func (p *Publisher) tls() bool { return strings.HasPrefix(p.cfg.ServiceURL, "pulsar+ssl://") }

// serviceAddrs are the service URL's host:port (several, comma-separated,
// are tried in turn).
func (p *Publisher) serviceAddrs() []string {
	scheme, hosts, _ := serviceHosts(p.cfg.ServiceURL) // Validate read it
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = hostPort(scheme + "://" + h)
	}
	return out
}

// hostPort is a broker URL's host:port, with Pulsar's default ports.
func hostPort(broker string) string {
	u, err := url.Parse(broker)
	if err != nil || u.Host == "" {
		return broker
	}
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "pulsar+ssl" {
		return u.Host + ":6651"
	}
	return u.Host + ":6650"
}

// tlsConfig is the connections' TLS, nil for pulsar://.
func (p *Publisher) tlsConfig() (*tls.Config, error) {
	if !p.tls() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if p.cfg.TLSTrustCertsFile != "" {
		pem, err := os.ReadFile(p.cfg.TLSTrustCertsFile)
		if err != nil {
			return nil, fmt.Errorf("pulsar: the trusted certificates: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("pulsar: no certificate in %s", p.cfg.TLSTrustCertsFile)
		}
	}
	switch {
	case p.cfg.TLSAllowInsecure:
		cfg.InsecureSkipVerify = true
	case !p.cfg.TLSValidateHostname:
		// The chain is checked, not the name, as Pulsar's clients do
		// unless tlsHostnameVerificationEnable is set.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, cert := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(cert)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg, nil
}

// auth is the credentials a connection says: a token (read again from
// its file each time), or none.
func (p *Publisher) auth() (string, []byte, error) {
	switch {
	case p.cfg.Token != "":
		return "token", []byte(p.cfg.Token), nil
	case p.cfg.TokenFile != "":
		b, err := os.ReadFile(p.cfg.TokenFile)
		if err != nil {
			return "", nil, fmt.Errorf("pulsar: the token file: %w", err)
		}
		return "token", []byte(strings.TrimSpace(string(b))), nil
	}
	return "", nil, nil
}

// lower lowers the limit to a broker's maxMessageSize, less room for the
// message's metadata, so that a larger payload is dead-lettered instead
// of sent.
func (p *Publisher) lower(max int) {
	n := int64(max - 10<<10)
	for {
		cur := p.limit.Load()
		if n >= cur || p.limit.CompareAndSwap(cur, n) {
			return
		}
	}
}

// Ping connects to the service URL and says CONNECT: the address and the
// credentials are checked before the first record.
func (p *Publisher) Ping(ctx context.Context) error {
	tlsCfg, err := p.tlsConfig()
	if err != nil {
		return err
	}
	var errs []error
	for _, addr := range p.serviceAddrs() {
		w, err := dialWire(ctx, addr, tlsCfg, p.auth, "")
		if err == nil {
			if max := w.maxMessageSize; max > 0 {
				p.lower(max)
			}
			w.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// The connection's side of inflight.Conn.

// Failed tells a session on which a message failed.
func (c *conn) Failed() bool { return c.broken.Load() }

// Lost tells a session whose connections all ended.
func (c *conn) Lost() bool {
	for _, w := range c.wires {
		if w.failure() == nil {
			return false
		}
	}
	return len(c.wires) > 0
}

// Len is how many messages wait for their confirm.
func (c *conn) Len() int64 { return c.acks.Len() }

// Wait waits until none does.
func (c *conn) Wait(ctx context.Context) error { return c.acks.Wait(ctx) }

// Close fails what waits and closes the connections.
func (c *conn) Close() {
	c.acks.Close()
	for _, w := range c.wires {
		w.Close()
	}
}
