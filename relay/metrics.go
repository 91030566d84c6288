package relay

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/sink"
)

// Metrics are the relay's Prometheus metrics, on a registry of their own
// (Registry), and its readiness (health.go). Every Relay has one; it
// costs a few atomic adds per event and nothing else until it is served.
// The relay reports to it through its methods (each session through the
// observer it is handed); nothing else writes its fields.
//
// On the per-event path a meter caches the counter of the last topic it
// saw, so a record costs a string comparison, an atomic add and a histogram
// observation; a topic change costs one lock-free map lookup.
type Metrics struct {
	// Registry holds the metrics below plus the Go and process collectors.
	Registry *prometheus.Registry

	published    *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	batch        *prometheus.HistogramVec
	failed       prometheus.Counter
	deadLettered prometheus.Counter
	reconnects   prometheus.Counter
	heartbeats   prometheus.Counter
	retained     prometheus.Gauge
	lag          prometheus.Gauge
	oldest       *prometheus.GaugeVec
	pending      *prometheus.GaugeVec
	deleted      prometheus.Counter
	lostDeleted  *prometheus.CounterVec
	mode         *prometheus.GaugeVec
	txns         prometheus.Counter
	txnCommit    prometheus.Histogram
	txnSize      prometheus.Histogram
	txnAborts    *prometheus.CounterVec
	openDLQ      prometheus.Gauge
	held         prometheus.Gauge
	pollingSince prometheus.Gauge

	// series caches the children of published and latency per mode and
	// topic; copy on write, read without a lock.
	seriesMu sync.Mutex
	series   atomic.Pointer[map[seriesKey]*series]

	// health is what readiness is judged on (health.go); Ready and
	// /readyz answer from it.
	health *health
}

type seriesKey struct {
	mode  Mode
	topic string
	table string
}

// series are the children one acked record updates.
type series struct {
	published prometheus.Counter
	latency   prometheus.Observer
	failed    prometheus.Counter
}

