package eos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/sink"
)

// Transactions is the producer's transactional side (sink/txn.go).
type Transactions interface {
	Fence(ctx context.Context) error
	Begin() error
	Commit(ctx context.Context, check func() error) error
	Abort(ctx context.Context) error
	HoldsRecords() bool
	Probe(ctx context.Context) error
	// Settled asks whether the last commit is complete, its markers
	// written; ok is false when that cannot be told.
	Settled(ctx context.Context) (settled, ok bool)
	ProbeFailed(ctx context.Context) error
	// Classify names a transactional failure (sink.ErrFenced,
	// sink.ErrTxnTimedOut).
	Classify(error) error
	// Unsent names the open transaction when it holds records and was
	// never asked to commit; Unended records such a one, of any process.
	Unsent() (id int64, epoch int16, ok bool)
	Unended(id int64, epoch int16)
}

// PositionLog is the position topic, where position records are read back
// (sink/admin.go).
type PositionLog interface {
	EnsureCompactedTopic(ctx context.Context, topic string) error
	LastCommitted(ctx context.Context, topic string, key []byte) (*kgo.Record, error)
}

// Producer is what a session produces its position records with.
type Producer interface {
	Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) error
	// Renew replaces the connection; a new transactional producer fences
	// the one before.
	Renew() error
}

// Broker is the relay's broker as a session uses it.
type Broker struct {
	Producer  Producer
	Txn       Transactions
	Positions PositionLog
}

// Observer is told how each Kafka transaction of a session ended (the
// relay's hooks).
type Observer interface {
	// Committed: a transaction of records (events and dead letters) took
	// took from its position record's hand-over to its commit.
	Committed(took time.Duration, records int)
	// Aborted: a transaction holding records that its session ended
	// without committing; cause is why the session ended.
	Aborted(cause error)
}

// SessionConfig names a session's pipeline and where its position records
// go.
type SessionConfig struct {
	// Pipeline keys the position records; TransactionalID is the
	// producer's, for what the session logs.
	Pipeline, TransactionalID string
	// Topic is the position topic.
	Topic string
	// Timeout bounds opening.
	Timeout time.Duration
}

// Session is what a session's exactly-once delivery holds: the
// transactional producer, the open transaction's state, and where its
// position records go.
type Session struct {
	k   Broker
	cfg SessionConfig
	obs Observer
	log *slog.Logger
	// failed is the first record of the open transaction that failed.
	failed func() error
	// broken is a commit's failure: the producer is not used again, not
	// even to abort (sink/txn.go).
	broken error
}

// NewSession is a session's exactly-once delivery over k, which reports
// to obs.
func NewSession(k Broker, cfg SessionConfig, obs Observer, log *slog.Logger) *Session {
	return &Session{k: k, cfg: cfg, obs: obs, log: log, failed: func() error { return nil }}
}

// open starts a session's exactly-once delivery: a new producer, which
// fences any earlier one of the pipeline (a relay that lost its connection
// to Postgres but still produces), then the position Kafka last
// committed, then the first transaction.
func (t *Session) open(ctx context.Context) (Position, error) {
	k := t.k
	if err := k.Producer.Renew(); err != nil {
		return Position{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	if err := k.Txn.Fence(ctx); err != nil {
		return Position{}, err
	}
	if err := k.Positions.EnsureCompactedTopic(ctx, t.cfg.Topic); err != nil {
		return Position{}, err
	}
	rec, err := k.Positions.LastCommitted(ctx, t.cfg.Topic, []byte(t.cfg.Pipeline))
	if err != nil {
		return Position{}, err
	}
	var pos Position
	if rec != nil {
		if pos, err = ParsePosition(rec); err != nil {
			return Position{}, err
		}
	}
	return pos, k.Txn.Begin()
}

// Commit ends the open Kafka transaction, of records records, with pos as
// its position record, commits it once every record is acked and none
// failed, and begins the next. recordCtx is what the position record is
// produced with.
func (t *Session) Commit(ctx context.Context, recordCtx context.Context, pos Position, records int) error {
	rec, err := pos.Record(t.cfg.Pipeline, t.cfg.Topic, time.Now())
	if err != nil {
		return err
	}
	var posErr error
	done := make(chan struct{})
	if err := t.k.Producer.Produce(recordCtx, rec, func(_ *kgo.Record, err error) { posErr = t.k.Txn.Classify(err); close(done) }); err != nil {
		return fmt.Errorf("kafka: position record: %w", err)
	}
	check := func() error {
		<-done // Flush returned: the promise has run
		if posErr != nil {
			return fmt.Errorf("kafka: position record: %w", posErr)
		}
		return t.failed()
	}
	start := time.Now()
	if err := t.k.Txn.Commit(ctx, check); err != nil {
		if !sink.Fenced(err) && !errors.Is(err, sink.ErrTxnTimedOut) {
			err = fmt.Errorf("kafka: transaction up to %s: %w", pos, err)
		}
		t.broken = err
		return err
	}
	t.obs.Committed(time.Since(start), records)
	if err := t.k.Txn.Begin(); err != nil {
		t.broken = err
		return err
	}
	return nil
}

// Settled asks the coordinator whether the last commit is complete
// (Transactions.Settled).
func (t *Session) Settled(ctx context.Context) (settled, ok bool) { return t.k.Txn.Settled(ctx) }

// Classify names a transactional failure (Transactions.Classify).
func (t *Session) Classify(err error) error { return t.k.Txn.Classify(err) }

// End ends a session's exactly-once delivery after its records were
// flushed. A clean stop committed everything. After a failure, the open
// transaction is aborted where that is safe, which also tells a relay
// that was fenced while it was cut off from Postgres: it must stop, not
// wait for the pipeline again. Elsewhere (a record or the commit failed)
// what is open is left to the next session's fence (or the broker's
// transaction timeout), and the coordinator is asked, without the
// producer, whether another relay took the pipeline over.
func (t *Session) End(ctx context.Context, _ error) error {
	cause := t.k.Txn.Classify(t.failed())
	if cause == nil {
		cause = t.broken
	}
	open := t.k.Txn.HoldsRecords()
	err := t.close(ctx, cause)
	if open {
		// The transaction's records never become visible: aborted here,
		// by the next session's fence, or by the broker's timeout.
		if sink.Fenced(err) {
			cause = err
		}
		t.obs.Aborted(cause)
	}
	return err
}

// close is End's work, after a session that ended on cause.
func (t *Session) close(ctx context.Context, cause error) error {
	if err := cause; err != nil {
		if sink.Fenced(err) {
			return err
		}
		// The producer is not used again, but another relay may have
		// taken over while this one was cut off: ask without it.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if perr := t.k.Txn.ProbeFailed(pctx); sink.Fenced(perr) {
			return perr
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := t.k.Txn.Abort(ctx); err != nil {
		if sink.Fenced(err) {
			return err
		}
		t.log.Warn("aborting the open kafka transaction failed; the next session's producer aborts it", "err", err)
		return nil
	}
	// Nothing was open, or the abort went through: ask whether another
	// relay took the pipeline over meanwhile.
	if err := t.k.Txn.Probe(ctx); err != nil {
		if sink.Fenced(err) {
			return err
		}
		t.log.Debug("probing the transactional id failed", "err", err)
	}
	return nil
}
