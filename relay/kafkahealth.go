package relay

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgoutbox/pgoutbox/sink"
)

// DeliveryError is a record Kafka did not acknowledge: it names the topic
// and the event, and wraps franz-go's error (a *kerr.Error code, or one of
// kgo's sentinels).
type DeliveryError struct {
	Topic, EventID string
	Err            error
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("event %s to topic %s: %s", e.EventID, e.Topic, sink.Describe(e.Topic, e.Err))
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// kafkaHealth is the current Kafka-side problem, if any: a broker that
// does not answer (from the periodic ping), records that fail (from
// their promises), or partitions that cannot take writes while records
// wait for them (from the periodic check of the partitions written to).
// The relay shows it on /readyz and saves it in pgoutbox_state for
// status. A record problem clears when a record to its topic is
// acknowledged; the ping problem when a broker answers; the partitions'
// when a check finds them writable, or no record waiting.
type kafkaHealth struct {
	// recordSet lets the ack path skip the lock while no record problem
	// is set, which is nearly always.
	recordSet atomic.Bool
	// changes counts every change, for whoever saves it.
	changes atomic.Int64

	mu          sync.Mutex
	ping        checkResult
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

// pinged records a ping's result and reports whether the problem changed.
func (h *kafkaHealth) pinged(err error) (changed bool) { return h.checked(&h.ping, err) }

// writable records a check of the partitions written to and reports
// whether the problem changed (another partition, or another count).
func (h *kafkaHealth) writable(err error) (changed bool) { return h.checked(&h.unwritable, err) }

func (h *kafkaHealth) checked(c *checkResult, err error) (changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !c.set(err) {
		return false
	}
	h.changes.Add(1)
	return true
}

// failed records a record's delivery failure; it reports whether this is
// a new problem (another topic or another error code).
func (h *kafkaHealth) failed(e *DeliveryError) (changed bool) {
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

// acked clears a record problem of topic; it reports whether it did.
func (h *kafkaHealth) acked(topic string) (cleared bool) {
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
func (h *kafkaHealth) changeCount() int64 { return h.changes.Load() }

// problem returns the current problem and since when; "" when there is
// none. A broker that does not answer comes first: records wait for it.
func (h *kafkaHealth) problem() (string, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.ping.err != nil:
		var what string
		if errors.Is(h.ping.err, sink.ErrAuth) {
			what = h.ping.err.Error()
		} else {
			what = "unreachable: " + h.ping.err.Error()
		}
		return what, h.ping.since
	case h.record != nil:
		return "records fail: " + h.record.Error(), h.recordSince
	case h.unwritable.err != nil:
		return "records wait: " + h.unwritable.err.Error(), h.unwritable.since
	}
	return "", time.Time{}
}

func (h *kafkaHealth) err() error {
	if p, _ := h.problem(); p != "" {
		return errors.New(p)
	}
	return nil
}
