package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// gate makes the endpoint hold its first request until the test has
// queued the others, so that they wait and go in batches of BatchMaxSize.
type gate struct {
	once              sync.Once
	arrived, released chan struct{}
}

func newGate() *gate { return &gate{arrived: make(chan struct{}), released: make(chan struct{})} }

func (g *gate) hold() {
	g.once.Do(func() {
		close(g.arrived)
		<-g.released
	})
}

// produceBatched sends first alone, then the others while the endpoint
// holds first's request, and returns every record's outcome in order.
func produceBatched(t *testing.T, p *Publisher, g *gate, first *kgo.Record, rest ...*kgo.Record) []error {
	t.Helper()
	out := make([]error, 1+len(rest))
	var wg sync.WaitGroup
	for i, r := range append([]*kgo.Record{first}, rest...) {
		wg.Add(1)
		if err := p.Produce(context.Background(), r, func(_ *kgo.Record, err error) { out[i] = err; wg.Done() }); err != nil {
			out[i] = err
			wg.Done()
		}
		if i == 0 {
			<-g.arrived
		}
	}
	close(g.released)
	wg.Wait()
	return out
}

func numbered(from, to int) []*kgo.Record {
	var out []*kgo.Record
	for n := from; n <= to; n++ {
		id := fmt.Sprintf("e%d", n)
		out = append(out, record("t", id, fmt.Sprintf(`{"n":%d}`, n), "id", id))
	}
	return out
}

// With BatchMaxSize, the records that waited go as one POST of the JSON
// array of their values, at most BatchMaxSize, in order, with the first
// record's headers, signed over the array with msg_<first event id>-<count>
// as the message id; a tombstone is not sent, a dead letter goes alone to
// the dead-letter URL, its value as the body.
func TestBatches(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	g := newGate()
	e := newEndpoint(t, func(string) int { g.hold(); return 200 })
	p := newPublisher(t, Config{URL: e.URL + "/events", DeadLetterURL: e.URL + "/dlq", DeadLetterTopic: "dlq", HeaderPrefix: DefaultHeaderPrefix,
		BatchMaxSize: 3, WebhookSecret: "whsec_" + base64.StdEncoding.EncodeToString(key)})
	recs := numbered(1, 8)
	rest := append(recs[1:7:7], record("t", "tomb", ""), record("dlq", "dlq:e9", `{"dead":true}`), recs[7])
	for i, err := range produceBatched(t, p, g, recs[0], rest...) {
		if err != nil {
			t.Errorf("promise %d: %v", i, err)
		}
	}
	reqs, bodies := e.received()
	want := []struct{ path, body, first, count string }{
		{"/events", `[{"n":1}]`, "e1", "1"},
		{"/events", `[{"n":2},{"n":3},{"n":4}]`, "e2", "3"},
		{"/events", `[{"n":5},{"n":6},{"n":7}]`, "e5", "3"},
		{"/dlq", `{"dead":true}`, "", ""},
		{"/events", `[{"n":8}]`, "e8", "1"},
	}
	if len(reqs) != len(want) {
		t.Fatalf("requests %q, want %d", bodies, len(want))
	}
	for i, w := range want {
		h := reqs[i].Header
		if reqs[i].URL.Path != w.path || bodies[i] != w.body || h.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: %s %s %s, want %s %s", i, reqs[i].URL.Path, bodies[i], h.Get("Content-Type"), w.path, w.body)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "." + bodies[i]))
		if h.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
			t.Errorf("request %d: the signature does not verify over the body: %v", i, h)
		}
		if w.first == "" {
			if h.Get("webhook-id") != "msg_dlq:e9" {
				t.Errorf("the dead letter's webhook-id %q", h.Get("webhook-id"))
			}
			continue
		}
		if got := h.Get("X-Debezium-Id"); got != base64.StdEncoding.EncodeToString([]byte(w.first)) || len(h.Values("X-Debezium-Id")) != 1 {
			t.Errorf("request %d: X-DEBEZIUM-ID %q, want the first record's, %s", i, got, w.first)
		}
		if got := h.Get("webhook-id"); got != "msg_"+w.first+"-"+w.count {
			t.Errorf("request %d: webhook-id %q, want msg_%s-%s", i, got, w.first, w.count)
		}
	}
}

