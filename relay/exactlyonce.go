package relay

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/eos"
	"github.com/pgoutbox/pgoutbox/replication"
)

// Exactly-once delivery: a consumer with isolation.level=read_committed
// sees every event once. A session fences the producers before it, reads
// the position Kafka last committed and resumes after it; its events go
// out in Kafka transactions, each with a position record on the
// pipeline's position topic that names what it carried, and the slot is
// confirmed, or the polled rows marked, only once the transaction is
// committed. What knows nothing of the sessions is in internal/eos: the
// position record, the transactional session, the ledger, a poll
// session's delivery (eos.Poll); here is the WAL session's publishing
// loop, which commits as the stream goes.

// newTxnSession is a session's exactly-once delivery over k, which tells
// the hooks how each Kafka transaction ended.
func newTxnSession(k Broker, cfg Config, hs hooks, log *slog.Logger) *eos.Session {
	return eos.NewSession(eos.Broker{Producer: k.Sink, Txn: k.Txn, Positions: k.Positions},
		eos.SessionConfig{Pipeline: cfg.Replication.Slot, TransactionalID: cfg.transactionalID(), Topic: cfg.Transactions.PositionTopic,
			Timeout: cfg.queryTimeout()}, hs, log)
}

// The WAL session.

// exactlyOnceWAL is a WAL session's exactly-once delivery: the rows of
// whole Postgres transactions go into one Kafka transaction, committed
// when it reached its bounds or nothing more waits, and the slot is
// confirmed only then (txnLedger).
type exactlyOnceWAL struct {
	*eos.Session
	ledger *eos.Ledger
	to     confirmer
	// recordCtx is what records are produced with (publisher.recordCtx).
	recordCtx context.Context
	// maxRecords and maxAge bound a Kafka transaction; shutdown bounds a
	// commit once the session ends.
	maxRecords       int
	maxAge, shutdown time.Duration
	// interval is the least time between the end of one Kafka commit
	// (committed) and the next (Config.Transactions.Interval).
	interval  time.Duration
	committed time.Time
	// settleFor is how long the next transaction's first record waits
	// after committed (Config.Transactions.Settle); settleAsk: until the
	// coordinator says that commit is complete (SettleAsk).
	settleFor time.Duration
	settleAsk bool
}

// openExactlyOnceWAL starts a WAL session's exactly-once delivery
// (eos.OpenWAL), bound by cfg's transaction settings.
func openExactlyOnceWAL(ctx context.Context, t *eos.Session, cfg Config, o eos.WALOpening) (*exactlyOnceWAL, error) {
	l, err := eos.OpenWAL(ctx, t, o)
	if err != nil {
		return nil, err
	}
	return &exactlyOnceWAL{Session: t, ledger: l, maxRecords: cfg.Transactions.MaxRecords, maxAge: cfg.Transactions.MaxAge,
		shutdown: cfg.ShutdownTimeout, interval: cfg.Transactions.Interval, settleFor: cfg.Transactions.Settle, settleAsk: cfg.Transactions.SettleAsk}, nil
}

func (d *exactlyOnceWAL) begin(to confirmer, recordCtx context.Context) ledger {
	d.to, d.recordCtx = to, recordCtx
	d.ledger.ConfirmTo(to.Confirm)
	return d.ledger
}

// position: the slot is confirmed at each commit, so nothing waits.
func (d *exactlyOnceWAL) position() (pglogrepl.LSN, int, error) { return d.to.Confirmed(), 0, nil }

