package test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// The metrics endpoint counts exactly what was published, by topic and
// mode; readiness flips when the broker or Postgres goes away and back.
func TestOpsMetricsAndReadiness(t *testing.T) {
	e := testenv.New(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.Brokers = broker.Brokers
	cfg := e.Config()
	cfg.Operations.MonitorInterval = 200 * time.Millisecond
	e.Setup(cfg)
	r := e.Start(cfg)
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()

	if got := testenv.HTTPStatus(srv.URL + "/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz: %d", got)
	}
	testenv.Eventually(t, 15*time.Second, "/readyz 200", func() bool { return testenv.HTTPStatus(srv.URL+"/readyz") == http.StatusOK })

	var orders, payments []string
	for i := 0; i < 5; i++ {
		orders = append(orders, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i), "Placed", `{}`))...)
	}
	payments = e.Insert(testenv.NewRow("payment", "p-1", "Captured", `{}`), testenv.NewRow("payment", "p-1", "Settled", `{}`), testenv.NewRow("payment", "p-2", "Captured", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 15*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.payment", payments, 15*time.Second)
	const (
		orderSeries   = `pgoutbox_events_published_total{mode="wal",table="public.outbox",topic="outbox.event.order"}`
		paymentSeries = `pgoutbox_events_published_total{mode="wal",table="public.outbox",topic="outbox.event.payment"}`
	)
	var m map[string]float64
	testenv.Eventually(t, 10*time.Second, "the published counters", func() bool {
		m = testenv.Scrape(t, srv.URL)
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
	testenv.Eventually(t, 10*time.Second, "heartbeats counted", func() bool { return testenv.Scrape(t, srv.URL)["pgoutbox_heartbeats_total"] > 0 })
	if _, ok := testenv.Scrape(t, srv.URL)["pgoutbox_slot_lag_bytes"]; !ok {
		t.Error("pgoutbox_slot_lag_bytes is missing")
	}

	broker.Kill()
	testenv.Eventually(t, 15*time.Second, "/readyz 503 with the broker down", func() bool { return testenv.HTTPStatus(srv.URL+"/readyz") == http.StatusServiceUnavailable })
	broker.Start()
	testenv.Eventually(t, 30*time.Second, "/readyz 200 with the broker back", func() bool { return testenv.HTTPStatus(srv.URL+"/readyz") == http.StatusOK })

	if e.PG.External() {
		t.Log("not restarting Postgres: PGOUTBOX_TEST_DATABASE_URL")
		return
	}
	ctx := context.Background()
	if err := e.PG.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "/readyz 503 with Postgres down", func() bool { return testenv.HTTPStatus(srv.URL+"/readyz") == http.StatusServiceUnavailable })
	if got := testenv.HTTPStatus(srv.URL + "/healthz"); got != http.StatusOK {
		t.Errorf("/healthz with Postgres down: %d, want 200 (the process is alive)", got)
	}
	if err := e.PG.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "/readyz 200 with Postgres back", func() bool { return testenv.HTTPStatus(srv.URL+"/readyz") == http.StatusOK })
	if n := testenv.Scrape(t, srv.URL)["pgoutbox_reconnects_total"]; n < 1 {
		t.Errorf("pgoutbox_reconnects_total = %v after a Postgres restart", n)
	}
}
