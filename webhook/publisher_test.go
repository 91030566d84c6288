package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// endpoint is an HTTP server that keeps what it received, answering each
// request with the status answer gives (200 when nil).
type endpoint struct {
	*httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies []string
	answer func(body string) int
}

func newEndpoint(t *testing.T, answer func(body string) int) *endpoint {
	e := &endpoint{answer: answer}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		status := 200
		if e.answer != nil {
			status = e.answer(string(b))
		}
		e.mu.Lock()
		if status/100 == 2 {
			e.got, e.bodies = append(e.got, r), append(e.bodies, string(b))
		}
		e.mu.Unlock()
		w.WriteHeader(status)
		fmt.Fprint(w, "no thanks")
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) received() ([]*http.Request, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*http.Request(nil), e.got...), append([]string(nil), e.bodies...)
}

func record(topic, id, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte("k"), Context: outbox.WithEventID(context.Background(), id)}
	if value != "" {
		r.Value = []byte(value)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

type outcomes struct {
	mu   sync.Mutex
	errs []error
}

func (o *outcomes) promise(_ *kgo.Record, err error) {
	o.mu.Lock()
	o.errs = append(o.errs, err)
	o.mu.Unlock()
}

func produce(t *testing.T, p *Publisher, recs ...*kgo.Record) []error {
	t.Helper()
	var o outcomes
	for _, r := range recs {
		if err := p.Produce(context.Background(), r, o.promise); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return o.errs
}

func newPublisher(t *testing.T, cfg Config) *Publisher {
	t.Helper()
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Records are POSTed in order, the value as the body with the
// content-type, each header as X-DEBEZIUM-<NAME> in base64 (its last
// value); a tombstone is not sent; a dead letter without a dead-letter URL
// is not sent either, and counts as done.
func TestPublisher(t *testing.T) {
	e := newEndpoint(t, nil)
	p := newPublisher(t, Config{URL: e.URL + "/events", HeaderPrefix: DefaultHeaderPrefix, DeadLetterTopic: "dlq"})
	errs := produce(t, p,
		record("t", "e1", `{"n":1}`, "id", "e1", "eventType", "A", "eventType", "B"),
		record("t", "e2", ""),
		record("dlq", "dlq:e3", `{"dead":true}`),
		record("t", "e4", `{"n":4}`))
	for i, err := range errs {
		if err != nil {
			t.Errorf("promise %d: %v", i, err)
		}
	}
	reqs, bodies := e.received()
	if strings.Join(bodies, "|") != `{"n":1}|{"n":4}` {
		t.Fatalf("bodies %q, want the two events in order", bodies)
	}
	h := reqs[0].Header
	if h.Get("Content-Type") != "application/json" || h.Get("X-Debezium-Id") != base64.StdEncoding.EncodeToString([]byte("e1")) ||
		h.Get("X-Debezium-Eventtype") != base64.StdEncoding.EncodeToString([]byte("B")) || len(h.Values("X-Debezium-Eventtype")) != 1 ||
		reqs[0].URL.Path != "/events" || reqs[0].Method != http.MethodPost {
		t.Errorf("first request %s %s %v", reqs[0].Method, reqs[0].URL, h)
	}
}

// A failed request fails every record after it; a 4xx refusal of a
// record makes it poison when it comes again, after Resume; a 503 does
// not. The URL's password is never in an error.
func TestFailures(t *testing.T) {
	var mu sync.Mutex
	status := map[string]int{`{"n":2}`: 400, `{"n":5}`: 503}
	e := newEndpoint(t, func(body string) int {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := status[body]; ok {
			return s
		}
		return 200
	})
	url := strings.Replace(e.URL, "http://", "http://user:s3cret@", 1)
	p := newPublisher(t, Config{URL: url})
	errs := produce(t, p, record("t", "1", `{"n":1}`), record("t", "2", `{"n":2}`), record("t", "3", `{"n":3}`))
	var se *StatusError
	if errs[0] != nil || !errors.As(errs[1], &se) || se.Status != 400 || !strings.Contains(se.Error(), "no thanks") || !errors.Is(errs[2], errAfterFailure) {
		t.Fatalf("outcomes %v", errs)
	}
	if err := p.Produce(context.Background(), record("t", "4", `{"n":4}`), func(*kgo.Record, error) {}); !errors.Is(err, ErrHalted) {
		t.Fatalf("after a failure: %v, want ErrHalted until Resume", err)
	}
	p.Resume()
	var re *RefusedError
	if err := p.Fits(context.Background(), record("t", "2", `{"n":2}`)); !errors.As(err, &re) || !re.Poison() {
		t.Fatalf("the refused record again: %v, want a poison RefusedError", err)
	}
	errs = produce(t, p, record("t", "3", `{"n":3}`), record("t", "5", `{"n":5}`))
	if errs[0] != nil || !errors.As(errs[1], &se) || se.Status != 503 {
		t.Fatalf("outcomes %v", errs)
	}
	p.Resume()
	if err := p.Fits(context.Background(), record("t", "5", `{"n":5}`)); err != nil {
		t.Errorf("a record answered 503: %v, want it sent again", err)
	}
	// An endpoint that is down: the error names no password.
	down := newPublisher(t, Config{URL: "http://user:s3cret@127.0.0.1:1/x", Timeout: 2 * time.Second})
	errs = produce(t, down, record("t", "1", "x"))
	if errs[0] == nil || strings.Contains(errs[0].Error(), "s3cret") {
		t.Errorf("an endpoint down: %v, want an error without the password", errs[0])
	}
}

// With a secret, each request carries the Standard Webhooks headers: the
// event id as the message id, the same when sent again, and the signature
// of id, time and body.
func TestSignature(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	e := newEndpoint(t, nil)
	p := newPublisher(t, Config{URL: e.URL, WebhookSecret: "whsec_" + base64.StdEncoding.EncodeToString(key)})
	produce(t, p, record("t", "e-1", `{"n":1}`))
	reqs, bodies := e.received()
	h := reqs[0].Header
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "." + bodies[0]))
	if h.Get("webhook-id") != "msg_e-1" || h.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
		t.Errorf("headers %v", h)
	}
	if _, err := New(Config{URL: e.URL, WebhookSecret: "whsec_c2hvcnQ="}, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a secret of 5 bytes was taken")
	}
}
