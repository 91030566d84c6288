package rabbitmq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

func newPublisher(t *testing.T, s *rabbitmqtest.Server, cfg Config) *Publisher {
	t.Helper()
	cfg.URL = s.URL
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// record is an event's record: its id on its context, as the relay sets it.
func record(topic, key, id, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(key), Context: outbox.WithEventID(context.Background(), id)}
	if value != "" {
		r.Value = []byte(value)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// outcomes collects promises in the order they run.
type outcomes struct {
	mu   sync.Mutex
	got  []string
	errs map[string]error
}

func (o *outcomes) promise(r *kgo.Record, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	id := outbox.EventID(r.Context)
	o.got = append(o.got, id)
	if err != nil {
		if o.errs == nil {
			o.errs = map[string]error{}
		}
		o.errs[id] = err
	}
}

func (o *outcomes) err(id string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.errs[id]
}

func produce(t *testing.T, p *Publisher, o *outcomes, recs ...*kgo.Record) {
	t.Helper()
	for _, r := range recs {
		if err := p.Produce(context.Background(), r, o.promise); err != nil {
			t.Fatalf("produce %s: %v", outbox.EventID(r.Context), err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// render is a message as the tests compare it: exchange, routing key,
// body, delivery mode, message-id, content-type and each header with its
// AMQP type.
func render(m rabbitmqtest.Message) string {
	var hs []string
	for k, v := range m.Headers {
		hs = append(hs, fmt.Sprintf("%s=%T:%s", k, v, v))
	}
	slices.Sort(hs)
	return fmt.Sprintf("%s %s %s mode=%d id=%s ct=%s [%s]", m.Exchange, m.RoutingKey, m.Body, m.DeliveryMode, m.MessageID,
		m.ContentType, strings.Join(hs, " "))
}

// The publisher against one real RabbitMQ: each subtest on exchanges and
// queues of its own.
func TestPublisher(t *testing.T) {
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{MaxMessageSize: 4096})
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *rabbitmqtest.Server)
	}{
		{"messages", testMessages},
		{"routing-key-sources", testRoutingKeySources},
		{"returned-stops-later-messages", testReturned},
		{"missing-exchange", testMissingExchange},
		{"size-limit", testSizeLimit},
		{"dead-letter-queue", testDeadLetterQueue},
		{"refused-credentials", testCredentials},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, s) })
	}
}