// publish publishes the stream's changes as they come, and commits the
// open Kafka transaction at a Postgres commit once it is due, when the
// interval after the last commit has passed with nothing more to read,
// and when the stream stopped at a transaction boundary.
func (d *exactlyOnceWAL) publish(ctx context.Context, pub *publisher, batches <-chan *replication.Batch) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var wake <-chan time.Time
		if wait, ok := d.waiting(); ok {
			timer.Reset(wait) // timers since Go 1.23 deliver nothing stale after Reset
			wake = timer.C
		}
		select {
		case b, ok := <-batches:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				// The stream stopped at a transaction boundary: commit
				// what is open.
				return d.commitOpen(ctx)
			}
			err := d.walk(ctx, pub, b.Changes, batches)
			b.Release()
			if err != nil {
				return err
			}
		case <-wake:
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := d.commitOpen(ctx); err != nil {
				return err
			}
		}
	}
}

// waiting tells whether the open Kafka transaction ends with a whole
// Postgres transaction and waits only for the interval after the last
// commit, and how much longer.
func (d *exactlyOnceWAL) waiting() (time.Duration, bool) {
	if !d.ledger.Whole() {
		return 0, false
	}
	return max(0, d.interval-time.Since(d.committed)), true
}

func (d *exactlyOnceWAL) walk(ctx context.Context, pub *publisher, changes []outbox.Change, batches <-chan *replication.Batch) error {
	l := d.ledger
	for i := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.Failed(); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		if changes[i].Kind == outbox.KindRow && l.Records() == 0 {
			if err := d.waitSettle(ctx); err != nil {
				return err
			}
		}
		if err := pub.publish(ctx, changes[i:i+1]); err != nil {
			return err
		}
		if changes[i].Kind == outbox.KindRow {
			continue
		}
		// Nothing more waits to be read: commit, unless the last commit
		// was less than the interval ago (publish commits when it has
		// passed).
		idle := i == len(changes)-1 && len(batches) == 0 && time.Since(d.committed) >= d.interval
		if l.Due(idle, d.maxRecords, d.maxAge) {
			if err := d.commitOpen(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// settleLimit bounds how long a transaction's first record waits for the
// coordinator to complete the last commit: the broker holds a record sent
// sooner for its retry backoff (20 ms by default) and then takes it, so
// waiting longer saves nothing.
const settleLimit = 25 * time.Millisecond

// waitSettle holds a Kafka transaction's first record after a commit:
// under SettleAsk until the coordinator says the commit is complete (a
// round trip or two), otherwise, or where it cannot tell, until
// Config.Transactions.Settle has passed since it.
func (d *exactlyOnceWAL) waitSettle(ctx context.Context) error {
	if d.committed.IsZero() {
		return nil
	}
	for d.settleAsk {
		left := settleLimit - time.Since(d.committed)
		if left <= 0 {
			return nil
		}
		actx, cancel := context.WithTimeout(ctx, left)
		settled, ok := d.Settled(actx)
		cancel()
		if settled {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !ok {
			break
		}
	}
	wait := d.settleFor - time.Since(d.committed)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitOpen closes the open Kafka transaction with the position of its
// last Postgres transaction, commits it, and confirms the slot.
func (d *exactlyOnceWAL) commitOpen(ctx context.Context) error {
	l := d.ledger
	if !l.Whole() {
		return nil
	}
	pos, records := l.Position(), l.Records()
	// A failure elsewhere in the session (the stream or the state save
	// losing Postgres) cancels ctx. A commit cut short by it has an
	// unknown outcome, which leaves a relay that was fenced while it was
	// cut off unable to tell (its EndTxn may have gone out): it would wait
	// for the pipeline lock instead of stopping. So the commit runs to its
	// answer, bounded by ShutdownTimeout once ctx ends, as the records are.
	cctx, cancel := context.WithCancel(d.recordCtx)
	defer cancel()
	var timer atomic.Pointer[time.Timer]
	stop := context.AfterFunc(ctx, func() { timer.Store(time.AfterFunc(d.shutdown, cancel)) })
	defer func() {
		stop()
		if tm := timer.Load(); tm != nil {
			tm.Stop()
		}
	}()
	if err := d.Commit(cctx, d.recordCtx, pos, records); err != nil {
		return err
	}
	d.committed = time.Now()
	l.Committed(pos)
	return nil
}
