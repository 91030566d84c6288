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
// broker that does not answer (from the periodic ping) or records that
// fail (from their promises). The relay shows it on /readyz and saves it
// in pgoutbox_state for status, named by the broker. A record problem
// clears when a record to its topic is acknowledged; the ping problem when
// the broker answers. A change is logged once.
type brokerHealth struct {
	// name names the broker in log lines, readiness and status ("kafka",
	// "nats-jetstream"; Opener.Name).
	name string
	// recordSet lets the ack path skip the lock while no record problem
	// is set, which is nearly always.
	recordSet atomic.Bool
	// changes counts every change, for whoever saves it.
	changes atomic.Int64

	mu          sync.Mutex
	pingErr     error
	pingSince   time.Time
	record      *DeliveryError
	recordSince time.Time
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

// ping records a ping's result and reports whether the problem changed.
func (h *brokerHealth) ping(err error) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil && h.pingErr == nil:
		return false
	case err == nil:
		h.pingErr = nil
	case h.pingErr == nil:
		h.pingErr, h.pingSince = err, time.Now()
	default:
		same := h.pingErr.Error() == err.Error()
		h.pingErr = err
		if same {
			return false
		}
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
	case h.pingErr != nil:
		var what string
		if permanent(h.pingErr) {
			what = h.pingErr.Error()
		} else {
			what = "unreachable: " + h.pingErr.Error()
		}
		return what, h.pingSince
	case h.record != nil:
		return "records fail: " + h.record.Error(), h.recordSince
	}
	return "", time.Time{}
}

func (h *brokerHealth) err() error {
	if p, _ := h.problem(); p != "" {
		return errors.New(p)
	}
	return nil
}
