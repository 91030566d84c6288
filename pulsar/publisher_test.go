package pulsar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// The broker killed: a message sent meanwhile fails (by its promise when
// its producer's connection dropped, or by Produce when no connection can
// be made for a producer), halting the publisher; once the broker is back
// and the publisher resumed, records go through.
func TestBrokerKilled(t *testing.T) {
	s := pulsartest.Start(t)
	p := publisher(t, s.ServiceURL(), Config{SendTimeout: 3 * time.Second})
	if _, errs := produce(t, p, []*kgo.Record{record("events", "k", "1")}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	s.Kill()
	outcome := make(chan error, 1)
	err := p.Produce(context.Background(), record("events", "k", "2"), func(_ *kgo.Record, err error) { outcome <- err })
	if err == nil {
		err = <-outcome
	}
	var se *SendError
	var pe *ProducerError
	if !errors.As(err, &se) && !errors.As(err, &pe) {
		t.Fatalf("a message while the broker is down: %v", err)
	}
	if err := p.Produce(context.Background(), record("events", "k", "3"), func(*kgo.Record, error) {}); !errors.Is(err, ErrHalted) {
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

// A partitioned topic's messages go each to its key's partition, as
// Pulsar's Java client routes them, each found by its own lookup; each
// key's in order.
func TestPartitionedTopic(t *testing.T) {
	s := pulsartest.Start(t)
	req, _ := http.NewRequest(http.MethodPut, s.AdminURL()+"/admin/v2/persistent/public/default/parts/partitions", strings.NewReader("3"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("creating the partitioned topic: %v %v", resp, err)
	}
	resp.Body.Close()
	p := publisher(t, s.ServiceURL(), Config{})
	var recs []*kgo.Record
	want := map[int][]string{}
	for i := range 30 {
		key, v := fmt.Sprintf("k-%d", i%5), strconv.Itoa(i)
		recs = append(recs, record("parts", key, v))
		want[partition(key, 3)] = append(want[partition(key, 3)], key+"="+v)
	}
	if _, errs := produce(t, p, recs); slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("outcomes %v", errs)
	}
	for i := range 3 {
		var got []string
		for _, m := range s.Messages(fmt.Sprintf("parts-partition-%d", i)) {
			got = append(got, m.Key+"="+string(m.Payload))
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("partition %d: %v, want %v", i, got, want[i])
		}
	}
	if len(want) < 2 {
		t.Errorf("the keys fell in %d partitions: the test shows no routing", len(want))
	}
}

// A broker that takes tokens: a publisher with a token it signed, given
// as such or in a file, publishes; one with another key's token, or
// none, is refused at Ping and at its first record, saying so.
func TestTokenAuthentication(t *testing.T) {
	s := pulsartest.StartWithTokens(t)
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(s.TokenFor("relay")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{"token": {Token: s.TokenFor("relay")}, "file": {TokenFile: file}} {
		p := publisher(t, s.ServiceURL(), cfg)
		if err := p.Ping(context.Background()); err != nil {
			t.Fatalf("%s: Ping: %v", name, err)
		}
		if _, errs := produce(t, p, []*kgo.Record{record("secured", "k", name)}); errs[0] != nil {
			t.Fatalf("%s: %v", name, errs[0])
		}
	}
	if got := s.Messages("secured"); len(got) != 2 {
		t.Errorf("%d messages, want 2", len(got))
	}
	other := pulsartest.StartWithTokens(t) // another key
	for name, cfg := range map[string]Config{"another key's token": {Token: other.TokenFor("relay")}, "no token": {}} {
		p := publisher(t, s.ServiceURL(), cfg)
		var ce *ConnectError
		if err := p.Ping(context.Background()); !errors.As(err, &ce) || !strings.Contains(err.Error(), "AuthenticationError") {
			t.Errorf("%s: Ping: %v, want the broker's refusal", name, err)
		}
		if err := p.Produce(context.Background(), record("secured", "k", "x"), func(*kgo.Record, error) {}); !errors.As(err, &ce) {
			t.Errorf("%s: Produce: %v, want the broker's refusal", name, err)
		}
	}
}

// A pulsar+ssl:// broker: its certificate checked against the trusted
// CAs (its name not, unless asked: Pulsar's clients' default), or not at
// all when allowed; a certificate not trusted, or of another name when
// the name is checked, is refused. The lookup's TLS address is used.
func TestTLS(t *testing.T) {
	s := pulsartest.StartWithTLS(t)
	for name, tc := range map[string]struct {
		cfg Config
		ok  bool
	}{
		"trusted":                   {Config{TLSTrustCertsFile: s.CAFile}, true},
		"insecure":                  {Config{TLSAllowInsecure: true}, true},
		"not trusted":               {Config{}, false},
		"trusted, the name checked": {Config{TLSTrustCertsFile: s.CAFile, TLSValidateHostname: true}, false},
	} {
		p := publisher(t, s.ServiceURLTLS(), tc.cfg)
		err := p.Ping(context.Background())
		if tc.ok != (err == nil) {
			t.Errorf("%s: Ping: %v", name, err)
			continue
		}
		if !tc.ok {
			continue
		}
		if _, errs := produce(t, p, []*kgo.Record{record("tls", "k", name)}); errs[0] != nil {
			t.Errorf("%s: %v", name, errs[0])
		}
	}
	if got := s.Messages("tls"); len(got) != 2 {
		t.Errorf("%d messages, want 2", len(got))
	}
}
