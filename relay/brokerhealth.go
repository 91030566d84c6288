package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgoutbox/pgoutbox/sink"
)

// DeliveryError is a record the broker did not acknowledge: it names the
// topic and the event, and wraps the broker's error (for Kafka a
// *kerr.Error code, or one of kgo's sentinels).
type DeliveryError struct {
	Topic, EventID string
	Err            error
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("event %s to topic %s: %s", e.EventID, e.Topic, sink.Describe(e.Topic, e.Err))
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// brokerHealth is the current problem on the broker's side, if any: a
// broker that does not answer (from the periodic ping), records that fail
// (from their promises), or, on Kafka, partitions that cannot take writes
// while records wait for them (from the periodic check of the partitions
// written to). The relay shows it on /readyz and saves it in
// pgoutbox_state for status, named by the broker. A record problem clears
// when a record to its topic is acknowledged; the ping problem when the
// broker answers; the partitions' when a check finds them writable, or no
// record waiting. A change is logged once.
type brokerHealth struct {
	// name names the broker in log lines, readiness and status ("kafka",
	// "nats-jetstream"; Opener.Name).
	name string
	// recordSet lets the ack path skip the lock while no record problem
	// is set, which is nearly always.
	recordSet atomic.Bool
	// changes counts every change, for whoever saves it.
	changes atomic.Int64

	mu sync.Mutex
	// reach is the last ping's result.
	reach       checkResult
	record      *DeliveryError
	recordSince time.Time
	// unwritable is the last check of the partitions written to: a
	// *sink.UnwritableError.
	unwritable checkResult
}

// checkResult is the problem a periodic check found, and since when.
type checkResult struct {
	err   error
	since time.Time
}

// set records a check's result and reports whether the problem changed:
// it appeared, cleared, or says something else now.
func (c *checkResult) set(err error) (changed bool) {
	switch {
	case err == nil && c.err == nil:
		return false
	case err == nil:
		c.err = nil
	case c.err == nil:
		c.err, c.since = err, time.Now()
	default:
		same := c.err.Error() == err.Error()
		c.err = err
		if same {
			return false
		}
	}
	return true
}

func newBrokerHealth(name string) *brokerHealth { return &brokerHealth{name: name} }

// pinged records a ping's result and logs a change.
func (h *brokerHealth) pinged(log *slog.Logger, err error) {
	if !h.ping(err) {
		return
	}
	if err != nil {
		log.Warn(h.name+" is not reachable; records wait for it", "err", err)
	} else {
		log.Info(h.name + " is reachable again")
	}
}

// writable records a check of the partitions written to, and logs a
// change.
func (h *brokerHealth) writable(log *slog.Logger, err error) {
	if !h.writes(err) {
		return
	}
	if err != nil {
		log.Warn(h.name+" does not take writes; records wait for it", "err", err)
	} else {
		log.Info(h.name + " takes writes again")
	}
}

// ping records a ping's result and reports whether the problem changed.
func (h *brokerHealth) ping(err error) (changed bool) { return h.checked(&h.reach, err) }

// writes records a check of the partitions written to and reports
// whether the problem changed (another partition, or another count).
func (h *brokerHealth) writes(err error) (changed bool) { return h.checked(&h.unwritable, err) }

func (h *brokerHealth) checked(c *checkResult, err error) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !c.set(err) {
		return false
	}
	h.changes.Add(1)
	return true
}

// recordFailed records a record's failure, logs a new problem, and
// returns the error that names the topic and the event.
func (h *brokerHealth) recordFailed(log *slog.Logger, topic, eventID string, err error) error {
	de := &DeliveryError{Topic: topic, EventID: eventID, Err: err}
	if sink.Abandoned(err) {
		return de // a stop abandoned the record: not the broker's problem
	}
	if h.failed(de) {
		log.Error(h.name+" does not acknowledge records", "topic", topic, "event_id", eventID, "err", de.Error())
	}
	return de
}

// failed records a record's delivery failure; it reports whether this is
// a new problem (another topic or another error code).
func (h *brokerHealth) failed(e *DeliveryError) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.record; r != nil && r.Topic == e.Topic && sink.SameFailure(r.Err, e.Err) {
		return false
	}
	if h.record == nil || h.record.Topic != e.Topic {
		h.recordSince = time.Now()
	}
	h.record = e
	h.recordSet.Store(true)
	h.changes.Add(1)
	return true
}

// recordAcked clears a record problem of topic once a record to it is
// acked, and says so.
func (h *brokerHealth) recordAcked(log *slog.Logger, topic string) {
	if h.acked(topic) {
		log.Info(h.name+" acknowledges records again", "topic", topic)
	}
}

// acked clears a record problem of topic; it reports whether it did.
func (h *brokerHealth) acked(topic string) (cleared bool) {
	if !h.recordSet.Load() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.record == nil || h.record.Topic != topic {
		return false
	}
	h.record = nil
	h.recordSet.Store(false)
	h.changes.Add(1)
	return true
}

// changeCount counts every change of the problem, for whoever saves it.
func (h *brokerHealth) changeCount() int64 { return h.changes.Load() }

// problem returns the current problem and since when; "" when there is
// none. A broker that does not answer comes first: records wait for it.
func (h *brokerHealth) problem() (string, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.reach.err != nil:
		var what string
		if permanent(h.reach.err) {
			what = h.reach.err.Error()
		} else {
			what = "unreachable: " + h.reach.err.Error()
		}
		return what, h.reach.since
	case h.record != nil:
		return "records fail: " + h.record.Error(), h.recordSince
	case h.unwritable.err != nil:
		return "records wait: " + h.unwritable.err.Error(), h.unwritable.since
	}
	return "", time.Time{}
}

func (h *brokerHealth) err() error {
	if p, _ := h.problem(); p != "" {
		return errors.New(p)
	}
	return nil
}
