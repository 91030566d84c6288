package pulsartest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// produce sends n messages to topic, keys k<i> and payloads v<i> from
// first on; batched, so that Messages also reads messages sharing an
// entry.
func produce(t *testing.T, s *Server, topic string, first, n int) {
	t.Helper()
	p, err := s.Client().CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for i := first; i < first+n; i++ {
		p.SendAsync(ctx, &pulsar.ProducerMessage{
			Key:        fmt.Sprint("k", i),
			Payload:    []byte(fmt.Sprint("v", i)),
			Properties: map[string]string{"seq": fmt.Sprint(i), "type": "test"},
		}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// check fails the test unless msgs are n messages k<i>/v<i> in order.
func check(t *testing.T, msgs []Message, n int) {
	t.Helper()
	if len(msgs) != n {
		t.Fatalf("read %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if m.Key != fmt.Sprint("k", i) || string(m.Payload) != fmt.Sprint("v", i) ||
			m.Properties["seq"] != fmt.Sprint(i) || m.Properties["type"] != "test" {
			t.Fatalf("message %d: key %q payload %q properties %v", i, m.Key, m.Payload, m.Properties)
		}
	}
}

func TestPulsarHarnessRoundTrip(t *testing.T) {
	s := Start(t)
	t.Logf("Pulsar %s ready in %s at %s, admin %s", Version, s.Started.Round(time.Millisecond), s.ServiceURL(), s.AdminURL())

	resp, err := http.Get(s.AdminURL() + "/admin/v2/clusters")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"standalone"`) {
		t.Fatalf("GET /admin/v2/clusters: %s %s", resp.Status, body)
	}

	if got := s.Messages("empty"); len(got) != 0 {
		t.Fatalf("an empty topic has %d messages", len(got))
	}
	produce(t, s, "roundtrip", 0, 100)
	msgs := s.Messages("persistent://public/default/roundtrip")
	check(t, msgs, 100)
	batched := 0
	for _, m := range msgs {
		if m.ID.BatchSize() > 1 {
			batched++
		}
	}
	if batched == 0 {
		t.Error("no message came in a batch: the test meant to read batches")
	}
}

// What the bookie acknowledged survives SIGKILL, and the server serves
// again on the same URL.
func TestPulsarHarnessKillRestart(t *testing.T) {
	s := Start(t)
	produce(t, s, "restart", 0, 10)
	url := s.ServiceURL()
	s.Kill()
	s.Restart()
	t.Logf("restarted in %s", s.Started.Round(time.Millisecond))
	if s.ServiceURL() != url {
		t.Fatalf("service URL %s after the restart, was %s", s.ServiceURL(), url)
	}
	check(t, s.Messages("restart"), 10)
	produce(t, s, "restart", 10, 5)
	check(t, s.Messages("restart"), 15)
}
