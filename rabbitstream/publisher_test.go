package rabbitstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

func newPublisher(t testing.TB, s *rabbitmqtest.Server, cfg Config) *Publisher {
	t.Helper()
	if cfg.URI == "" {
		cfg.URI = s.StreamURL
	}
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// record is a record with its id as the id header, as the router sets it;
// a key of "-" is none.
func record(topic, key, id, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(id)}}}
	if key != "-" {
		r.Key = []byte(key)
	}
	if value != "" {
		r.Value = []byte(value)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

func idOf(r *kgo.Record) string { return string(r.Headers[0].Value) }

// outcomes collects promises in the order they run.
type outcomes struct {
	mu   sync.Mutex
	got  []string
	errs map[string]error
}

func (o *outcomes) promise(r *kgo.Record, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, idOf(r))
	if err != nil {
		if o.errs == nil {
			o.errs = map[string]error{}
		}
		o.errs[idOf(r)] = err
	}
}

func produce(t *testing.T, p *Publisher, o *outcomes, recs ...*kgo.Record) {
	t.Helper()
	for _, r := range recs {
		if err := p.Produce(context.Background(), r, o.promise); err != nil {
			t.Fatalf("produce %s: %v", idOf(r), err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// Records reach the streams named like their topics, created on first
// use with the configured retention, as Debezium Server's sink writes
// them: the key as message-id, the headers as string application
// properties, the value as the body (null.value for a tombstone); each
// promise after the broker's confirm, in send order.
func TestPublisher(t *testing.T) {
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{Streams: true})
	p := newPublisher(t, s, Config{MaxAge: time.Hour, MaxLengthBytes: 5e9})
	if err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	var o outcomes
	var recs []*kgo.Record
	for i := range 300 {
		topic := "orders"
		if i%3 == 0 {
			topic = "payments"
		}
		recs = append(recs, record(topic, fmt.Sprint("agg-", i%7), fmt.Sprint("e", i), fmt.Sprintf(`{"n":%d}`, i), "eventType", "Created"))
	}
	recs = append(recs, record("orders", "agg-1", "tomb", ""), record("orders", "-", "nokey", "v"))
	produce(t, p, &o, recs...)
	if len(o.errs) > 0 || len(o.got) != len(recs) {
		t.Fatalf("%d promises, failures %v", len(o.got), o.errs)
	}
	for i, id := range o.got {
		if want := idOf(recs[i]); id != want {
			t.Fatalf("promise %d was %s's, want %s's: out of send order", i, id, want)
		}
	}
	orders := s.ReadStream("orders", 202, 30*time.Second)
	payments := s.ReadStream("payments", 100, 30*time.Second)
	if len(orders) != 202 || len(payments) != 100 {
		t.Fatalf("orders %d messages, payments %d; want 202 and 100", len(orders), len(payments))
	}
	m := orders[0]
	if m.MessageID != "agg-1" || string(m.Data) != `{"n":1}` || m.Properties["id"] != "e1" || m.Properties["eventType"] != "Created" {
		t.Errorf("first orders message: %+v", m)
	}
	if tomb := orders[200]; string(tomb.Data) != DefaultNullValue || tomb.MessageID != "agg-1" {
		t.Errorf("tombstone: %+v, want body %q", tomb, DefaultNullValue)
	}
	if nokey := orders[201]; nokey.MessageID != "" || string(nokey.Data) != "v" {
		t.Errorf("a record without a key: %+v, want no message-id", nokey)
	}
	for i, m := range payments {
		if want := fmt.Sprintf(`{"n":%d}`, 3*i); string(m.Data) != want {
			t.Fatalf("payments %d: %s, want %s: out of order", i, m.Data, want)
		}
	}
	// The retention the stream was created with: RabbitMQ refuses to
	// declare it again with other arguments.
	ch := s.Channel()
	args := amqp091.Table{"x-queue-type": "stream", "x-max-age": "3600s", "x-max-length-bytes": int64(5e9), "x-queue-leader-locator": "least-leaders"}
	if _, err := ch.QueueDeclare("orders", true, false, false, false, args); err != nil {
		t.Fatalf("declared with its own retention: %v", err)
	}
	args["x-max-age"] = "7200s"
	var ae *amqp091.Error
	if _, err := ch.QueueDeclare("orders", true, false, false, false, args); !errors.As(err, &ae) || ae.Code != amqp091.PreconditionFailed {
		t.Errorf("declared with another max age: %v, want it refused: the max age was not the one configured", err)
	}
}

// A message that does not fit in the largest frame is poison before it is
// sent; a stream name RabbitMQ cannot take too.
func TestFits(t *testing.T) {
	p, err := New(Config{URI: "rabbitmq-stream://localhost:5552/"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Fits(ctx, record("t", "k", "e", strings.Repeat("x", DefaultMaxFrameBytes-200))); err != nil {
		t.Errorf("a message that fits: %v", err)
	}
	var tl *TooLargeError
	if err := p.Fits(ctx, record("t", "k", "e", strings.Repeat("x", DefaultMaxFrameBytes))); !errors.As(err, &tl) || !tl.Poison() {
		t.Errorf("a message over the frame: %v, want a poison TooLargeError", err)
	}
	var ne *NameError
	if err := p.Fits(ctx, record(strings.Repeat("s", 256), "k", "e", "v")); !errors.As(err, &ne) || !ne.Poison() {
		t.Errorf("a stream name of 256 bytes: %v, want a poison NameError", err)
	}
}

// The exact size and the bound Fits uses before encoding: the bound is
// never below the exact size.
func TestSizeBound(t *testing.T) {
	m := mapping{nullValue: DefaultNullValue}
	for _, r := range []*kgo.Record{
		record("t", "k", "e", "v"),
		record("t", "-", "e", ""),
		record("t", strings.Repeat("k", 300), "e", strings.Repeat("v", 70000), "h", strings.Repeat("x", 300), "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
	} {
		n, err := m.exactSize(r)
		if err != nil {
			t.Fatal(err)
		}
		if b := m.size(r); b < n {
			t.Errorf("bound %d below the exact size %d", b, n)
		}
	}
}

// Over TLS, the server's certificate is verified: trusted, the publisher
// connects and sends; untrusted, the refusal is permanent.
func TestTLS(t *testing.T) {
	ca := tlstest.New(t)
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{Streams: true, TLS: ca})
	trusted := newPublisher(t, s, Config{URI: s.StreamTLSURL, TLS: &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}})
	var o outcomes
	produce(t, trusted, &o, record("tls", "k", "e1", "v"))
	if len(o.errs) > 0 {
		t.Fatalf("trusted: %v", o.errs)
	}
	if got := s.ReadStream("tls", 1, 30*time.Second); len(got) != 1 {
		t.Fatalf("trusted: %d messages in the stream", len(got))
	}
	untrusted := newPublisher(t, s, Config{URI: s.StreamTLSURL})
	var auth *AuthError
	if err := untrusted.Ping(context.Background()); !errors.As(err, &auth) || !auth.Permanent() {
		t.Errorf("an untrusted certificate: %v, want a permanent AuthError", err)
	}
}

// Wrong credentials are permanent.
func TestAuth(t *testing.T) {
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{Streams: true})
	p := newPublisher(t, s, Config{URI: strings.Replace(s.StreamURL, "guest:guest", "guest:wrong", 1)})
	err := p.Ping(context.Background())
	var auth *AuthError
	if !errors.As(err, &auth) || !auth.Permanent() {
		t.Fatalf("wrong password: %v, want a permanent AuthError", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// The server killed with messages in flight: they fail, none is counted
// as sent after one that failed; once it is back and Resume, the
// publisher connects again and what it sends arrives.
func TestServerKilled(t *testing.T) {
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{Streams: true})
	p := newPublisher(t, s, Config{AckTimeout: 5 * time.Second})
	var o outcomes
	// The stream's definition reaches the node's disk a moment after it
	// is created; killed before, it comes back without it.
	produce(t, p, &o, record("k", "a", "first", "1"))
	time.Sleep(2 * time.Second)
	ctx := context.Background()
	n := 0
	for ; n < 3000; n++ {
		if err := p.Produce(ctx, record("k", "a", fmt.Sprint(n), strings.Repeat("x", 200)), o.promise); err != nil {
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
	// As the relay's sessions do: Resume, and try again while the
	// stream's leader is not up yet.
	var after outcomes
	deadline := time.Now().Add(time.Minute)
	for {
		p.Resume()
		err := p.Produce(ctx, record("k", "a", "after", "1"), after.promise)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The restart may have taken the first flush's time: a time of its
	// own, past the ack timeout.
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	if err := p.Flush(actx); err != nil {
		t.Fatal(err)
	}
	if err := after.errs["after"]; err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	got := s.ReadStream("k", 1, 30*time.Second)
	if len(got) == 0 || got[len(got)-1].Properties["id"] != "after" {
		t.Fatalf("the message sent after the restart is not the stream's last")
	}
}

// BenchmarkPublish: records of 200 bytes with two headers, each confirmed,
// many in flight, against a local rabbitmq-server's stream.
func BenchmarkPublish(b *testing.B) {
	s := rabbitmqtest.Start(b, rabbitmqtest.Options{Streams: true})
	p := newPublisher(b, s, Config{})
	ctx := context.Background()
	if err := p.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		recs[i] = record("bench", "o-1", fmt.Sprint("e", i), strings.Repeat("x", 200), "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	}
	var failed sync.Map
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			failed.Store(idOf(r), err)
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

// TestMain quiets the stream client's global logger, which writes to the
// standard logger; the binary routes it to its own log.
func TestMain(m *testing.M) {
	logs.SetLogger(quiet{})
	os.Exit(m.Run())
}

type quiet struct{}

func (quiet) Info(string, ...any)  {}
func (quiet) Error(string, ...any) {}
func (quiet) Debug(string, ...any) {}
func (quiet) Warn(string, ...any)  {}
