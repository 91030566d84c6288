package relay

import (
	"errors"
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
// (Registry): a Hook, which every Relay has. It costs a few atomic adds
// per event and nothing else until it is served.
//
// On the per-event path a session's meter keeps the series of the last
// topic it saw, so a record costs a string comparison, an atomic add and a
// histogram observation; a topic change costs one lock-free map lookup.
type Metrics struct {
	// Registry holds the metrics below plus the Go and process collectors.
	Registry *prometheus.Registry

	records  *recordMetrics
	sessions sessionMetrics
	txns     txnMetrics
	state    stateMetrics
}

var (
	_ HookRecords              = (*Metrics)(nil)
	_ HookSessionStart         = (*Metrics)(nil)
	_ HookReconnect            = (*Metrics)(nil)
	_ HookDeadLettered         = (*Metrics)(nil)
	_ HookRowsLost             = (*Metrics)(nil)
	_ HookRetentionDeleted     = (*Metrics)(nil)
	_ HookTransactionCommitted = (*Metrics)(nil)
	_ HookTransactionAborted   = (*Metrics)(nil)
	_ HookSample               = (*Metrics)(nil)
)

// NewMetrics creates the metrics on a new registry. lastPublish is read at
// scrape time for pgoutbox_last_publish_timestamp_seconds (nil leaves it
// out); ready, for pgoutbox_ready and pgoutbox_kafka_problem (nil: never
// ready, no problem).
func NewMetrics(lastPublish *atomic.Int64, ready *Readiness) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), records: newRecordMetrics(), sessions: newSessionMetrics(),
		txns: newTxnMetrics(), state: newStateMetrics()}
	m.Registry.MustRegister(m.records.collectors()...)
	m.Registry.MustRegister(m.sessions.collectors()...)
	m.Registry.MustRegister(m.txns.collectors()...)
	m.Registry.MustRegister(m.state.collectors()...)
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Registry.MustRegister(readinessGauges(ready)...)
	if lastPublish != nil {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pgoutbox_last_publish_timestamp_seconds",
			Help: "Unix time of the last Kafka ack; 0 before the first.",
		}, func() float64 { return float64(lastPublish.Load()) / 1e9 }))
	}
	return m
}

// readinessGauges are pgoutbox_ready and pgoutbox_kafka_problem, read from
// ready at scrape time.
func readinessGauges(ready *Readiness) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pgoutbox_ready",
			Help: "1 when /readyz would answer ready: a session holds the pipeline and both ends answered the last check.",
		}, func() float64 {
			if ready == nil || ready.Ready() != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pgoutbox_kafka_problem",
			Help: "1 while Kafka has a problem (unreachable, a topic missing or not authorized, records failing), as /readyz and status name it; 0 otherwise.",
		}, func() float64 {
			if ready != nil {
				if p, _ := ready.broker.problem(); p != "" {
					return 1
				}
			}
			return 0
		}),
	}
}

// Handler serves /metrics (Prometheus text exposition of Registry).
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	return mux
}

// OpsHandler serves the relay's /metrics (m) and /healthz and /readyz
// (ready).
func OpsHandler(m *Metrics, ready *Readiness) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.Handle("GET /healthz", ready.Handler())
	mux.Handle("GET /readyz", ready.Handler())
	return mux
}

// recordMetrics count the records sessions produce, and what they read.
type recordMetrics struct {
	published  *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	batch      *prometheus.HistogramVec
	failed     prometheus.Counter
	heartbeats prometheus.Counter

	// series caches the children of published and latency per mode and
	// topic; copy on write, read without a lock.
	seriesMu sync.Mutex
	series   atomic.Pointer[map[seriesKey]*series]
}

func newRecordMetrics() *recordMetrics {
	r := &recordMetrics{
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
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_heartbeats_total",
			Help: "Heartbeat messages read back from the WAL.",
		}),
	}
	empty := map[seriesKey]*series{}
	r.series.Store(&empty)
	return r
}

func (r *recordMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.published, r.latency, r.batch, r.failed, r.heartbeats}
}

type seriesKey struct {
	mode  Mode
	topic string
	table string
}

