package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/sink"
)

// Delivery is what the relay promises a consumer of its topics.
type Delivery string

const (
	// AtLeastOnce: every event arrives, in order per aggregate; a crash
	// can send what was in flight again.
	AtLeastOnce Delivery = "at-least-once"
	// ExactlyOnce: a consumer with isolation.level=read_committed sees
	// every event once. Events go out in Kafka transactions that carry
	// whole Postgres transactions and a position record on the
	// pipeline's position topic; a restart reads that position and skips
	// what Kafka already has.
	ExactlyOnce Delivery = "exactly-once"
)

// ParseDelivery parses at-least-once or exactly-once.
func ParseDelivery(s string) (Delivery, error) {
	switch d := Delivery(s); d {
	case AtLeastOnce, ExactlyOnce:
		return d, nil
	}
	return "", fmt.Errorf("delivery %q: use at-least-once or exactly-once", s)
}

// ErrExactlyOnceMode is Validate's answer to exactly-once delivery in a
// mode that does not have it yet.
var ErrExactlyOnceMode = errors.New("exactly-once delivery needs --mode wal or --mode poll for now: auto mode's switches between them do not keep it yet")

// transactionalID is the pipeline's transactional id: a relay started
// later for the same pipeline fences the one before.
func (r *Relay) transactionalID() string { return transactionalID(r.cfg.Replication.Slot) }

func transactionalID(slot string) string { return "pgoutbox." + slot }

// position is what the position topic keeps for a pipeline, written in the
// same Kafka transaction as the events it covers. From the WAL: the last
// Postgres transaction whose events that Kafka transaction carried. From
// polling: the rows it carried.
type position struct {
	mode Mode
	// end is the commit end LSN (what the slot is confirmed to), commit
	// the LSN of the commit record (what its rows carry as FinalLSN).
	end, commit pglogrepl.LSN
	// seqs are the order values (seq) of the rows a poll published.
	seqs []int64
}

// positionValue is the record's value.
type positionValue struct {
	Pipeline  string    `json:"pipeline"`
	Mode      Mode      `json:"mode"`
	LSN       string    `json:"lsn,omitempty"`        // WAL: commit end LSN
	CommitLSN string    `json:"commit_lsn,omitempty"` // WAL: commit record LSN
	Seqs      []int64   `json:"seqs,omitempty"`       // poll: the rows published
	Time      time.Time `json:"time"`
}

func (r *Relay) positionRecord(p position) (*kgo.Record, error) {
	v := positionValue{Pipeline: r.cfg.Replication.Slot, Mode: p.mode, Seqs: p.seqs, Time: time.Now().UTC()}
	if p.mode == ModeWAL {
		v.LSN, v.CommitLSN = p.end.String(), p.commit.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: r.cfg.PositionTopic, Key: []byte(r.cfg.Replication.Slot), Value: b}, nil
}

