package natsjs

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/test/natstest"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

func newJetStream(t *testing.T, s *natstest.Server, cfg Config) *JetStream {
	t.Helper()
	cfg.URLs = []string{s.URL}
	j, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

// record is an event's record: its id on its context, as the relay sets it.
func record(topic, id, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Context: outbox.WithEventID(context.Background(), id)}
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

// A record becomes a message as Debezium Server's sink makes it: subject
// the topic, data the value, its headers; a tombstone is not published.
// The event id is Nats-Msg-Id, and the stream drops a copy sent again.
func TestPublish(t *testing.T) {
	ctx := context.Background()
	s := natstest.Start(t)
	s.CreateStream("events", "outbox.event.>")
	j := newJetStream(t, s, Config{})
	var o outcomes
	recs := []*kgo.Record{
		record("outbox.event.order", "e1", `{"n":1}`, "id", `"e1"`, "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
		record("outbox.event.order", "e2", ""), // a tombstone
		record("outbox.event.payment", "e3", `{"n":3}`),
		record("outbox.event.order", "e1", `{"n":1}`, "id", `"e1"`), // sent again
	}
	for _, r := range recs {
		if err := j.Produce(ctx, r, o.promise); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(o.got) != "[e1 e2 e3 e1]" || o.errs != nil {
		t.Fatalf("promises %v, failures %v; want e1 e2 e3 e1, none", o.got, o.errs)
	}
	msgs := s.Messages("events")
	if len(msgs) != 2 {
		t.Fatalf("%d messages stored, want 2 (no tombstone, the copy dropped): %+v", len(msgs), msgs)
	}
	m := msgs[0]
	if m.Subject != "outbox.event.order" || string(m.Data) != `{"n":1}` || m.Header.Get("id") != `"e1"` ||
		m.Header.Get("traceparent") == "" || m.Header.Get(headerMsgID) != "e1" {
		t.Errorf("first message %+v", m)
	}
	if m := msgs[1]; m.Subject != "outbox.event.payment" || m.Header.Get(headerMsgID) != "e3" || m.Header.Get(headerExpectLastID) != "e1" {
		t.Errorf("second message %+v: want Nats-Msg-Id e3 expecting e1", m)
	}
}

// A message that fails in the middle of several in flight stops the ones
// after it: none of them is stored ahead of it, and nothing more is
// published until Resume (the relay's next session, which sends them
// again).
func TestFailureStopsLaterMessages(t *testing.T) {
	ctx := context.Background()
	s := natstest.Start(t)
	st := s.CreateStream("events", "outbox.event.>")
	j := newJetStream(t, s, Config{})
	var o outcomes
	if err := j.Produce(ctx, record("outbox.event.order", "e1", `{"n":1}`), o.promise); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The stream now refuses large messages; the publisher still knows
	// the old limit, so the second is sent, and refused.
	_, js := s.Connect()
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = 64
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	big := `{"blob":"` + string(make([]byte, 100)) + `"}`
	for _, r := range []*kgo.Record{
		record("outbox.event.order", "e2", big),
		record("outbox.event.order", "e3", `{"n":3}`),
		record("outbox.event.order", "e4", `{"n":4}`),
	} {
		// e2's refusal may come back before the next is produced: that
		// one is then refused at once, its promise never called.
		if err := j.Produce(ctx, r, o.promise); errors.Is(err, ErrHalted) {
			o.promise(r, err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if o.errs["e2"] == nil || o.errs["e3"] == nil || o.errs["e4"] == nil {
		t.Fatalf("failures %v: want e2, e3 and e4 failed", o.errs)
	}
	if got := s.Messages("events"); len(got) != 1 {
		t.Fatalf("%d messages stored, want only e1: %+v", len(got), got)
	}
	if err := j.Produce(ctx, record("outbox.event.order", "e5", `{"n":5}`), o.promise); !errors.Is(err, ErrHalted) {
		t.Fatalf("Produce after a failure: %v, want ErrHalted", err)
	}
	j.Resume()
	if err := j.Produce(ctx, record("outbox.event.order", "e3", `{"n":3}`), o.promise); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Messages("events"); len(got) != 2 || got[1].Header.Get(headerMsgID) != "e3" {
		t.Fatalf("after Resume: %+v, want e1 then e3", got)
	}
}

// A message larger than its stream accepts is refused before it is sent,
// as poison; so is a header NATS cannot carry.
func TestFits(t *testing.T) {
	ctx := context.Background()
	s := natstest.Start(t)
	_, js := s.Connect()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "small", Subjects: []string{"small.>"}, MaxMsgSize: 512}); err != nil {
		t.Fatal(err)
	}
	j := newJetStream(t, s, Config{})
	var large *TooLargeError
	if err := j.Fits(ctx, record("small.x", "e1", string(make([]byte, 600)))); !errors.As(err, &large) || large.Max != 512 {
		t.Errorf("600 bytes: %v, want TooLargeError of 512", err)
	}
	if err := j.Fits(ctx, record("small.x", "e1", `{}`)); err != nil {
		t.Errorf("small: %v", err)
	}
	var header *HeaderError
	if err := j.Fits(ctx, record("small.x", "e1", `{}`, "bad key", "v")); !errors.As(err, &header) || !header.Poison() {
		t.Errorf("a header name with a space: %v, want a poison HeaderError", err)
	}
	var none *NoStreamError
	if err := j.Fits(ctx, record("nowhere.x", "e1", `{}`)); !errors.As(err, &none) {
		t.Errorf("no stream: %v, want NoStreamError", err)
	}
}

// create-stream creates the stream with the dead-letter subject added;
// Ping refuses a dead-letter subject no stream takes.
func TestCreateStreamAndDeadLetters(t *testing.T) {
	ctx := context.Background()
	s := natstest.Start(t)
	j := newJetStream(t, s, Config{DeadLetterSubject: "pgoutbox.dlq"})
	var dle *DeadLetterError
	if err := j.Ping(ctx); !errors.As(err, &dle) || !dle.Permanent() {
		t.Fatalf("Ping without a stream for the dead letters: %v, want a permanent DeadLetterError", err)
	}
	j = newJetStream(t, s, Config{CreateStream: true, Storage: "file", DeadLetterSubject: "pgoutbox.dlq"})
	if err := j.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	_, js := s.Connect()
	st, err := js.Stream(ctx, DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	c := st.CachedInfo().Config
	if fmt.Sprint(c.Subjects) != "[*.*.* pgoutbox.dlq]" || c.Storage != jetstream.FileStorage {
		t.Errorf("created stream: subjects %v, storage %v", c.Subjects, c.Storage)
	}
}

// A server killed and started again on its store: the messages in flight
// fail, the publisher reconnects, and what is sent again is stored once.
func TestServerRestart(t *testing.T) {
	ctx := context.Background()
	s := natstest.Start(t)
	s.CreateStream("events", "outbox.event.>")
	j := newJetStream(t, s, Config{AckTimeout: 2 * time.Second})
	var o outcomes
	if err := j.Produce(ctx, record("outbox.event.order", "e1", `{}`), o.promise); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		j.Resume()
		var o2 outcomes
		err := j.Produce(ctx, record("outbox.event.order", "e1", `{}`), o2.promise)
		if err == nil {
			err = j.Produce(ctx, record("outbox.event.order", "e2", `{}`), o2.promise)
		}
		if err == nil {
			err = j.Flush(ctx)
		}
		if err == nil && o2.errs == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ack after the restart: %v %v", err, o2.errs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := s.Messages("events"); len(got) != 2 {
		t.Fatalf("%d messages, want e1 and e2 once each: %+v", len(got), got)
	}
}

func TestCovered(t *testing.T) {
	for _, tc := range []struct {
		filters []string
		subject string
		want    bool
	}{
		{[]string{"*.*.*"}, "outbox.event.order", true},
		{[]string{"*.*.*"}, "pgoutbox.dlq", false},
		{[]string{"outbox.>"}, "outbox.event.order", true},
		{[]string{"outbox.>"}, "outbox", false},
		{[]string{"a.b", "x.*"}, "x.y", true},
	} {
		if got := covered(tc.filters, tc.subject); got != tc.want {
			t.Errorf("covered(%v, %q) = %v", tc.filters, tc.subject, got)
		}
	}
}

// A server that refuses the password is a permanent failure at start,
// whose error does not show the password; the right one connects.
func TestAuth(t *testing.T) {
	ctx := context.Background()
	s := natstest.StartWithUser(t, "relay", "s3cret-pw")
	j := newJetStream(t, s, Config{User: "relay", Password: "wrong-pw"})
	err := j.Ping(ctx)
	var auth *AuthError
	if !errors.As(err, &auth) || !auth.Permanent() || strings.Contains(err.Error(), "wrong-pw") {
		t.Fatalf("a wrong password: %v, want a permanent AuthError without the password", err)
	}
	if err := newJetStream(t, s, Config{User: "relay", Password: "s3cret-pw"}).Ping(ctx); err != nil {
		t.Fatalf("the right password: %v", err)
	}
}

// Sync publishes one message at a time: Produce returns once it is acked.
func TestSync(t *testing.T) {
	ctx := context.Background()
	s := natstest.Start(t)
	s.CreateStream("events", "outbox.event.>")
	j := newJetStream(t, s, Config{Sync: true})
	var o outcomes
	for _, id := range []string{"e1", "e2"} {
		if err := j.Produce(ctx, record("outbox.event.order", id, `{}`), o.promise); err != nil {
			t.Fatal(err)
		}
		if n := j.Buffered(); n != 0 {
			t.Fatalf("after Produce of %s: %d waiting for their ack", id, n)
		}
	}
	if fmt.Sprint(o.got) != "[e1 e2]" || o.errs != nil {
		t.Fatalf("promises %v, failures %v", o.got, o.errs)
	}
}

// TLS: a client that trusts the server's CA connects; one that does not
// stops at start (a permanent error), as does one that asks a plaintext
// server for TLS.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	ca := tlstest.New(t)
	s := natstest.StartTLS(t, ca)
	trusted := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
	if err := newJetStream(t, s, Config{TLS: trusted}).Ping(ctx); err != nil {
		t.Fatalf("trusted: %v", err)
	}
	var auth *AuthError
	err := newJetStream(t, s, Config{TLS: &tls.Config{MinVersion: tls.VersionTLS12}}).Ping(ctx)
	if !errors.As(err, &auth) || !auth.Permanent() {
		t.Errorf("an untrusted certificate: %v, want a permanent AuthError", err)
	}
	plain := natstest.Start(t)
	if err := newJetStream(t, plain, Config{TLS: trusted}).Ping(ctx); !errors.As(err, &auth) {
		t.Errorf("TLS to a plaintext server: %v, want a permanent AuthError", err)
	}
}

// A stream another publisher writes to as well: its message between two
// of pgoutbox's makes the second's expected last id wrong, though the
// one it expected is stored. That second message is sent again, after
// it, without the expectation: nothing fails, nothing is stored twice or
// out of order, and publishing goes on.
func TestSharedStream(t *testing.T) {
	ctx := context.Background()
	s := natstest.Start(t)
	s.CreateStream("events", "outbox.event.>", "other.>")
	j := newJetStream(t, s, Config{})
	var o outcomes
	produce := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if err := j.Produce(ctx, record("outbox.event.order", id, `{"id":"`+id+`"}`), o.promise); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, other := s.Connect()
	produce("e1")
	if _, err := other.Publish(ctx, "other.x", []byte("x1")); err != nil {
		t.Fatal(err)
	}
	produce("e2", "e3")
	if _, err := other.Publish(ctx, "other.x", []byte("x2")); err != nil {
		t.Fatal(err)
	}
	produce("e4")
	if fmt.Sprint(o.got) != "[e1 e2 e3 e4]" || o.errs != nil {
		t.Fatalf("promises %v, failures %v; want e1 e2 e3 e4, none", o.got, o.errs)
	}
	var stored []string
	for _, m := range s.Messages("events") {
		if id := m.Header.Get(headerMsgID); id != "" {
			stored = append(stored, id)
		} else {
			stored = append(stored, string(m.Data))
		}
	}
	if want := "[e1 x1 e2 e3 x2 e4]"; fmt.Sprint(stored) != want {
		t.Errorf("stream %v, want %s", stored, want)
	}
}

// A record of no event (a transaction's BEGIN and END) between events on
// a shared stream: it carries an id of its own and expects the one before
// it, so when another publisher's message makes an event refused, nothing
// after that event overtakes it.
func TestSharedStreamRecordsWithoutEvent(t *testing.T) {
	ctx := context.Background()
	s := natstest.Start(t)
	s.CreateStream("events", "outbox.event.>", "shop.transaction", "other.>")
	j := newJetStream(t, s, Config{})
	var o outcomes
	produce := func(topic, id string) {
		t.Helper()
		r := &kgo.Record{Topic: topic, Value: []byte(`{"id":"` + id + `"}`), Context: context.Background()}
		if topic != "shop.transaction" {
			r = record(topic, id, `{"id":"`+id+`"}`)
		}
		if err := j.Produce(ctx, r, o.promise); err != nil {
			t.Fatal(err)
		}
	}
	produce("shop.transaction", "BEGIN")
	produce("outbox.event.order", "e1")
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, other := s.Connect()
	if _, err := other.Publish(ctx, "other.x", []byte(`{"id":"x1"}`)); err != nil {
		t.Fatal(err)
	}
	produce("outbox.event.order", "e2")
	produce("shop.transaction", "END")
	produce("outbox.event.order", "e3")
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if o.errs != nil {
		t.Fatalf("failures %v", o.errs)
	}
	var stored []string
	for _, m := range s.Messages("events") {
		var v struct{ ID string }
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, v.ID)
		if m.Header.Get(headerMsgID) == "" && m.Subject != "other.x" {
			t.Errorf("%s: no Nats-Msg-Id", v.ID)
		}
	}
	if want := "[BEGIN e1 x1 e2 END e3]"; fmt.Sprint(stored) != want {
		t.Errorf("stream %v, want %s", stored, want)
	}
}
