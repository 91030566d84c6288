package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// scrape reads the metrics endpoint and returns each sample line's value by
// its name and labels as exposed, e.g. `pgoutbox_mode{mode="wal"}`.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape: bad line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func httpStatus(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The metrics endpoint counts exactly what was published, by topic and
// mode; readiness flips when the broker or Postgres goes away and back.
func TestOpsMetricsAndReadiness(t *testing.T) {
	e := newEnv(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.brokers = broker.Brokers
	cfg := e.config()
	cfg.Operations.MonitorInterval = 200 * time.Millisecond
	e.setup(cfg)
	r := e.start(cfg)
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()

	if got := httpStatus(srv.URL + "/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz: %d", got)
	}
	eventually(t, 15*time.Second, "/readyz 200", func() bool { return httpStatus(srv.URL+"/readyz") == http.StatusOK })

	var orders, payments []string
	for i := 0; i < 5; i++ {
		orders = append(orders, e.insert(row{"order", fmt.Sprint("o-", i), "Placed", `{}`})...)
	}
	payments = e.insert(row{"payment", "p-1", "Captured", `{}`}, row{"payment", "p-1", "Settled", `{}`}, row{"payment", "p-2", "Captured", `{}`})
	awaitIDs(t, e.brokers, "outbox.event.order", orders, 15*time.Second)
	awaitIDs(t, e.brokers, "outbox.event.payment", payments, 15*time.Second)
	const (
		orderSeries   = `pgoutbox_events_published_total{mode="wal",table="public.outbox",topic="outbox.event.order"}`
		paymentSeries = `pgoutbox_events_published_total{mode="wal",table="public.outbox",topic="outbox.event.payment"}`
	)
	var m map[string]float64
	eventually(t, 10*time.Second, "the published counters", func() bool {
		m = scrape(t, srv.URL)
		return m[orderSeries] == 5 && m[paymentSeries] == 3
	})
	checks := []struct {
		name string
		ok   bool
	}{
		{`pgoutbox_publish_latency_seconds_count{mode="wal"} = 8`, m[`pgoutbox_publish_latency_seconds_count{mode="wal"}`] == 8},
		{`pgoutbox_batch_size_count{mode="wal"} = 6 (one per transaction)`, m[`pgoutbox_batch_size_count{mode="wal"}`] == 6},
		{`pgoutbox_batch_size_sum{mode="wal"} = 8`, m[`pgoutbox_batch_size_sum{mode="wal"}`] == 8},
		{`pgoutbox_mode{mode="wal"} = 1`, m[`pgoutbox_mode{mode="wal"}`] == 1},
		{`pgoutbox_mode{mode="poll"} = 0`, m[`pgoutbox_mode{mode="poll"}`] == 0},
		{`pgoutbox_events_failed_total = 0`, m[`pgoutbox_events_failed_total`] == 0},
		{`pgoutbox_events_dead_lettered_total = 0`, m[`pgoutbox_events_dead_lettered_total`] == 0},
		{`pgoutbox_ready = 1`, m[`pgoutbox_ready`] == 1},
		{`pgoutbox_last_publish_timestamp_seconds set`, m[`pgoutbox_last_publish_timestamp_seconds`] > 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("metric: want %s", c.name)
		}
	}
	eventually(t, 10*time.Second, "heartbeats counted", func() bool { return scrape(t, srv.URL)["pgoutbox_heartbeats_total"] > 0 })
	if _, ok := scrape(t, srv.URL)["pgoutbox_slot_lag_bytes"]; !ok {
		t.Error("pgoutbox_slot_lag_bytes is missing")
	}

	broker.Kill()
	eventually(t, 15*time.Second, "/readyz 503 with the broker down", func() bool { return httpStatus(srv.URL+"/readyz") == http.StatusServiceUnavailable })
	broker.Start()
	eventually(t, 30*time.Second, "/readyz 200 with the broker back", func() bool { return httpStatus(srv.URL+"/readyz") == http.StatusOK })

	if e.pg.External() {
		t.Log("not restarting Postgres: PGOUTBOX_TEST_DATABASE_URL")
		return
	}
	ctx := context.Background()
	if err := e.pg.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "/readyz 503 with Postgres down", func() bool { return httpStatus(srv.URL+"/readyz") == http.StatusServiceUnavailable })
	if got := httpStatus(srv.URL + "/healthz"); got != http.StatusOK {
		t.Errorf("/healthz with Postgres down: %d, want 200 (the process is alive)", got)
	}
	if err := e.pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "/readyz 200 with Postgres back", func() bool { return httpStatus(srv.URL+"/readyz") == http.StatusOK })
	if n := scrape(t, srv.URL)["pgoutbox_reconnects_total"]; n < 1 {
		t.Errorf("pgoutbox_reconnects_total = %v after a Postgres restart", n)
	}
}
