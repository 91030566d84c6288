package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/store"
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
	m := NewMetrics(&last, nil)
	p := hooks{m}.meter(ModeWAL)
	public := &outbox.Relation{Schema: "public", Name: "outbox"}
	other := &outbox.Relation{Schema: "billing", Name: "outbox"}
	p.row("a", public, time.Now()).done(nil)
	p.row("a", public, time.Now()).done(nil)
	p.row("a", other, time.Now()).done(nil)
	p.row("b", public, time.Now()).done(errors.New("broker gone"))
	p.commit()
	p.heartbeat()
	hooks{m}.DeadLettered(2)
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

// Each Kafka transaction a session ended without committing is counted by
// why the session ended; every reason is exported from the start.
func TestMetricsTransactionsAborted(t *testing.T) {
	m := NewMetrics(nil, nil)
	for _, reason := range abortReasons {
		if got := value(t, m.Registry, "pgoutbox_kafka_transactions_aborted_total", "reason="+reason); got != 0 {
			t.Errorf("%s at start: %v", reason, got)
		}
	}
	hooks{m}.Aborted(fmt.Errorf("kafka transaction: commit: %w", sink.ErrFenced))
	hooks{m}.Aborted(fmt.Errorf("%w: %w", sink.ErrTxnTimedOut, errors.New("INVALID_PRODUCER_EPOCH")))
	hooks{m}.Aborted(errors.New("record failed"))
	hooks{m}.Aborted(nil) // the session failed elsewhere: Postgres, the stream
	for reason, want := range map[string]float64{"fenced": 1, "timeout": 1, "error": 2} {
		if got := value(t, m.Registry, "pgoutbox_kafka_transactions_aborted_total", "reason="+reason); got != want {
			t.Errorf("%s: %v, want %v", reason, got, want)
		}
	}
}

// The monitor reads what the pipeline's state says, as pgoutbox status
// does: since when it polls instead of streaming (not when it was started
// to poll), and its open dead letters and the aggregates they hold.
func TestSampleState(t *testing.T) {
	url, conn := deadLetterDB(t)
	ctx := context.Background()
	r := testPipeline(t, url, PoisonDeadLetter)
	m := r.hooks[0].(*Metrics)
	gauge := func(name string) float64 { return value(t, m.Registry, name) }
	sample := func() {
		t.Helper()
		if err := (monitor{p: r, to: r.hooks.samples()}).sampleState(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}
	sample() // no state yet
	if got := gauge("pgoutbox_polling_since_timestamp_seconds"); got != 0 {
		t.Errorf("polling since %v before any state", got)
	}
	own := r.own()
	before := time.Now().Add(-time.Minute)
	if err := own.SetMode(ctx, conn, "public.outbox", ModePoll, store.Reason{Code: store.ReasonWALUnavailable, Detail: "wal_level is replica"}); err != nil {
		t.Fatal(err)
	}
	sample()
	if got := gauge("pgoutbox_polling_since_timestamp_seconds"); got < float64(before.Unix()) || got > float64(time.Now().Unix()+60) {
		t.Errorf("polling since %v after the fallback, want about now (%d)", got, time.Now().Unix())
	}
	if err := own.SetMode(ctx, conn, "public.outbox", ModeWAL, store.Reason{Code: store.ReasonWALAvailable}); err != nil {
		t.Fatal(err)
	}
	sample()
	if got := gauge("pgoutbox_polling_since_timestamp_seconds"); got != 0 {
		t.Errorf("polling since %v while streaming", got)
	}
	if err := own.SetMode(ctx, conn, "public.outbox", ModePoll, store.Started(ModePoll)); err != nil {
		t.Fatal(err)
	}
	sample()
	if got := gauge("pgoutbox_polling_since_timestamp_seconds"); got != 0 {
		t.Errorf("polling since %v when started in poll mode", got)
	}

	for _, dl := range []struct{ event, aggregate string }{{"e1", "H"}, {"e2", "H"}, {"e3", "G"}, {"e4", "F"}} {
		if _, err := conn.Exec(ctx, `INSERT INTO pgoutbox_dead_letter (pipeline, outbox_table, event_id, aggregate_id, txid, reason, row_data)
VALUES ($1, 'public.outbox', $2, $3, 1, 'test', '{}')`, own.Name, dl.event, dl.aggregate); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_dead_letter SET replayed_at = now(), resolution = 'skipped' WHERE event_id = 'e4'"); err != nil {
		t.Fatal(err)
	}
	sample()
	if open, held := gauge("pgoutbox_open_dead_letters"), gauge("pgoutbox_held_aggregates"); open != 3 || held != 2 {
		t.Errorf("open dead letters %v, held aggregates %v; want 3 and 2", open, held)
	}
}

func TestReadyAndHandler(t *testing.T) {
	ready := newReadiness("kafka")
	m := NewMetrics(nil, ready)
	srv := httptest.NewServer(OpsHandler(m, ready))
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
	done := ready.up(ModePoll)
	m.OnSessionStart(ModePoll)
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz with a session: %d", code)
	}
	ready.broker.ping(errors.New("dial refused"))
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "kafka") {
		t.Errorf("/readyz with kafka down: %d %q", code, body)
	}
	ready.broker.ping(nil)
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
	c.Sink = fakeOpener{}
	c.Operations.Retention = -time.Second
	c.Defaults()
	if err := c.Validate(); err == nil {
		t.Error("negative retention accepted")
	}
}

// BenchmarkPublishMetrics is what the metrics add to each event: the
// topic's series, then the ack (counter and latency histogram).
func BenchmarkPublishMetrics(b *testing.B) {
	m := NewMetrics(nil, nil)
	p := hooks{m}.meter(ModeWAL)
	now := time.Now()
	rel := &outbox.Relation{Schema: "public", Name: "outbox"}
	b.ReportAllocs()
	for b.Loop() {
		p.row("outbox.event.order", rel, now).done(nil)
	}
}
