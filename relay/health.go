package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pgoutbox/pgoutbox/sink"
)

// health is what readiness is judged on: a session holds the pipeline,
// the last check of Postgres succeeded (or has not run), and Kafka has no
// problem (kafkahealth.go). Metrics serves it (Ready, /readyz, the
// pgoutbox_ready gauge); sessions, the monitor and the row path report to
// it.
type health struct {
	session atomic.Value // Mode of the running session, "" between sessions
	dbErr   atomic.Pointer[error]
	kafka   kafkaHealth
}

func newHealth() *health {
	h := &health{}
	h.session.Store(Mode(""))
	return h
}

// up marks a session of mode holding the pipeline; the returned function
// marks it gone.
func (h *health) up(mode Mode) (down func()) {
	h.session.Store(mode)
	return func() { h.session.Store(Mode("")) }
}

// checked records the last check of Postgres (nil: it answered).
func (h *health) checked(err error) { h.dbErr.Store(&err) }

// ready is Metrics.Ready.
func (h *health) ready() error {
	if mode, _ := h.session.Load().(Mode); mode == "" {
		return errors.New("no session: connecting, backing off, or waiting for the pipeline lock")
	}
	if e := h.dbErr.Load(); e != nil && *e != nil {
		return fmt.Errorf("postgres: %w", *e)
	}
	if err := h.kafka.err(); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

// pinged records a ping's result and logs a change.
func (h *health) pinged(log *slog.Logger, err error) {
	if !h.kafkaPing(err) {
		return
	}
	if err != nil {
		log.Warn("kafka is not reachable; records wait for it", "err", err)
	} else {
		log.Info("kafka is reachable again")
	}
}

// writable records a check of the partitions written to, and logs a
// change.
func (h *health) writable(log *slog.Logger, err error) {
	if !h.kafka.writable(err) {
		return
	}
	if err != nil {
		log.Warn("kafka does not take writes; records wait for it", "err", err)
	} else {
		log.Info("kafka takes writes again")
	}
}

// recordFailed records a record's failure, logs a new problem, and
// returns the error that names the topic and the event.
func (h *health) recordFailed(log *slog.Logger, topic, eventID string, err error) error {
	de := &DeliveryError{Topic: topic, EventID: eventID, Err: err}
	if sink.Abandoned(err) {
		return de // a stop abandoned the record: not Kafka's problem
	}
	if h.kafka.failed(de) {
		log.Error("kafka does not acknowledge records", "topic", topic, "event_id", eventID, "err", de.Error())
	}
	return de
}

// recordAcked clears a record problem of topic once a record to it is
// acked.
func (h *health) recordAcked(log *slog.Logger, topic string) {
	if h.kafka.acked(topic) {
		log.Info("kafka acknowledges records again", "topic", topic)
	}
}

// kafkaPing records a ping's result and reports whether Kafka's problem
// changed.
func (h *health) kafkaPing(err error) (changed bool) { return h.kafka.pinged(err) }

// kafkaProblem is Kafka's current problem ("" for none) and since when,
// and how often it changed, for whoever saves it.
func (h *health) kafkaProblem() (problem string, since time.Time, changes int64) {
	changes = h.kafka.changeCount()
	problem, since = h.kafka.problem()
	return problem, since, changes
}

// kafkaChanges counts every change of Kafka's problem.
func (h *health) kafkaChanges() int64 { return h.kafka.changeCount() }
