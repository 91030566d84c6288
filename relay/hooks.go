package relay

import (
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// Hook is what the relay reports to: a value that implements any of the
// Hook* interfaces below. The relay calls each hook through the
// interfaces it implements, as franz-go's client calls its hooks, so a
// hook implements only what it observes and a new interface breaks none.
// Metrics, the Prometheus metrics, is one; Config.Hooks adds others.
// Hooks are called from the relay's goroutines, several at once: a hook
// guards its own state.
type Hook any

// HookRecords observes the records a session produces. It is the only
// hook on the per-event path: the relay asks it once per session for that
// session's RecordHooks, and those once per topic for its TopicHooks,
// whose methods alone run for each record.
type HookRecords interface {
	OnSessionRecords(mode Mode) RecordHooks
}

// RecordHooks observe one session's records; the session's goroutine
// calls them.
type RecordHooks interface {
	// Topic returns the hooks of the records to topic from table (its
	// schema.name), which the session keeps until either changes.
	Topic(topic, table string) TopicHooks
	// Batch closes a transaction (WAL) or a poll (poll) of n records.
	Batch(n int)
	// Heartbeat is a heartbeat read back from the WAL.
	Heartbeat()
}

// TopicHooks observe the outcome of each record to one topic, from the
// broker's goroutines.
type TopicHooks interface {
	// Acked: the broker acknowledged the record latency after its
	// transaction's commit (WAL) or the poll that read it (poll).
	Acked(latency time.Duration)
	// Failed: the broker did not acknowledge the record; it is sent
	// again, never dropped.
	Failed()
}

// HookSessionStart observes a session that holds the pipeline and
// publishes in mode.
type HookSessionStart interface {
	OnSessionStart(mode Mode)
}

// HookReconnect observes a session that ended in an error and is retried
// after a backoff.
type HookReconnect interface {
	OnReconnect()
}

// HookDeadLettered observes n events sent to the dead-letter destination.
type HookDeadLettered interface {
	OnDeadLettered(n int)
}

// HookRowsLost observes n rows of table (schema.name) deleted before
// polling published them, whose events are lost.
type HookRowsLost interface {
	OnRowsLost(table string, n int64)
}

// HookRetentionDeleted observes n published rows deleted by retention.
type HookRetentionDeleted interface {
	OnRetentionDeleted(n int64)
}

// HookTransactionCommitted observes a Kafka transaction of records events
// and dead letters committed under exactly-once delivery, took after its
// position record was handed over.
type HookTransactionCommitted interface {
	OnTransactionCommitted(took time.Duration, records int)
}

// HookTransactionAborted observes a Kafka transaction holding records
// that its session ended without committing; cause is why it ended
// (sink.Fenced, sink.ErrTxnTimedOut, or another error; nil when the
// session failed elsewhere).
type HookTransactionAborted interface {
	OnTransactionAborted(cause error)
}

// HookSample observes what the relay's monitor reads every
// Config.Operations.MonitorInterval, when that is set.
type HookSample interface {
	// OnSlotSample: the WAL the slot retains and its lag, in bytes (0
	// without a slot).
	OnSlotSample(retained, lag int64)
	// OnTableSample: a table's rows above the published floor not marked
	// published, and the age of the oldest.
	OnTableSample(table string, unpublished int64, oldest time.Duration)
	// OnStateSample: what the pipeline's state says: since when it polls
	// instead of streaming (zero: it does not), and its open dead letters
	// and the aggregates they hold (nil: unknown).
	OnStateSample(pollingSince time.Time, deadLetters, held *int64)
}

// hooks are the relay's hooks, each called through the Hook* interfaces
// it implements.
type hooks []Hook

// sessionRecords are the record hooks of a session of mode.
func (hs hooks) sessionRecords(mode Mode) []RecordHooks {
	var out []RecordHooks
	for _, h := range hs {
		if r, ok := h.(HookRecords); ok {
			out = append(out, r.OnSessionRecords(mode))
		}
	}
	return out
}

func (hs hooks) sessionStart(mode Mode) {
	for _, h := range hs {
		if x, ok := h.(HookSessionStart); ok {
			x.OnSessionStart(mode)
		}
	}
}

func (hs hooks) reconnect() {
	for _, h := range hs {
		if x, ok := h.(HookReconnect); ok {
			x.OnReconnect()
		}
	}
}

// DeadLettered is deadLetters' counter.
func (hs hooks) DeadLettered(n int) {
	for _, h := range hs {
		if x, ok := h.(HookDeadLettered); ok {
			x.OnDeadLettered(n)
		}
	}
}

func (hs hooks) rowsLost(table string, n int64) {
	for _, h := range hs {
		if x, ok := h.(HookRowsLost); ok {
			x.OnRowsLost(table, n)
		}
	}
}

func (hs hooks) retentionDeleted(n int64) {
	for _, h := range hs {
		if x, ok := h.(HookRetentionDeleted); ok {
			x.OnRetentionDeleted(n)
		}
	}
}

// Committed and Aborted make hooks exactly-once delivery's observer
// (eos.Observer).
func (hs hooks) Committed(took time.Duration, records int) {
	for _, h := range hs {
		if x, ok := h.(HookTransactionCommitted); ok {
			x.OnTransactionCommitted(took, records)
		}
	}
}

func (hs hooks) Aborted(cause error) {
	for _, h := range hs {
		if x, ok := h.(HookTransactionAborted); ok {
			x.OnTransactionAborted(cause)
		}
	}
}

// samples are the hooks the monitor reports to.
func (hs hooks) samples() []HookSample {
	var out []HookSample
	for _, h := range hs {
		if x, ok := h.(HookSample); ok {
			out = append(out, x)
		}
	}
	return out
}

// meter is one session's view of the record hooks: it keeps the topic
// hooks of the last topic and table it saw, so that a record costs a
// string comparison and, at its ack, one call per hook. It is used by the
// session's goroutine; the acks it returns may be used from any.
type meter struct {
	rec    []RecordHooks
	topic  string
	rel    *outbox.Relation
	last   *topicRef
	txRows int
}

// topicRef holds a topic's hooks for the acks of its records: a pointer
// keeps an ack, which every record's promise captures, as small as a
// concrete series would.
type topicRef struct{ hooks TopicHooks }

func (hs hooks) meter(mode Mode) meter { return meter{rec: hs.sessionRecords(mode)} }

// row counts a record of the current transaction produced to topic and
// returns what its ack updates; since is the time its latency counts from.
func (p *meter) row(topic string, rel *outbox.Relation, since time.Time) ack {
	if p.last == nil || topic != p.topic || rel != p.rel {
		p.last, p.topic, p.rel = &topicRef{p.topicHooks(topic, rel)}, topic, rel
	}
	p.txRows++
	return ack{p.last, since}
}

// topicHooks are the hooks of the records to topic from rel.
func (p *meter) topicHooks(topic string, rel *outbox.Relation) TopicHooks {
	table := outbox.Table{Schema: rel.Schema, Name: rel.Name}.String()
	switch len(p.rec) {
	case 0:
		return noTopicHooks{}
	case 1:
		return p.rec[0].Topic(topic, table)
	}
	all := make(topicFanOut, len(p.rec))
	for i, r := range p.rec {
		all[i] = r.Topic(topic, table)
	}
	return all
}

// commit closes a transaction (WAL) or a batch (poll) of the rows counted.
func (p *meter) commit() {
	if p.txRows > 0 {
		for _, r := range p.rec {
			r.Batch(p.txRows)
		}
		p.txRows = 0
	}
}

func (p *meter) heartbeat() {
	for _, r := range p.rec {
		r.Heartbeat()
	}
}

// ack is a record's handle, captured by its produce callback.
type ack struct {
	t     *topicRef
	since time.Time
}

// done records the record's ack, or its delivery failure.
func (a ack) done(err error) {
	if err != nil {
		a.t.hooks.Failed()
		return
	}
	a.t.hooks.Acked(time.Since(a.since))
}

// topicFanOut are the topic hooks of several record hooks.
type topicFanOut []TopicHooks

func (f topicFanOut) Acked(latency time.Duration) {
	for _, t := range f {
		t.Acked(latency)
	}
}

func (f topicFanOut) Failed() {
	for _, t := range f {
		t.Failed()
	}
}

// noTopicHooks: no hook observes records.
type noTopicHooks struct{}

func (noTopicHooks) Acked(time.Duration) {}
func (noTopicHooks) Failed()             {}