func parsePosition(rec *kgo.Record) (position, error) {
	var v positionValue
	if err := json.Unmarshal(rec.Value, &v); err != nil {
		return position{}, fmt.Errorf("position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
	}
	switch v.Mode {
	case ModeWAL:
		end, err1 := pglogrepl.ParseLSN(v.LSN)
		commit, err2 := pglogrepl.ParseLSN(v.CommitLSN)
		if err := errors.Join(err1, err2); err != nil {
			return position{}, fmt.Errorf("position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
		}
		return position{mode: ModeWAL, end: end, commit: commit}, nil
	case ModePoll:
		return position{mode: ModePoll, seqs: v.Seqs}, nil
	}
	return position{}, fmt.Errorf("position record at offset %d of %s: unknown mode %q", rec.Offset, rec.Topic, v.Mode)
}

// openTransactions starts a WAL session's exactly-once delivery: a new
// producer, which fences any earlier one of the pipeline (a relay that
// lost its connection to Postgres but still produces), then the position
// Kafka last committed, then the first transaction.
func (r *Relay) openTransactions(ctx context.Context, k *sink.Kafka) (position, error) {
	if err := k.Renew(); err != nil {
		return position{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
	defer cancel()
	if err := k.Fence(ctx); err != nil {
		return position{}, err
	}
	if err := k.EnsureCompactedTopic(ctx, r.cfg.PositionTopic); err != nil {
		return position{}, err
	}
	rec, err := k.LastCommitted(ctx, r.cfg.PositionTopic, []byte(r.cfg.Replication.Slot))
	if err != nil {
		return position{}, err
	}
	var pos position
	if rec != nil {
		if pos, err = parsePosition(rec); err != nil {
			return position{}, err
		}
	}
	return pos, k.Begin()
}

// openPollTransactions starts a poll session's exactly-once delivery: after
// the fence, the rows the last committed Kafka transaction carried, if
// polling wrote it, are marked published before anything is polled (a
// crash between that commit and the mark left them unmarked).
func (r *Relay) openPollTransactions(ctx context.Context, k *sink.Kafka, poller *replication.Poller) (*txnSession, error) {
	pos, err := r.openTransactions(ctx, k)
	if err != nil {
		return nil, err
	}
	if pos.mode == ModeWAL {
		r.log.Warn("exactly-once delivery: the last kafka transaction of this pipeline was written by the WAL; polling may send again what the WAL published since its floor was saved (a switch from the WAL to polling is at-least-once for now)")
	}
	if pos.mode == ModePoll && len(pos.seqs) > 0 {
		mctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
		defer cancel()
		if err := poller.MarkPublished(mctx, pos.seqs); err != nil {
			return nil, err
		}
	}
	r.log.Info("exactly-once delivery: the last kafka transaction is marked published", "position", pos.String(),
		"position_topic", r.cfg.PositionTopic, "transactional_id", r.transactionalID())
	return &txnSession{k: k, failed: func() error { return nil }}, nil
}

// txnLedger is the WAL session's ledger under exactly-once delivery. Rows
// of transactions at or below what Kafka has (after) are skipped. The
// rows of whole Postgres transactions go into one Kafka transaction,
// which commitTxn closes with the position of the last of them; the slot
// is confirmed only then. Positions with nothing to publish (empty
// transactions, heartbeats) are confirmed at once when no Kafka
// transaction has records, after its commit otherwise.
type txnLedger struct {
	after    position // its mode is wal
	confirm  func(pglogrepl.LSN)
	stats    *Stats
	classify func(error) error // sink.Kafka.Classify

	// The publisher's goroutine only.
	records int       // produced into the open Kafka transaction
	began   time.Time // when its first record was produced
	inTx    bool      // between a Postgres transaction's first row and its commit
	last    position  // the last Postgres transaction in the Kafka transaction
	later   pglogrepl.LSN

	mu  sync.Mutex
	err error // the first record that failed
}

func (l *txnLedger) skip(c *replication.Change) bool {
	if c.FinalLSN <= l.after.commit {
		l.stats.SkippedCommitted.Add(1)
		return true
	}
	return false
}

func (l *txnLedger) produce(int, *replication.Change) entry {
	if l.records == 0 {
		l.began = time.Now()
	}
	l.records++
	l.inTx = true
	return entry{}
}

func (l *txnLedger) ack(_ entry, err error) {
	if err == nil {
		return
	}
	if l.classify != nil {
		err = l.classify(err)
	}
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
}

func (l *txnLedger) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *txnLedger) boundary(c *replication.Change) {
	if c.Kind == replication.KindCommit && l.inTx {
		l.inTx = false
		l.last = position{mode: ModeWAL, end: c.LSN, commit: c.FinalLSN}
		return
	}
	if l.records == 0 {
		l.confirm(c.LSN)
	} else {
		l.later = max(l.later, c.LSN)
	}
}

func (l *txnLedger) where(_ int, c *replication.Change, err error) error {
	return fmt.Errorf("row at %s: %w", c.LSN, err)
}

// due tells whether the open Kafka transaction should be committed now:
// it ends with a whole Postgres transaction and either nothing more is
// waiting to be read, or it reached its size or age bound.
func (l *txnLedger) due(idle bool, maxRecords int, maxAge time.Duration) bool {
	if l.inTx || l.records == 0 {
		return false
	}
	return idle || l.records >= maxRecords || time.Since(l.began) >= maxAge
}

// txnSession is a session's exactly-once state.
type txnSession struct {
	k *sink.Kafka
	// failed is the first record of the open transaction that failed.
	failed func() error
	// broken is a commit's failure: the producer is not used again, not
	// even to abort (sink/txn.go).
	broken error
	// WAL sessions only.
	ledger *txnLedger
}

// commit ends the open Kafka transaction with pos as its position record,
// commits it once every record is acked and none failed, and begins the
// next.
func (t *txnSession) commit(ctx context.Context, r *Relay, recordCtx context.Context, pos position) error {
	rec, err := r.positionRecord(pos)
	if err != nil {
		return err
	}
	var posErr error
	done := make(chan struct{})
	if err := t.k.Produce(recordCtx, rec, func(_ *kgo.Record, err error) { posErr = t.k.Classify(err); close(done) }); err != nil {
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
	if err := t.k.Commit(ctx, check); err != nil {
		if !sink.Fenced(err) && !errors.Is(err, sink.ErrTxnTimedOut) {
			err = fmt.Errorf("kafka: transaction up to %s: %w", pos, err)
		}
		t.broken = err
		return err
	}
	r.Metrics.txnCommitted(time.Since(start))
	if err := t.k.Begin(); err != nil {
		t.broken = err
		return err
	}
	return nil
}

func (p position) String() string {
	if p.mode == ModePoll {
		return fmt.Sprintf("%d polled rows", len(p.seqs))
	}
	return p.end.String()
}

// streamTxn is stream under exactly-once delivery.
func (p *publisher) streamTxn(ctx context.Context, batches <-chan *replication.Batch, t *txnSession) error {
	for b := range batches {
		err := p.walkTxn(ctx, b.Changes, t, batches)
		b.Release()
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The stream stopped at a transaction boundary: commit what is open.
	return p.commitTxn(ctx, t)
}

func (p *publisher) walkTxn(ctx context.Context, changes []replication.Change, t *txnSession, batches <-chan *replication.Batch) error {
	l := t.ledger
	for i := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.failed(); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		if err := p.publish(ctx, changes[i:i+1]); err != nil {
			return err
		}
		if changes[i].Kind == replication.KindRow {
			continue
		}
		idle := i == len(changes)-1 && len(batches) == 0
		if l.due(idle, p.r.cfg.TransactionMaxRecords, p.r.cfg.TransactionMaxAge) {
			if err := p.commitTxn(ctx, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// commitTxn closes the open Kafka transaction with the position of its
// last Postgres transaction, commits it, and confirms the slot.
func (p *publisher) commitTxn(ctx context.Context, t *txnSession) error {
	l := t.ledger
	if l.records == 0 || l.inTx {
		return nil
	}
	if err := t.commit(ctx, p.r, p.recordCtx, l.last); err != nil {
		return err
	}
	p.r.Metrics.txnEvents(l.records)
	l.confirm(max(l.last.end, l.later))
	l.after, l.records, l.later = l.last, 0, 0
	return nil
}

// closeTxn ends a session's exactly-once delivery after its records were
// flushed. A clean stop committed everything in streamTxn. After a
// failure, the open transaction is aborted where that is safe, which also
// tells a relay that was fenced while it was cut off from Postgres: it
// must stop, not wait for the pipeline again. Elsewhere what is open is
// left to the next session's fence (or the broker's transaction timeout).
func (r *Relay) closeTxn(ctx context.Context, t *txnSession) error {
	if err := t.k.Classify(t.failed()); err != nil {
		if sink.Fenced(err) {
			return err
		}
		return nil
	}
	if t.broken != nil {
		if sink.Fenced(t.broken) {
			return t.broken
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := t.k.Abort(ctx); err != nil {
		if sink.Fenced(err) {
			return err
		}
		r.log.Warn("aborting the open kafka transaction failed; the next session's producer aborts it", "err", err)
		return nil
	}
	// Nothing was open, or the abort went through: ask whether another
	// relay took the pipeline over meanwhile.
	if err := t.k.Probe(ctx); err != nil {
		if sink.Fenced(err) {
			return err
		}
		r.log.Debug("probing the transactional id failed", "err", err)
	}
	return nil
}