// NewMetrics creates the metrics on a new registry. lastPublish is read at
// scrape time for pgoutbox_last_publish_timestamp_seconds (nil leaves it out).
func NewMetrics(lastPublish *atomic.Int64) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgoutbox_events_published_total",
			Help: "Events acknowledged by Kafka, by topic, mode (wal or poll) and outbox table.",
		}, []string{"topic", "mode", "table"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pgoutbox_publish_latency_seconds",
			Help: "Time to the Kafka ack: from the transaction's commit in WAL mode, from the poll that read the row in poll mode.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60,
				300},
		}, []string{"mode"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pgoutbox_batch_size",
			Help:    "Events per batch: per transaction in WAL mode, per poll in poll mode.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000, 100000},
		}, []string{"mode"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_events_failed_total",
			Help: "Records Kafka did not acknowledge (delivery failures); they are sent again, never dropped.",
		}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_events_dead_lettered_total",
			Help: "Events that could not be published and went to the dead-letter destination.",
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_reconnects_total",
			Help: "Sessions that ended in an error and were retried after a backoff.",
		}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_heartbeats_total",
			Help: "Heartbeat messages read back from the WAL.",
		}),
		retained: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgoutbox_slot_retained_wal_bytes",
			Help: "WAL the replication slot keeps on the server (current LSN minus restart_lsn); 0 without a slot.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgoutbox_slot_lag_bytes",
			Help: "Distance from the slot's confirmed_flush_lsn to the server's current LSN; 0 without a slot.",
		}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pgoutbox_oldest_unpublished_event_age_seconds",
			Help: "Age (created_at) of the oldest row of the table above the published floor not marked published; in WAL mode an upper bound, as the floor trails the confirmed position by seconds.",
		}, []string{"table"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pgoutbox_unpublished_events",
			Help: "Rows of the table above the published floor not marked published (in WAL mode, includes rows published since the floor last moved).",
		}, []string{"table"}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_retention_deleted_events_total",
			Help: "Published rows deleted by retention.",
		}),
		lostDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgoutbox_events_lost_deleted_total",
			Help: "Outbox rows deleted before polling published them, whose events are lost: an upper bound (deletes of rows polling never saw, at most its positions never seen).",
		}, []string{"table"}),
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pgoutbox_mode",
			Help: "1 for the mode of the current (or last) session, wal or poll; 0 for the other.",
		}, []string{"mode"}),
		txns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_kafka_transactions_total",
			Help: "Kafka transactions committed under exactly-once delivery.",
		}),
		txnCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgoutbox_kafka_transaction_commit_seconds",
			Help:    "Exactly-once delivery: time from the end of a Kafka transaction (its position record handed over) to its commit.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		txnSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgoutbox_kafka_transaction_events",
			Help:    "Exactly-once delivery: records (events and dead letters) per committed Kafka transaction.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000, 100000},
		}),
		txnAborts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgoutbox_kafka_transactions_aborted_total",
			Help: "Exactly-once delivery: Kafka transactions holding records that a session ended without committing (aborted by the relay, by the next session's fence, or by the broker), by reason: fenced (another relay took the pipeline over), timeout (open past --transaction-timeout) or error.",
		}, []string{"reason"}),
		openDLQ: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgoutbox_open_dead_letters",
			Help: "Dead letters of the pipeline neither replayed nor skipped (pgoutbox dlq list), read every --metrics-interval.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgoutbox_held_aggregates",
			Help: "Aggregates held behind an open dead letter: their later events join it in the dead letters until it is replayed or skipped.",
		}),
		pollingSince: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pgoutbox_polling_since_timestamp_seconds",
			Help: "Unix time since which the pipeline polls instead of streaming the WAL (auto mode's fallback, or the handoff to a new slot), from its saved state; 0 while it streams, and when it was started in poll mode.",
		}),
	}
	empty := map[seriesKey]*series{}
	m.series.Store(&empty)
	m.health = newHealth()
	m.mode.WithLabelValues(string(ModeWAL))
	m.mode.WithLabelValues(string(ModePoll))
	for _, reason := range abortReasons {
		m.txnAborts.WithLabelValues(reason) // exported at 0, so that the first abort is an increase
	}
	m.Registry.MustRegister(m.published, m.latency, m.batch, m.failed, m.deadLettered, m.reconnects,
		m.heartbeats, m.retained, m.lag, m.oldest, m.pending, m.deleted, m.lostDeleted, m.mode,
		m.txns, m.txnCommit, m.txnSize, m.txnAborts, m.openDLQ, m.held, m.pollingSince,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pgoutbox_ready",
		Help: "1 when /readyz would answer ready: a session holds the pipeline and both ends answered the last check.",
	}, func() float64 {
		if m.Ready() != nil {
			return 0
		}
		return 1
	}))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pgoutbox_kafka_problem",
		Help: "1 while Kafka has a problem (unreachable, a topic missing or not authorized, records failing), as /readyz and status name it; 0 otherwise.",
	}, func() float64 {
		if p, _, _ := m.health.kafkaProblem(); p != "" {
			return 1
		}
		return 0
	}))
	if lastPublish != nil {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pgoutbox_last_publish_timestamp_seconds",
			Help: "Unix time of the last Kafka ack; 0 before the first.",
		}, func() float64 { return float64(lastPublish.Load()) / 1e9 }))
	}
	return m
}

// txnCommitted counts a committed Kafka transaction.
func (m *Metrics) txnCommitted(took time.Duration) {
	m.txns.Inc()
	m.txnCommit.Observe(took.Seconds())
}

// abortReasons label pgoutbox_kafka_transactions_aborted_total.
var abortReasons = []string{"fenced", "timeout", "error"}

// txnAborted counts a Kafka transaction with records that its session
// ended without committing; err is why the session ended.
func (m *Metrics) txnAborted(err error) {
	reason := "error"
	switch {
	case sink.Fenced(err):
		reason = "fenced"
	case errors.Is(err, sink.ErrTxnTimedOut):
		reason = "timeout"
	}
	m.txnAborts.WithLabelValues(reason).Inc()
}

// txnEvents observes the records of a committed Kafka transaction.
func (m *Metrics) txnEvents(n int) { m.txnSize.Observe(float64(n)) }

// DeadLettered counts n events sent to the dead-letter destination.
func (m *Metrics) DeadLettered(n int) { m.deadLettered.Add(float64(n)) }

