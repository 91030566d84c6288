package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/rocketmqtest"
	"github.com/pgoutbox/pgoutbox/test/sinktest"
)

func publisher(t *testing.T, nameServer string, cfg Config) *Publisher {
	t.Helper()
	cfg.NameServers = []string{nameServer}
	p, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func record(topic, key, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(key)}
	if value != "" {
		r.Value = []byte(value)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// Records of many keys, in batches: each in the queue its key picks as
// the Java client's SelectMessageQueueByHash, each queue's in produce
// order, the key as KEYS, a header's last value as a user property, a
// message id (UNIQ_KEY) of the Java client's form; promises in produce
// order. A topic that does not exist is created by the broker from TBW102
// with four queues.
func TestPublishesInOrder(t *testing.T) {
	s := rocketmqtest.Start(t)
	s.CreateTopic("orders", 3)
	p := publisher(t, s.NameServer(), Config{})
	if err := p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 600 {
		k := fmt.Sprintf("o-%d", i%17)
		recs = append(recs, record("orders", k, fmt.Sprintf(`{"n":%d}`, i), "id", "x", "id", fmt.Sprint(i), "eventType", "Placed"))
	}
	recs = append(recs, record("new_topic", "주문-1", `{"new":1}`), record("new_topic", "o-2", `{"new":2}`))
	got, errs := sinktest.Produce(t, p, recs)
	for i, err := range errs {
		if err != nil || got[i] != recs[i] {
			t.Fatalf("promise %d: %v", i, err)
		}
	}
	msgs := s.Messages("orders")
	if len(msgs) != 600 {
		t.Fatalf("%d messages in orders, want 600", len(msgs))
	}
	last := map[string]int{}
	ids := map[string]bool{}
	for _, m := range msgs {
		var n int
		if _, err := fmt.Sscanf(string(m.Body), `{"n":%d}`, &n); err != nil {
			t.Fatalf("body %q", m.Body)
		}
		want := fmt.Sprintf("o-%d", n%17)
		if m.Keys != want || m.Queue != pick(want, 3) {
			t.Fatalf("message %d: keys %q queue %d, want %q in queue %d", n, m.Keys, m.Queue, want, pick(want, 3))
		}
		if prev, ok := last[m.Keys]; ok && n <= prev {
			t.Fatalf("key %s: %d after %d", m.Keys, n, prev)
		}
		last[m.Keys] = n
		if m.Properties["id"] != fmt.Sprint(n) || m.Properties["eventType"] != "Placed" || len(m.Properties) != 2 {
			t.Fatalf("message %d: properties %v", n, m.Properties)
		}
		if len(m.MsgID) != 32 || ids[m.MsgID] || m.System["WAIT"] != "true" {
			t.Fatalf("message %d: id %q (seen %v), WAIT %q", n, m.MsgID, ids[m.MsgID], m.System["WAIT"])
		}
		ids[m.MsgID] = true
	}
	if q := s.Queues("new_topic"); q != 4 {
		t.Fatalf("the created topic has %d queues, want 4", q)
	}
	created := s.Messages("new_topic")
	if len(created) != 2 {
		t.Fatalf("%d messages in new_topic, want 2", len(created))
	}
	for _, m := range created {
		if m.Queue != pick(m.Keys, 4) {
			t.Errorf("key %q in queue %d, want %d", m.Keys, m.Queue, pick(m.Keys, 4))
		}
	}
}

// What RocketMQ or Debezium Server's sink refuses is refused before it is
// sent, as poison: nothing reaches the broker.
func TestRefusesBeforeSending(t *testing.T) {
	p, err := New(Config{NameServers: []string{"127.0.0.1:1"}, MaxMessageBytes: 100, DeadLetterTopic: "slot_dlq"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	noKey := record("orders", "", "v")
	noKey.Key = nil
	deadNoKey := record("slot_dlq", "", "v")
	deadNoKey.Key = nil
	for name, c := range map[string]struct {
		r    *kgo.Record
		want string
	}{
		"a dot":           {record("outbox.event.order", "k", "v"), "no '.'"},
		"too long":        {record(strings.Repeat("t", 128), "k", "v"), "1 to 127"},
		"system topic":    {record("TBW102", "k", "v"), "system topics"},
		"no key":          {noKey, "key: none"},
		"tombstone":       {record("orders", "k", ""), "tombstone"},
		"empty":           {&kgo.Record{Topic: "orders", Key: []byte("k"), Value: []byte{}}, "empty"},
		"too large":       {record("orders", "k", strings.Repeat("x", 101)), "larger than the 100"},
		"system property": {record("orders", "k", "v", "KEYS", "x"), "system properties"},
		"blank value":     {record("orders", "k", "v", "h", " "), "blank"},
		"separator":       {record("orders", "k", "v", "h", "a\x01b"), "control character"},
		"key separator":   {record("orders", "k\x02", "v"), "control character"},
		"long properties": {record("orders", "k", "v", "h", strings.Repeat("p", 40000)), "at most 32767"},
	} {
		err := p.Fits(context.Background(), c.r)
		var poison interface{ Poison() bool }
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &poison) || !poison.Poison() {
			t.Errorf("%s: %v, want poison saying %q", name, err, c.want)
		}
	}
	if err := p.Fits(context.Background(), deadNoKey); err != nil {
		t.Errorf("a dead letter without a key: %v", err)
	}
	if err := p.Fits(context.Background(), record("orders", "k", "v", "h", "x")); err != nil {
		t.Errorf("a record RocketMQ takes: %v", err)
	}
}

// The broker killed while records are in flight: what was not stored
// fails, none after a failure counts as sent, the session is replaced and
// publishing goes on once the broker is back. Nothing is lost: every
// record whose promise said sent is stored, in order.
func TestBrokerKilled(t *testing.T) {
	s := rocketmqtest.Start(t)
	s.CreateTopic("orders", 2)
	p := publisher(t, s.NameServer(), Config{SendTimeout: 2 * time.Second})
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, record("orders", "o-1", fmt.Sprintf(`{"n":%d}`, i)))
	}
	if _, errs := sinktest.Produce(t, p, recs); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	s.Kill()
	if err := tryProduce(p, []*kgo.Record{record("orders", "o-1", `{"n":100}`)}); err == nil {
		t.Fatal("a record to a killed broker counted as sent")
	}
	s.Restart()
	var again []*kgo.Record
	for i := 100; i < 150; i++ {
		again = append(again, record("orders", "o-1", fmt.Sprintf(`{"n":%d}`, i)))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		p.Resume() // as the relay does between sessions
		err := tryProduce(p, again)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no publishing after the restart: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var ns []int
	for _, m := range s.Messages("orders") {
		var n int
		fmt.Sscanf(string(m.Body), `{"n":%d}`, &n)
		ns = append(ns, n)
	}
	seen := map[int]bool{}
	prev := -1
	for _, n := range ns {
		if n < prev && !seen[n] {
			t.Fatalf("%d stored after %d for the first time: %v", n, prev, ns)
		}
		seen[n] = true
		prev = n
	}
	for i := range 150 {
		if !seen[i] {
			t.Fatalf("%d acknowledged but not stored: %v", i, ns)
		}
	}
}

// tryProduce hands recs over and waits for their outcomes: the first
// failure, of Produce or a promise.
func tryProduce(p *Publisher, recs []*kgo.Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, len(recs))
	n := 0
	for _, r := range recs {
		if err := p.Produce(ctx, r, func(_ *kgo.Record, err error) { errs <- err }); err != nil {
			break
		}
		n++
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	for range n {
		if err := <-errs; err != nil {
			return err
		}
	}
	if n < len(recs) {
		return errors.New("Produce refused a record")
	}
	return nil
}

// No name server answering: Ping says so.
func TestPingNoNameServer(t *testing.T) {
	p, err := New(Config{NameServers: []string{"127.0.0.1:1"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "no name server answers") {
		t.Fatalf("Ping: %v", err)
	}
}
