package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/sink"
)

// RefusedError is an event Kafka refused for what it is (sink.Refused):
// the next session dead-letters it, or stops there under the halt policy,
// before producing anything after it.
type RefusedError struct {
	Topic, EventID string
	Err            error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("kafka refused event %s for topic %s: %v", e.EventID, e.Topic, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// A refusal arrives in a produce callback, after franz-go failed every
// record buffered for the partition with the same error, the refused
// record's followers with it. The session cannot go on: those followers
// must be sent again in order, and only a new session reads them again.
// So a refusal ends the session, and the next one dead-letters the refused
// event before producing anything (prepareRow). Which record was refused
// is the first failure of its partition in the session: the partition's
// callbacks run in produce order. A batch is refused as a whole, so the
// first record of a refused batch may be innocent; an event is therefore
// dead-lettered on its second refusal (and a size refusal first renews the
// client, whose learned limits then dead-letter an oversized record before
// it is produced). A topic refused as such (authorization, an invalid
// name) dead-letters every event for it at once; an authorization refusal
// only for topicRetry, after which the topic is tried again, so that the
// relay's events flow once the user is granted WRITE (Apache Kafka's
// authorizer takes a grant at once, without a restart of the client).
type refusals struct {
	log *slog.Logger
	dlq string // refusals of the dead-letter topic are the pipeline's, retried

	any atomic.Bool // fast path: nothing was ever refused
	mu  sync.Mutex
	// Across sessions: events with their refusals, topics refused.
	events map[string]*refusedEvent
	topics map[string]topicRefusal
	// In the running session.
	ended      bool                    // a refusal ends it
	renew      bool                    // the client must be renewed first
	partitions map[topicPartition]bool // first failure seen
	keys       map[topicKey]string     // refused event per key
	overtaken  int                     // later events of a refused key acked
}

type refusedEvent struct {
	strikes int
	topic   string
	err     error
}

// topicRetry is how long a topic refused for authorization stays refused:
// each retry while the grant is missing costs a session restart.
const topicRetry = 5 * time.Second

type topicRefusal struct {
	err error
	at  time.Time
}

type topicPartition struct {
	topic     string
	partition int32
}

type topicKey struct{ topic, key string }

func newRefusals(log *slog.Logger, dlq string) *refusals {
	return &refusals{log: log, dlq: dlq, events: map[string]*refusedEvent{}, topics: map[string]topicRefusal{},
		partitions: map[topicPartition]bool{}, keys: map[topicKey]string{}}
}

// active tells whether anything was ever refused: until then, the row
// path asks nothing more of refusals (a load, no lock).
func (f *refusals) active() bool { return f.any.Load() }

// failed notes a record's failure from its produce callback. It returns
// true for the refusal that ends the session: the caller then stops what
// the client still holds from going out (sink.Kafka.AbortBuffered).
func (f *refusals) failed(eventID string, rec *kgo.Record, err error) (first bool) {
	if !sink.Refused(err) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if sink.SizeRefused(err) {
		f.renew = true // the limits learned are out of date
	}
	if rec.Topic == f.dlq {
		return false // the pipeline's own destination: retried
	}
	first = !f.ended
	f.ended = true
	f.any.Store(true)
	if sink.TopicRefused(err) {
		if _, ok := f.topics[rec.Topic]; !ok {
			f.topics[rec.Topic] = topicRefusal{err, time.Now()}
			f.log.Error("kafka refused the topic: its events are dead-lettered", "topic", rec.Topic, "event_id", eventID, "err", err)
		}
		return first
	}
	tp := topicPartition{rec.Topic, rec.Partition}
	if f.partitions[tp] {
		return first // failed with the refused record of its partition
	}
	f.partitions[tp] = true
	f.keys[topicKey{rec.Topic, string(rec.Key)}] = eventID
	e := f.events[eventID]
	if e == nil {
		e = &refusedEvent{topic: rec.Topic}
		f.events[eventID] = e
	}
	e.strikes++
	e.err = err
	f.log.Warn("kafka refused a record", "topic", rec.Topic, "partition", rec.Partition, "event_id", eventID,
		"aggregate_id", string(rec.Key), "refusals", e.strikes, "err", err)
	return first
}

// acked checks, for a record acked after a refusal, that it is not a later
// event of the refused one's key: that would be an event overtaking it.
// Callers check any first, to spare the event id on the hot path.
func (f *refusals) acked(eventID string, rec *kgo.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if refused, ok := f.keys[topicKey{rec.Topic, string(rec.Key)}]; ok && refused != eventID {
		f.overtaken++
		f.log.Error("an event reached kafka before the refused event of its aggregate was dead-lettered",
			"topic", rec.Topic, "event_id", eventID, "refused_event_id", refused, "aggregate_id", string(rec.Key))
	}
}

// check returns the refusal that stands for an event about to be
// produced: its topic refused, or the event refused twice. Callers check
// any first.
func (f *refusals) check(eventID, topic string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.topics[topic]; ok {
		if !errors.Is(r.err, kerr.TopicAuthorizationFailed) || time.Since(r.at) < topicRetry {
			return &RefusedError{Topic: topic, EventID: eventID, Err: r.err}
		}
		delete(f.topics, topic) // granted since? The next refusal says.
	}
	if e := f.events[eventID]; e != nil && e.strikes >= 2 {
		return &RefusedError{Topic: e.topic, EventID: eventID, Err: e.err}
	}
	return nil
}

// endSession reports whether a refusal ended the session, and whether the
// client must be renewed, and starts the next session's bookkeeping.
func (f *refusals) endSession() (refused, renew bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	refused, renew = f.ended, f.renew
	f.ended, f.renew = false, false
	clear(f.partitions)
	clear(f.keys)
	return refused, renew
}