func (m *Metrics) seriesFor(mode Mode, topic, table string) *series {
	k := seriesKey{mode, topic, table}
	if s, ok := (*m.series.Load())[k]; ok {
		return s
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	old := *m.series.Load()
	if s, ok := old[k]; ok {
		return s
	}
	s := &series{
		published: m.published.WithLabelValues(topic, string(mode), table),
		latency:   m.latency.WithLabelValues(string(mode)),
		failed:    m.failed,
	}
	next := make(map[seriesKey]*series, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[k] = s
	m.series.Store(&next)
	return s
}

// meter is one session's view of the metrics.
// It is used by one goroutine; the ack handles it returns may be used from
// any.
type meter struct {
	m      *Metrics
	mode   Mode
	batch  prometheus.Observer
	topic  string
	rel    *outbox.Relation
	last   *series
	txRows int
}

func (m *Metrics) meter(mode Mode) meter {
	return meter{m: m, mode: mode, batch: m.batch.WithLabelValues(string(mode))}
}

// row counts a record of the current transaction produced to topic and
// returns what its ack updates; since is the time its latency counts from.
func (p *meter) row(topic string, rel *outbox.Relation, since time.Time) ack {
	if p.last == nil || topic != p.topic || rel != p.rel {
		p.last, p.topic, p.rel = p.m.seriesFor(p.mode, topic, outbox.Table{Schema: rel.Schema, Name: rel.Name}.String()), topic, rel
	}
	p.txRows++
	return ack{p.last, since}
}

// commit closes a transaction (WAL) or a batch (poll) of the rows counted.
func (p *meter) commit() {
	if p.txRows > 0 {
		p.batch.Observe(float64(p.txRows))
		p.txRows = 0
	}
}

func (p *meter) heartbeat() { p.m.heartbeats.Inc() }

// ack is a record's handle, captured by its produce callback.
type ack struct {
	s     *series
	since time.Time
}

// done records the record's ack, or its delivery failure.
func (a ack) done(err error) {
	if err != nil {
		a.s.failed.Inc()
		return
	}
	a.s.published.Inc()
	a.s.latency.Observe(time.Since(a.since).Seconds())
}

// sessionUp marks a session of mode holding the pipeline; the returned
// function marks it gone.
func (m *Metrics) sessionUp(mode Mode) func() {
	down := m.health.up(mode)
	m.setMode(mode)
	return down
}

func (m *Metrics) setMode(mode Mode) {
	for _, md := range []Mode{ModeWAL, ModePoll} {
		v := 0.0
		if md == mode {
			v = 1
		}
		m.mode.WithLabelValues(string(md)).Set(v)
	}
}

// readiness is what Ready answers from, for those who report to it.
func (m *Metrics) readiness() *health { return m.health }

// Ready tells whether the relay is connected to both ends and publishing,
// or ready to: a session holds the pipeline, the last check of Postgres
// succeeded, a broker answers and no record is failing. The error says
// what is missing, with the topic and event where a record fails.
func (m *Metrics) Ready() error { return m.health.ready() }

// reconnected counts a session that ended in an error and is retried.
func (m *Metrics) reconnected() { m.reconnects.Inc() }

// tables exports each table's count of rows lost to deletes at 0 from the
// start.
func (m *Metrics) tables(tables []outbox.Table) {
	for _, t := range tables {
		m.lostDeleted.WithLabelValues(t.String())
	}
}

// lost counts rows of table deleted before polling published them.
func (m *Metrics) lost(table string, n int64) { m.lostDeleted.WithLabelValues(table).Add(float64(n)) }

// retained counts published rows retention deleted.
func (m *Metrics) retainedDeleted(n int64) { m.deleted.Add(float64(n)) }

// unpublished sets a table's unpublished rows and the age of the oldest.
func (m *Metrics) unpublished(table string, count int64, oldest time.Duration) {
	m.pending.WithLabelValues(table).Set(float64(count))
	m.oldest.WithLabelValues(table).Set(oldest.Seconds())
}

// slot sets the WAL the slot retains and its lag (0 without a slot).
func (m *Metrics) slot(retained, lag int64) {
	m.retained.Set(float64(retained))
	m.lag.Set(float64(lag))
}

// state sets what the pipeline's state says: since when it polls instead
// of streaming (0: it does not), and its open dead letters and the
// aggregates they hold (nil: unknown, left as they are).
func (m *Metrics) state(pollingSince float64, openDLQ, held *int64) {
	m.pollingSince.Set(pollingSince)
	if openDLQ != nil && held != nil {
		m.openDLQ.Set(float64(*openDLQ))
		m.held.Set(float64(*held))
	}
}

// Handler serves /metrics (Prometheus text exposition of Registry),
// /healthz (200 while the process serves) and /readyz (200 when Ready,
// 503 with the reason otherwise).
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := m.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
