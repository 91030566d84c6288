package relay

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/replication"
)

// value gathers reg and returns the counter or gauge name with exactly
// these label values ("k=v").
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, mt := range mf.GetMetric() {
			if len(mt.GetLabel()) != len(labels) {
				continue
			}
			for i, lp := range mt.GetLabel() {
				if lp.GetName()+"="+lp.GetValue() != labels[i] {
					continue metrics
				}
			}
			if c := mt.GetCounter(); c != nil {
				return c.GetValue()
			}
			return mt.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func TestMetricsNamesAndCounts(t *testing.T) {
	var last atomic.Int64
	m := NewMetrics(&last)
	p := m.meter(ModeWAL)
	outbox := &replication.Relation{Schema: "public", Name: "outbox"}
	other := &replication.Relation{Schema: "billing", Name: "outbox"}
	p.row("a", outbox, time.Now()).done(nil)
	p.row("a", outbox, time.Now()).done(nil)
	p.row("a", other, time.Now()).done(nil)
	p.row("b", outbox, time.Now()).done(errors.New("broker gone"))
	p.commit()
	p.heartbeat()
	m.DeadLettered(2)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"pgoutbox_events_published_total", []string{"mode=wal", "table=public.outbox", "topic=a"}, 2},
		{"pgoutbox_events_published_total", []string{"mode=wal", "table=billing.outbox", "topic=a"}, 1},
		{"pgoutbox_events_failed_total", nil, 1},
		{"pgoutbox_events_dead_lettered_total", nil, 2},
		{"pgoutbox_heartbeats_total", nil, 1},
		{"pgoutbox_reconnects_total", nil, 0},
		{"pgoutbox_mode", []string{"mode=wal"}, 0},
	} {
		if got := value(t, m.Registry, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	mfs, _ := m.Registry.Gather()
	for _, mf := range mfs {
		n := mf.GetName()
		if !strings.HasPrefix(n, "pgoutbox_") {
			continue
		}
		if mf.GetType().String() == "COUNTER" && !strings.HasSuffix(n, "_total") {
			t.Errorf("counter %s does not end in _total", n)
		}
	}
}

func TestReadyAndHandler(t *testing.T) {
	m := NewMetrics(nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "no session") {
		t.Errorf("/readyz without a session: %d %q", code, body)
	}
	done := m.sessionUp(ModePoll)
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz with a session: %d", code)
	}
	m.kafka.pinged(errors.New("dial refused"))
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "kafka") {
		t.Errorf("/readyz with kafka down: %d %q", code, body)
	}
	m.kafka.pinged(nil)
	done()
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz after the session: %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `pgoutbox_mode{mode="poll"} 1`) {
		t.Errorf("/metrics: %d, mode gauge missing:\n%s", code, body)
	}
}

func TestOpsConfigValidate(t *testing.T) {
	var c Config
	c.Replication.DatabaseURL = "postgres://x"
	c.Sink.Brokers = []string{"k:9092"}
	c.Retention = -time.Second
	c.Defaults()
	if err := c.Validate(); err == nil {
		t.Error("negative retention accepted")
	}
}

// BenchmarkPublishMetrics is what the metrics add to each event: the
// topic's series, then the ack (counter and latency histogram).
func BenchmarkPublishMetrics(b *testing.B) {
	m := NewMetrics(nil)
	p := m.meter(ModeWAL)
	now := time.Now()
	rel := &replication.Relation{Schema: "public", Name: "outbox"}
	b.ReportAllocs()
	for b.Loop() {
		p.row("outbox.event.order", rel, now).done(nil)
	}
}