// series are the children one acked record updates: a topic's TopicHooks.
type series struct {
	published prometheus.Counter
	latency   prometheus.Observer
	failed    prometheus.Counter
}

func (s *series) Acked(latency time.Duration) {
	s.published.Inc()
	s.latency.Observe(latency.Seconds())
}

func (s *series) Failed() { s.failed.Inc() }

// seriesFor is the series of records to topic from table in mode.
func (m *Metrics) seriesFor(mode Mode, topic, table string) *series {
	r := m.records
	k := seriesKey{mode, topic, table}
	if s, ok := (*r.series.Load())[k]; ok {
		return s
	}
	r.seriesMu.Lock()
	defer r.seriesMu.Unlock()
	old := *r.series.Load()
	if s, ok := old[k]; ok {
		return s
	}
	s := &series{
		published: r.published.WithLabelValues(topic, string(mode), table),
		latency:   r.latency.WithLabelValues(string(mode)),
		failed:    r.failed,
	}
	next := make(map[seriesKey]*series, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[k] = s
	r.series.Store(&next)
	return s
}

// modeRecords are the record metrics of one session of mode.
type modeRecords struct {
	m     *Metrics
	mode  Mode
	batch prometheus.Observer
}

// OnSessionRecords is the record metrics of a session of mode.
func (m *Metrics) OnSessionRecords(mode Mode) RecordHooks {
	return &modeRecords{m: m, mode: mode, batch: m.records.batch.WithLabelValues(string(mode))}
}

func (r *modeRecords) Topic(topic, table string) TopicHooks {
	return r.m.seriesFor(r.mode, topic, table)
}
func (r *modeRecords) Batch(n int) { r.batch.Observe(float64(n)) }
func (r *modeRecords) Heartbeat()  { r.m.records.heartbeats.Inc() }

// sessionMetrics are the sessions' mode and reconnects.
type sessionMetrics struct {
	mode       *prometheus.GaugeVec
	reconnects prometheus.Counter
}

func newSessionMetrics() sessionMetrics {
	s := sessionMetrics{
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pgoutbox_mode",
			Help: "1 for the mode of the current (or last) session, wal or poll; 0 for the other.",
		}, []string{"mode"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_reconnects_total",
			Help: "Sessions that ended in an error and were retried after a backoff.",
		}),
	}
	s.mode.WithLabelValues(string(ModeWAL))
	s.mode.WithLabelValues(string(ModePoll))
	return s
}

func (s *sessionMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.mode, s.reconnects}
}

// OnSessionStart sets the mode gauge to mode.
func (m *Metrics) OnSessionStart(mode Mode) {
	for _, md := range []Mode{ModeWAL, ModePoll} {
		v := 0.0
		if md == mode {
			v = 1
		}
		m.sessions.mode.WithLabelValues(string(md)).Set(v)
	}
}

// OnReconnect counts a session that ended in an error and is retried.
func (m *Metrics) OnReconnect() { m.sessions.reconnects.Inc() }

// txnMetrics are exactly-once delivery's Kafka transactions.
type txnMetrics struct {
	txns      prometheus.Counter
	txnCommit prometheus.Histogram
	txnSize   prometheus.Histogram
	txnAborts *prometheus.CounterVec
}

// abortReasons label pgoutbox_kafka_transactions_aborted_total.
var abortReasons = []string{"fenced", "timeout", "error"}

func newTxnMetrics() txnMetrics {
	t := txnMetrics{
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
	}
	for _, reason := range abortReasons {
		t.txnAborts.WithLabelValues(reason) // exported at 0, so that the first abort is an increase
	}
	return t
}

func (t *txnMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.txns, t.txnCommit, t.txnSize, t.txnAborts}
}

// OnTransactionCommitted counts a committed Kafka transaction of records
// records.
func (m *Metrics) OnTransactionCommitted(took time.Duration, records int) {
	m.txns.txns.Inc()
	m.txns.txnCommit.Observe(took.Seconds())
	m.txns.txnSize.Observe(float64(records))
}

