package pubsub

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

	"github.com/pgoutbox/pgoutbox/test/pubsubtest"
	"github.com/pgoutbox/pgoutbox/test/sinktest"
)

func publisher(t *testing.T, s *pubsubtest.Server, cfg Config) *Publisher {
	t.Helper()
	cfg.ProjectID, cfg.Address = pubsubtest.Project, s.Address()
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
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

// Each record goes to its topic, its value as the data, its headers as
// attributes (a name's last value), its key as the ordering key (null.key
// without one); promises run in produce order, each ordering key's
// messages arrive in order; a tombstone with headers is a message of
// attributes only.
func TestPublishesInOrder(t *testing.T) {
	s := pubsubtest.Start(t)
	s.CreateTopic(t, "orders")
	s.CreateTopic(t, "payments")
	p := publisher(t, s, Config{Ordering: true})
	var recs []*kgo.Record
	want := map[string][]string{}
	for i := range 60 {
		key, v := fmt.Sprintf("o-%d", i%3), fmt.Sprintf(`{"n":%d}`, i)
		recs = append(recs, record("orders", key, v, "id", "x", "id", fmt.Sprint(i)))
		want[key] = append(want[key], v)
	}
	recs = append(recs, record("orders", "", `{"no":"key"}`, "id", "k"), record("orders", "o-1", "", "id", "gone"), record("payments", "p-1", `{"p":1}`))
	want["default"] = []string{`{"no":"key"}`}
	want["o-1"] = append(want["o-1"], "")
	got, errs := sinktest.Produce(t, p, recs)
	for i, err := range errs {
		if err != nil || got[i] != recs[i] {
			t.Fatalf("promise %d: %v", i, err)
		}
	}
	msgs := s.Pull(t, "orders", 62, time.Minute, nil)
	byKey := map[string][]string{}
	for _, m := range msgs {
		byKey[m.OrderingKey] = append(byKey[m.OrderingKey], string(m.Data))
		if m.Attributes["id"] == "x" || len(m.Attributes) != 1 {
			t.Fatalf("attributes %v: want id, its last value", m.Attributes)
		}
	}
	for k, v := range want {
		if !slices.Equal(byKey[k], v) {
			t.Errorf("ordering key %s: %v, want %v", k, byKey[k], v)
		}
	}
	if pay := s.Pull(t, "payments", 1, time.Minute, nil); string(pay[0].Data) != `{"p":1}` || pay[0].OrderingKey != "p-1" {
		t.Errorf("payments: %+v", pay)
	}
}

// A message Pub/Sub does not take is refused before it is sent, as
// poison.
func TestFitsRefuses(t *testing.T) {
	p := &Publisher{cfg: Config{Ordering: true, NullKey: DefaultNullKey}}
	for _, r := range []*kgo.Record{
		record("orders", "k", ""),                                     // no data, no attributes
		record("orders", "k", "v", "id", strings.Repeat("x", 1025)),   // an attribute too long
		record("goog-orders", "k", "v"),                               // a name Pub/Sub keeps
		record("or", "k", "v"),                                        // a name too short
		record("orders", strings.Repeat("k", 1025), "v"),              // an ordering key too long
		record("orders", "k", strings.Repeat("x", maxMessageBytes+1)), // too large
	} {
		err := p.Fits(context.Background(), r)
		var poison interface{ Poison() bool }
		if !errors.As(err, &poison) || !poison.Poison() {
			t.Errorf("Fits(%s, %d bytes): %v, want poison", r.Topic, len(r.Value), err)
		}
	}
	if err := p.Fits(context.Background(), record("orders", "k", "", "id", "1")); err != nil {
		t.Errorf("a tombstone with a header: %v", err)
	}
}

// A topic that does not exist fails its message, halting the publisher;
// after Resume, messages go through again.
func TestMissingTopicHalts(t *testing.T) {
	s := pubsubtest.Start(t)
	s.CreateTopic(t, "there")
	p := publisher(t, s, Config{Ordering: true, Timeout: 10 * time.Second})
	_, errs := sinktest.Produce(t, p, []*kgo.Record{record("there", "k", "1"), record("missing", "k", "2"), record("there", "k", "3")})
	var pe *PublishError
	if errs[0] != nil || !errors.As(errs[1], &pe) || !errors.Is(errs[2], errAfterFailure) && !errors.As(errs[2], &pe) {
		t.Fatalf("outcomes %v; want nil, the missing topic's, one after it", errs)
	}
	if err := p.Produce(context.Background(), record("there", "k", "4"), func(*kgo.Record, error) {}); !errors.Is(err, ErrHalted) {
		t.Errorf("Produce after the failure: %v, want ErrHalted", err)
	}
	p.Resume()
	if _, errs := sinktest.Produce(t, p, []*kgo.Record{record("there", "k", "5")}); errs[0] != nil {
		t.Fatalf("after Resume: %v", errs[0])
	}
}