// A batch that fails fails its records and every later one; one refused
// with a 4xx is sent again record by record, so that the refusal is one
// record's (dead-lettered when it comes again) and the records before it
// count as sent; a batch refused whole (413) is taken record by record.
func TestBatchFailures(t *testing.T) {
	after := func(err error) bool { return errors.Is(err, errAfterFailure) }
	status := func(s int) func(error) bool {
		return func(err error) bool {
			var se *StatusError
			return errors.As(err, &se) && se.Status == s
		}
	}
	ok := func(err error) bool { return err == nil }
	for _, tc := range []struct {
		name    string
		answer  func(body string) int
		want    []func(error) bool // e1..e8
		bodies  string             // the requests taken, | between
		refused string             // the record Fits refuses after
	}{
		{"500", func(b string) int {
			if strings.Contains(b, `"n":6`) {
				return 500
			}
			return 200
		}, []func(error) bool{ok, ok, ok, ok, status(500), status(500), status(500), after},
			`[{"n":1}]|[{"n":2},{"n":3},{"n":4}]`, ""},
		{"400", func(b string) int {
			if strings.Contains(b, `"n":6`) {
				return 400
			}
			return 200
		}, []func(error) bool{ok, ok, ok, ok, ok, status(400), status(400), after},
			`[{"n":1}]|[{"n":2},{"n":3},{"n":4}]|[{"n":5}]`, `{"n":6}`},
		{"413", func(b string) int {
			if strings.Contains(b, "},{") {
				return 413
			}
			return 200
		}, []func(error) bool{ok, ok, ok, ok, ok, ok, ok, ok},
			`[{"n":1}]|[{"n":2}]|[{"n":3}]|[{"n":4}]|[{"n":5}]|[{"n":6}]|[{"n":7}]|[{"n":8}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate()
			e := newEndpoint(t, func(b string) int { g.hold(); return tc.answer(b) })
			p := newPublisher(t, Config{URL: e.URL, BatchMaxSize: 3})
			recs := numbered(1, 8)
			errs := produceBatched(t, p, g, recs[0], recs[1:]...)
			for i, err := range errs {
				if !tc.want[i](err) {
					t.Errorf("e%d: %v", i+1, err)
				}
			}
			if _, bodies := e.received(); strings.Join(bodies, "|") != tc.bodies {
				t.Errorf("taken %q, want %q", strings.Join(bodies, "|"), tc.bodies)
			}
			p.Resume()
			for _, r := range recs {
				var re *RefusedError
				if err := p.Fits(context.Background(), r); errors.As(err, &re) != (string(r.Value) == tc.refused) {
					t.Errorf("Fits(%s) = %v", r.Value, err)
				}
			}
		})
	}
}

// Each batch request carries the OAuth2 token, one token for all.
func TestBatchOAuth2(t *testing.T) {
	as := newAuthServer(t, 3600)
	g := newGate()
	e := newEndpoint(t, func(string) int { g.hold(); return 200 })
	p := newPublisher(t, Config{URL: e.URL, BatchMaxSize: 3, OAuth2: &OAuth2{TokenURL: as.URL + "/token", ClientID: "relay", ClientSecret: "s3cret"}})
	recs := numbered(1, 5)
	for i, err := range produceBatched(t, p, g, recs[0], recs[1:]...) {
		if err != nil {
			t.Errorf("promise %d: %v", i, err)
		}
	}
	_, bodies := e.received()
	if got := strings.Join(authorizations(e), "|"); got != "Bearer tok-1|Bearer tok-1|Bearer tok-1" || len(bodies) != 3 {
		t.Errorf("authorizations %q of %q, want Bearer tok-1 on each of 3 requests", got, bodies)
	}
	if n := len(as.requests()); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
}