// OnTransactionAborted counts a Kafka transaction with records that its
// session ended without committing, by why it ended.
func (m *Metrics) OnTransactionAborted(cause error) {
	reason := "error"
	switch {
	case sink.Fenced(cause):
		reason = "fenced"
	case errors.Is(cause, sink.ErrTxnTimedOut):
		reason = "timeout"
	}
	m.txns.txnAborts.WithLabelValues(reason).Inc()
}

// stateMetrics are what the pipeline's rows, slot and state say.
type stateMetrics struct {
	deadLettered prometheus.Counter
	retained     prometheus.Gauge
	lag          prometheus.Gauge
	oldest       *prometheus.GaugeVec
	pending      *prometheus.GaugeVec
	deleted      prometheus.Counter
	lostDeleted  *prometheus.CounterVec
	openDLQ      prometheus.Gauge
	held         prometheus.Gauge
	pollingSince prometheus.Gauge
}

func newStateMetrics() stateMetrics {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	return stateMetrics{
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgoutbox_events_dead_lettered_total",
			Help: "Events that could not be published and went to the dead-letter destination.",
		}),
		retained: gauge("pgoutbox_slot_retained_wal_bytes",
			"WAL the replication slot keeps on the server (current LSN minus restart_lsn); 0 without a slot."),
		lag: gauge("pgoutbox_slot_lag_bytes",
			"Distance from the slot's confirmed_flush_lsn to the server's current LSN; 0 without a slot."),
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
		openDLQ: gauge("pgoutbox_open_dead_letters",
			"Dead letters of the pipeline neither replayed nor skipped (pgoutbox dlq list), read every --metrics-interval."),
		held: gauge("pgoutbox_held_aggregates",
			"Aggregates held behind an open dead letter: their later events join it in the dead letters until it is replayed or skipped."),
		pollingSince: gauge("pgoutbox_polling_since_timestamp_seconds",
			"Unix time since which the pipeline polls instead of streaming the WAL (auto mode's fallback, or the handoff to a new slot), from its saved state; 0 while it streams, and when it was started in poll mode."),
	}
}

func (s *stateMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.deadLettered, s.retained, s.lag, s.oldest, s.pending, s.deleted, s.lostDeleted,
		s.openDLQ, s.held, s.pollingSince}
}

// tables exports each table's count of rows lost to deletes at 0 from the
// start.
func (m *Metrics) tables(tables []outbox.Table) {
	for _, t := range tables {
		m.state.lostDeleted.WithLabelValues(t.String())
	}
}

// OnDeadLettered counts n events sent to the dead-letter destination.
func (m *Metrics) OnDeadLettered(n int) { m.state.deadLettered.Add(float64(n)) }

// OnRowsLost counts rows of table deleted before polling published them.
func (m *Metrics) OnRowsLost(table string, n int64) {
	m.state.lostDeleted.WithLabelValues(table).Add(float64(n))
}

// OnRetentionDeleted counts published rows retention deleted.
func (m *Metrics) OnRetentionDeleted(n int64) { m.state.deleted.Add(float64(n)) }

// OnTableSample sets a table's unpublished rows and the age of the oldest.
func (m *Metrics) OnTableSample(table string, count int64, oldest time.Duration) {
	m.state.pending.WithLabelValues(table).Set(float64(count))
	m.state.oldest.WithLabelValues(table).Set(oldest.Seconds())
}

// OnSlotSample sets the WAL the slot retains and its lag (0 without a
// slot).
func (m *Metrics) OnSlotSample(retained, lag int64) {
	m.state.retained.Set(float64(retained))
	m.state.lag.Set(float64(lag))
}

// OnStateSample sets what the pipeline's state says: since when it polls
// instead of streaming (zero: it does not), and its open dead letters and
// the aggregates they hold (nil: unknown, left as they are).
func (m *Metrics) OnStateSample(pollingSince time.Time, openDLQ, held *int64) {
	since := 0.0
	if !pollingSince.IsZero() {
		since = float64(pollingSince.UnixNano()) / 1e9
	}
	m.state.pollingSince.Set(since)
	if openDLQ != nil && held != nil {
		m.state.openDLQ.Set(float64(*openDLQ))
		m.state.held.Set(float64(*held))
	}
}
