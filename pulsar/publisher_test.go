package pulsar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/pulsartest"
	"github.com/pgoutbox/pgoutbox/test/sinktest"
)

func publisher(t *testing.T, url string, cfg Config) *Publisher {
	t.Helper()
	cfg.ServiceURL = url
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// produce hands recs over and waits for their outcomes, in the order the
// promises ran.
func produce(t *testing.T, p *Publisher, recs []*kgo.Record) ([]*kgo.Record, []error) {
	t.Helper()
	return sinktest.Produce(t, p, recs)
}

func record(topic, key, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic}
	if key != "" {
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

// Each record goes to its topic in the tenant and namespace, its key as
// the message key (null.key without one), its headers as properties (a
// name's last value), its value as the payload (empty for a tombstone);
// promises run in produce order, each topic's messages in order.
func TestPublishesInOrder(t *testing.T) {
	s := pulsartest.Start(t)
	p := publisher(t, s.ServiceURL(), Config{})
	var recs []*kgo.Record
	var want []string
	for i := range 200 {
		v := fmt.Sprintf(`{"n":%d}`, i)
		recs = append(recs, record("orders", "o-1", v, "id", "x", "id", "y"))
		want = append(want, v)
	}
	recs = append(recs, record("orders", "", `{"no":"key"}`), record("orders", "o-2", ""), record("payments", "p-1", `{"p":1}`))
	got, errs := produce(t, p, recs)
	for i, err := range errs {
		if err != nil || got[i] != recs[i] {
			t.Fatalf("promise %d: %v", i, err)
		}
	}
	msgs := s.Messages("orders")
	if len(msgs) != 202 {
		t.Fatalf("%d messages in orders, want 202", len(msgs))
	}
	var payloads []string
	for _, m := range msgs[:200] {
		payloads = append(payloads, string(m.Payload))
		if m.Key != "o-1" || m.Properties["id"] != "y" || len(m.Properties) != 1 {
			t.Fatalf("message key %q, properties %v; want o-1, id=y", m.Key, m.Properties)
		}
	}
	if !slices.Equal(payloads, want) {
		t.Errorf("payloads out of order")
	}
	if m := msgs[200]; m.Key != "default" || string(m.Payload) != `{"no":"key"}` {
		t.Errorf("a record without a key: key %q, payload %s", m.Key, m.Payload)
	}
	if m := msgs[201]; m.Key != "o-2" || len(m.Payload) != 0 {
		t.Errorf("a tombstone: key %q, payload %q", m.Key, m.Payload)
	}
	if pay := s.Messages("payments"); len(pay) != 1 || pay[0].Key != "p-1" {
		t.Errorf("payments: %+v", pay)
	}
}

// A topic name with a '/' or a payload larger than the broker takes is
// refused before it is sent, as poison.
func TestFitsRefuses(t *testing.T) {
	p := &Publisher{cfg: Config{}}
	p.limit.Store(100)
	for _, r := range []*kgo.Record{record("a/b", "k", "v"), record("", "k", "v"), record("t", "k", strings.Repeat("x", 101))} {
		err := p.Fits(context.Background(), r)
		var poison interface{ Poison() bool }
		if !errors.As(err, &poison) || !poison.Poison() {
			t.Errorf("Fits(%q, %d bytes): %v, want poison", r.Topic, len(r.Value), err)
		}
	}
	if err := p.Fits(context.Background(), record("t", "k", strings.Repeat("x", 100))); err != nil {
		t.Errorf("100 bytes: %v", err)
	}
}

// The broker killed: a message sent meanwhile fails once its send times
// out, halting the publisher, and the messages after it are not counted;
// once the broker is back and the publisher resumed, records go through.
func TestBrokerKilled(t *testing.T) {
	s := pulsartest.Start(t)
	p := publisher(t, s.ServiceURL(), Config{SendTimeout: 3 * time.Second})
	if _, errs := produce(t, p, []*kgo.Record{record("events", "k", "1")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	s.Kill()
	_, errs := produce(t, p, []*kgo.Record{record("events", "k", "2"), record("events", "k", "3")})
	var se *SendError
	if !errors.As(errs[0], &se) || !errors.Is(errs[1], errAfterFailure) && !errors.As(errs[1], &se) {
		t.Fatalf("outcomes while the broker is down: %v", errs)
	}
	if err := p.Produce(context.Background(), record("events", "k", "4"), func(*kgo.Record, error) {}); !errors.Is(err, ErrHalted) {
		t.Errorf("Produce after the failure: %v, want ErrHalted", err)
	}
	s.Restart()
	p.Resume()
	if _, errs := produce(t, p, []*kgo.Record{record("events", "k", "5")}); errs[0] != nil {
		t.Fatalf("after the restart: %v", errs[0])
	}
	var payloads []string
	for _, m := range s.Messages("events") {
		payloads = append(payloads, string(m.Payload))
	}
	if payloads[0] != "1" || payloads[len(payloads)-1] != "5" {
		t.Errorf("payloads %v: want 1 first and 5 last", payloads)
	}
}