// A record becomes the message Debezium Server's sink makes of it: the
// exchange named like the topic, the static routing key, the value as
// body, its headers as strings (byte arrays under jsonbytearray), mode 2;
// a tombstone's body is null.value. pgoutbox adds the event id as
// message-id.
func testMessages(t *testing.T, s *rabbitmqtest.Server) {
	for _, tc := range []struct {
		name  string
		bytes bool
		typ   string
	}{{"strings", false, "string"}, {"bytes", true, "[]uint8"}} {
		t.Run(tc.name, func(t *testing.T) {
			x := "outbox.event.order." + tc.name
			s.Queue("q-"+tc.name, x, "direct", "")
			p := newPublisher(t, s, Config{HeaderBytes: tc.bytes})
			var o outcomes
			produce(t, p, &o,
				record(x, "o-1", "e1", `{"n":1}`, "id", `"e1"`, "gone", ""),
				record(x, "o-1", "e2", ""),
				record(x, "o-2", "e3", `{"n":3}`))
			if len(o.errs) != 0 {
				t.Fatal(o.errs)
			}
			var got []string
			for _, m := range s.Await("q-"+tc.name, 3, 10*time.Second) {
				got = append(got, render(m))
			}
			want := []string{
				x + `  {"n":1} mode=2 id=e1 ct= [gone=` + tc.typ + `: id=` + tc.typ + `:"e1"]`,
				x + `  default mode=2 id=e2 ct= []`,
				x + `  {"n":3} mode=2 id=e3 ct= []`,
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// routingKey.source: static takes routingKey, topic the topic, key the
// record's key; autoCreateRoutingKey declares the queue named like it.
func testRoutingKeySources(t *testing.T, s *rabbitmqtest.Server) {
	s.Queue("rk-static", "rk", "direct", "fixed")
	s.Queue("rk-topic", "rk", "direct", "orders")
	s.Queue("rk-key", "rk", "direct", "o-9")
	for _, tc := range []struct {
		source, queue string
	}{{SourceStatic, "rk-static"}, {SourceTopic, "rk-topic"}, {SourceKey, "rk-key"}} {
		p := newPublisher(t, s, Config{Exchange: "rk", RoutingKey: "fixed", RoutingKeySource: tc.source})
		var o outcomes
		produce(t, p, &o, record("orders", "o-9", "e-"+tc.source, `{}`))
		msgs := s.Await(tc.queue, 1, 10*time.Second)
		if len(o.errs) != 0 || len(msgs) != 1 || msgs[0].MessageID != "e-"+tc.source {
			t.Errorf("%s: errors %v, queue %s holds %v", tc.source, o.errs, tc.queue, msgs)
		}
	}
	// Declared at connect (static) and before the first message of a
	// topic (topic), through the default exchange.
	p := newPublisher(t, s, Config{Exchange: "", RoutingKey: "auto-static", AutoCreateRoutingKey: true, RoutingKeyDurable: true})
	if err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := s.Count("auto-static"); n != 0 {
		t.Errorf("autoCreateRoutingKey: queue auto-static holds %d messages, want it declared and empty", n)
	}
	p = newPublisher(t, s, Config{Exchange: "amq.direct", RoutingKeySource: SourceTopic, AutoCreateRoutingKey: true})
	var o outcomes
	if err := p.Produce(context.Background(), record("auto-topic", "", "e-auto", `{}`), o.promise); err != nil {
		t.Fatal(err)
	}
	if n := s.Count("auto-topic"); n != 0 {
		t.Errorf("autoCreateRoutingKey with the topic source: queue auto-topic holds %d, want it declared and empty (no binding)", n)
	}
}

// A message no queue takes comes back (mandatory): it fails, so does
// every message published after it on the connection, and nothing is
// published until Resume, after which the next ones go out on a new
// channel.
func testReturned(t *testing.T, s *rabbitmqtest.Server) {
	s.Queue("ret", "ret", "direct", "bound")
	p := newPublisher(t, s, Config{Exchange: "ret", RoutingKeySource: SourceKey})
	var o outcomes
	for _, r := range []*kgo.Record{record("t", "bound", "r1", "1"), record("t", "nowhere", "r2", "2")} {
		if err := p.Produce(context.Background(), r, o.promise); err != nil {
			t.Fatalf("produce %s: %v", outbox.EventID(r.Context), err)
		}
	}
	// r2's return may come back before r3 is handed over: then Produce
	// refuses r3 at once, and it never reaches the broker; else r3 is
	// published and failed after r2.
	err := p.Produce(context.Background(), record("t", "bound", "r3", "3"), o.promise)
	published := err == nil
	if !published && !errors.Is(err, ErrHalted) {
		t.Fatalf("produce r3: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var re *ReturnedError
	if o.err("r1") != nil || !errors.As(o.err("r2"), &re) || re.RoutingKey != "nowhere" || published && !errors.Is(o.err("r3"), errAfterFailure) {
		t.Fatalf("outcomes %v: want r1 confirmed, r2 returned, r3 failed after it", o.errs)
	}
	want := "r1 r2"
	if published {
		want += " r3"
	}
	if got := strings.Join(o.got, " "); got != want {
		t.Errorf("promises ran as %s, want %s, in publish order", got, want)
	}
	if err := p.Produce(context.Background(), record("t", "bound", "r4", "4"), o.promise); !errors.Is(err, ErrHalted) {
		t.Fatalf("after a failure: %v, want ErrHalted", err)
	}
	p.Resume()
	produce(t, p, &o, record("t", "bound", "r3", "3"))
	want = "r1 r3"
	if published {
		// r3 reached the queue before it was failed: a duplicate, never
		// a loss, and the relay's order is kept by sending it again.
		want = "r1 r3 r3"
	}
	var ids []string
	for _, m := range s.Await("ret", strings.Count(want, " ")+1, 10*time.Second) {
		ids = append(ids, m.MessageID)
	}
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("queue holds %s, want %s", got, want)
	}
}

// An exchange that does not exist: Ping says so before anything is
// published; a message to one fails with the broker's reason.
func testMissingExchange(t *testing.T, s *rabbitmqtest.Server) {
	p := newPublisher(t, s, Config{Exchange: "no-such-exchange"})
	var me *MissingError
	if err := p.Ping(context.Background()); !errors.As(err, &me) || !isPermanent(err) {
		t.Errorf("Ping: %v, want a permanent *MissingError", err)
	}
	p = newPublisher(t, s, Config{})
	var o outcomes
	produce(t, p, &o, record("no-such-topic-exchange", "", "m1", "1"))
	var ne *NackError
	var ae *amqp.Error
	if err := o.err("m1"); !errors.As(err, &ne) || !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		t.Errorf("publish to a missing exchange: %v, want the channel's 404", err)
	}
}

// A body over the configured limit does not fit; one the server refuses
// (its max_message_size, 4096 here, below the configured 128 MiB) fails,
// and from then on does not fit.
func testSizeLimit(t *testing.T, s *rabbitmqtest.Server) {
	s.Queue("size", "size", "direct", "")
	p := newPublisher(t, s, Config{Exchange: "size", MaxMessageBytes: 100})
	var tl *TooLargeError
	if err := p.Fits(context.Background(), record("t", "", "s0", strings.Repeat("x", 101))); !errors.As(err, &tl) || tl.Max != 100 {
		t.Errorf("Fits over the configured limit: %v", err)
	}
	if err := p.Fits(context.Background(), record("t", "", "s0", strings.Repeat("x", 100))); err != nil {
		t.Errorf("Fits at the limit: %v", err)
	}
	p = newPublisher(t, s, Config{Exchange: "size"})
	var o outcomes
	big := record("t", "", "s1", strings.Repeat("x", 5000))
	produce(t, p, &o, big)
	if o.err("s1") == nil {
		t.Fatal("the server took a message over its max_message_size")
	}
	if err := p.Fits(context.Background(), big); !errors.As(err, &tl) || tl.Max != 4096 || !isPoison(err) {
		t.Errorf("Fits after the refusal: %v, want poison *TooLargeError with the server's 4096", err)
	}
	p.Resume()
	produce(t, p, &o, record("t", "", "s2", "small"))
	if o.err("s2") != nil || len(s.Await("size", 1, 10*time.Second)) != 1 {
		t.Errorf("after Resume: %v", o.err("s2"))
	}
}

// Dead letters go to the queue the dead-letter topic names, through the
// default exchange, whatever the routing settings; Ping refuses a missing
// one, or declares it under autoCreateRoutingKey.
func testDeadLetterQueue(t *testing.T, s *rabbitmqtest.Server) {
	p := newPublisher(t, s, Config{Exchange: "amq.topic", DeadLetterQueue: "pgoutbox.dlq.missing"})
	var me *MissingError
	if err := p.Ping(context.Background()); !errors.As(err, &me) || !isPermanent(err) {
		t.Errorf("Ping: %v, want a permanent *MissingError", err)
	}
	p = newPublisher(t, s, Config{Exchange: "amq.topic", DeadLetterQueue: "pgoutbox.dlq.auto", AutoCreateRoutingKey: true, RoutingKeyDurable: true})
	if err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	var o outcomes
	produce(t, p, &o, record("pgoutbox.dlq.auto", "o-1", "dlq:e1", `{"reason":"x"}`))
	if msgs := s.Await("pgoutbox.dlq.auto", 1, 10*time.Second); o.err("dlq:e1") != nil || len(msgs) != 1 || msgs[0].MessageID != "dlq:e1" {
		t.Errorf("dead letter: %v, queue holds %v", o.errs, msgs)
	}
}

// A refused password stops at start, permanent, without showing it.
func testCredentials(t *testing.T, s *rabbitmqtest.Server) {
	p, err := New(Config{URL: strings.Replace(s.URL, "guest:guest", "guest:s3cret-pw", 1)}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Ping(context.Background())
	var ae *AuthError
	if !errors.As(err, &ae) || !isPermanent(err) || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("Ping with a wrong password: %v, want a permanent *AuthError without the password", err)
	}
}

func isPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

func isPoison(err error) bool {
	var p interface{ Poison() bool }
	return errors.As(err, &p) && p.Poison()
}

// TLS: a server whose certificate the given CA signed is reached over
// amqps://; one no trusted CA signed is refused, permanently.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	ca := tlstest.New(t)
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{TLS: ca})
	connect := func(t *tls.Config) error {
		p, err := New(Config{URL: s.TLSURL, TLS: t}, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		defer p.Close()
		return p.Ping(ctx)
	}
	if err := connect(&tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatalf("trusted: %v", err)
	}
	var auth *AuthError
	if err := connect(&tls.Config{MinVersion: tls.VersionTLS12}); !errors.As(err, &auth) || !auth.Permanent() {
		t.Errorf("an untrusted certificate: %v, want a permanent AuthError", err)
	}
}

// The server killed with messages in flight: they fail, none is counted
// as sent ahead of one that failed; after it is back and Resume, the
// publisher connects again and what it sends arrives.
func TestServerKilled(t *testing.T) {
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{})
	s.Queue("k", "k", "direct", "")
	// Definitions reach the node's disk a moment after they are
	// declared; killed before, it comes back without the binding.
	time.Sleep(2 * time.Second)
	p := newPublisher(t, s, Config{Exchange: "k", AckTimeout: 5 * time.Second})
	var o outcomes
	ctx := context.Background()
	n := 0
	for ; n < 2000; n++ {
		if err := p.Produce(ctx, record("t", "", fmt.Sprint(n), strings.Repeat("x", 200)), o.promise); err != nil {
			break
		}
		if n == 500 {
			s.Kill()
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	failed := false
	for _, id := range o.got {
		if o.errs[id] != nil {
			failed = true
		} else if failed {
			t.Errorf("message %s confirmed after an earlier one failed", id)
		}
	}
	o.mu.Unlock()
	if !failed {
		t.Fatal("the kill failed no message: it tested nothing")
	}
	s.Start()
	p.Resume()
	var after outcomes
	produce(t, p, &after, record("t", "", "after", "1"))
	if err := after.err("after"); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}

// BenchmarkPublish: records of 200 bytes with two headers, each confirmed,
// many in flight, against a local rabbitmq-server (persistent messages to
// a durable queue).
func BenchmarkPublish(b *testing.B) {
	s := rabbitmqtest.Start(b, rabbitmqtest.Options{})
	s.Queue("bench", "bench", "fanout", "")
	p, err := New(Config{URL: s.URL, Exchange: "bench"}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if err := p.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		recs[i] = record("t", "o-1", fmt.Sprint("e", i), strings.Repeat("x", 200), "id", "e", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	}
	var failed sync.Map
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			failed.Store(outbox.EventID(r.Context), err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Produce(ctx, recs[i%len(recs)], promise); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	failed.Range(func(k, v any) bool { b.Fatalf("%v: %v", k, v); return false })
}

// What AMQP 0-9-1 cannot carry does not fit, as poison: a routing key, an
// exchange or a header name over 255 bytes. A dead letter goes through
// the default exchange to its queue, whatever the routing settings.
func TestFitsFields(t *testing.T) {
	p, err := New(Config{URL: "amqp://localhost/", RoutingKeySource: SourceKey, DeadLetterQueue: "dlq"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 256)
	for _, tc := range []struct {
		name  string
		rec   *kgo.Record
		field string
	}{
		{"routing key", record("t", long, "e1", "{}"), "routing key"},
		{"exchange", record(long, "k", "e2", "{}"), "exchange"},
		{"header name", record("t", "k", "e3", "{}", long, "v"), "header name"},
	} {
		var fe *FieldError
		if err := p.Fits(context.Background(), tc.rec); !errors.As(err, &fe) || fe.Field != tc.field || !isPoison(err) {
			t.Errorf("%s: %v, want a poison *FieldError for the %s", tc.name, err, tc.field)
		}
	}
	if err := p.Fits(context.Background(), record("t", strings.Repeat("k", 255), "e4", "{}")); err != nil {
		t.Errorf("a routing key of 255 bytes: %v", err)
	}
	if err := p.Fits(context.Background(), record("dlq", long, "dlq:e1", "{}")); err != nil {
		t.Errorf("a dead letter, routed by its queue's name: %v", err)
	}
}
