package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
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

// transactionalID is the pipeline's transactional id: a relay started
// later for the same pipeline fences the one before.
func (r *Relay) transactionalID() string { return transactionalID(r.cfg.Replication.Slot) }

func transactionalID(slot string) string { return "pgoutbox." + slot }

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

// openPollTransactions starts a poll session's exactly-once delivery:
// after the fence, what the last committed Kafka transaction carried is
// marked published before anything is polled. From polling: its rows (a
// crash between that commit and the mark left them unmarked). From the
// WAL: the rows of every transaction it says Kafka has, which polling
// would otherwise read again from floor.
func (r *Relay) openPollTransactions(ctx context.Context, k *sink.Kafka, poller *poll.Poller, floor outbox.Floor) (*txnSession, error) {
	pos, err := r.openTransactions(ctx, k)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
	defer cancel()
	res := resumePoll(pos, r.clusterID)
	switch {
	case len(res.seqs) > 0:
		if err := poller.MarkPublished(mctx, res.seqs); err != nil {
			return nil, err
		}
	case res.foreign:
		r.log.Warn("exactly-once delivery: the last kafka transaction was written from the WAL of another cluster; polling may send again rows that it carried",
			"position_cluster", pos.cluster, "cluster", r.clusterID)
	case res.markWAL:
		n, err := poller.MarkTransactions(mctx, floor, res.below, res.xids)
		if err != nil {
			return nil, err
		}
		if pos.incomplete {
			r.log.Warn("exactly-once delivery: the WAL published more transactions than its position record lists (a long transaction held the floor back); polling may send again rows of those not listed",
				"listed", len(pos.xids))
		}
		r.log.Info("exactly-once delivery: rows the WAL published are marked published before polling", "rows", n,
			"below_xid", pos.floorXID, "listed_transactions", len(pos.xids))
	}
	r.log.Info("exactly-once delivery: the last kafka transaction is marked published", "position", pos.String(),
		"position_topic", r.cfg.PositionTopic, "transactional_id", r.transactionalID())
	return &txnSession{k: k, failed: func() error { return nil }, wal: res.wal}, nil
}

// openWALTransactions starts a WAL session's exactly-once delivery: what
// Kafka has is skipped. After a WAL record, everything at or below its
// commit. After a poll record, what is at or below the WAL position it
// carries, and every row polling published: the rows of the last poll
// transaction are marked first, then the marked rows the stream can
// replay (at or above the published floor) are read, until the stream
// passes the WAL's end as it is now (every polled row committed before
// it). WAL records carry that end until the stream passes it, so that a
// session after a crash meanwhile reads the polled rows again.
func (r *Relay) openWALTransactions(ctx context.Context, k *sink.Kafka, conn *pgx.Conn, hasSeq bool) (*txnSession, error) {
	r.walFloor.Store(0)
	pos, err := r.openTransactions(ctx, k)
	if err != nil {
		return nil, err
	}
	res := resumeWAL(pos, r.clusterID, hasSeq)
	if res.foreign {
		r.log.Warn("exactly-once delivery: the last kafka transaction was written on another cluster; its position means nothing here and the stream may send again what it carried",
			"position_cluster", pos.cluster, "cluster", r.clusterID)
	}
	l := newTxnLedger(res.after, r.clusterID, r.cfg.Poll.Order, &r.Stats, k.Classify, &r.walFloor)
	if res.readPolled {
		var until pglogrepl.LSN
		if l.polled, until, err = r.polledSince(ctx, conn, res.mark); err != nil {
			return nil, err
		}
		l.polledUntil = cmp.Or(res.polledUntil, until)
	}
	r.log.Info("exactly-once delivery: kafka has everything up to", "position", res.from.String(),
		"rows_published_by_polling", len(l.polled),
		"position_topic", r.cfg.PositionTopic, "transactional_id", r.transactionalID())
	return &txnSession{k: k, ledger: l, failed: l.failed}, nil
}

// polledSince marks the last poll transaction's rows published, then reads
// the rows polling marked that the stream may replay.
func (r *Relay) polledSince(ctx context.Context, conn *pgx.Conn, last []int64) (polledSeqs, pglogrepl.LSN, error) {
	ctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
	defer cancel()
	poller, err := poll.New(ctx, conn, r.cfg.Poll)
	if err != nil {
		return nil, 0, err
	}
	r.fence(poller)
	if err := poller.MarkPublished(ctx, last); err != nil {
		return nil, 0, err
	}
	floor, err := r.readFloor(ctx, conn)
	if err != nil {
		return nil, 0, err
	}
	_, _, lsn, err := poll.Snapshot(ctx, conn)
	if err != nil {
		return nil, 0, err
	}
	until, err := pglogrepl.ParseLSN(lsn)
	if err != nil {
		return nil, 0, err
	}
	seqs, err := poller.Published(ctx, floor, maxPolledSeqs)
	if err != nil {
		return nil, 0, err
	}
	if len(seqs) == maxPolledSeqs {
		r.log.Warn("exactly-once delivery: polling published more rows than the WAL session keeps to skip; the stream may send again the oldest of them",
			"kept", maxPolledSeqs)
	}
	var set polledSeqs
	for _, seq := range seqs {
		set.add(seq)
	}
	return set, until, nil
}

// newTxnLedger is the ledger of a WAL session that resumes after what
// Kafka has (resumeWAL), on the cluster cluster.
func newTxnLedger(after position, cluster int64, order string, stats *Stats, classify func(error) error, floor *atomic.Uint64) *txnLedger {
	l := &txnLedger{after: after, stats: stats, classify: classify, floor: floor,
		cluster: cluster, order: order, xids: make(map[uint32]struct{}, len(after.xids))}
	for _, x := range after.xids {
		l.xids[x] = struct{}{}
	}
	l.incomplete, l.unlistedMax, l.floorXID = after.incomplete, uint32(after.floorXID), after.floorXID
	return l
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
	// floor is the transaction id below which every transaction is in
	// Kafka, as saveState finds it (Relay.walFloor).
	floor   *atomic.Uint64
	cluster int64
	// polled are rows polling published, which the stream may replay
	// until it passes polledUntil.
	polled      polledSeqs
	polledUntil pglogrepl.LSN
	order       string // the column polling marks rows by

	// The transactions at or above floorXID that Kafka has (or will have
	// with the open transaction) from the WAL; unlistedMax is the newest
	// one not listed once more than maxListedXIDs were.
	floorXID    uint64
	xids        map[uint32]struct{}
	incomplete  bool
	unlistedMax uint32

	// The publisher's goroutine only.
	records int       // produced into the open Kafka transaction
	began   time.Time // when its first record was produced
	inTx    bool      // between a Postgres transaction's first row and its commit
	last    position  // the last Postgres transaction in the Kafka transaction
	later   pglogrepl.LSN

	mu  sync.Mutex
	err error // the first record that failed
}

func (l *txnLedger) skip(c *outbox.Change) bool {
	if c.FinalLSN <= l.after.commit {
		l.stats.SkippedCommitted.Add(1)
		return true
	}
	if len(l.polled) > 0 {
		if seq, ok := seqOf(c.Relation, c.Values, l.order); ok && l.polled.take(seq) {
			l.stats.SkippedPolled.Add(1)
			return true
		}
	}
	return false
}

func (l *txnLedger) produce(_ int, c *outbox.Change) entry {
	if l.records == 0 {
		l.began = time.Now()
	}
	l.records++
	l.inTx = true
	if _, ok := l.xids[c.XID]; !ok {
		if len(l.xids) < maxListedXIDs {
			l.xids[c.XID] = struct{}{}
		} else if !l.incomplete || xidBefore(l.unlistedMax, c.XID) {
			l.incomplete, l.unlistedMax = true, c.XID
		}
	}
	return entry{}
}

// position is the position record of the open Kafka transaction: the last
// Postgres transaction in it, the floor saveState last found, and the
// transactions at or above it that Kafka has from the WAL.
func (l *txnLedger) position() position {
	if f := l.floor.Load(); f > l.floorXID {
		l.floorXID = f
		for x := range l.xids {
			if xidBefore(x, uint32(f)) {
				delete(l.xids, x)
			}
		}
		if l.incomplete && xidBefore(l.unlistedMax, uint32(f)) {
			l.incomplete = false
		}
	}
	p := l.last
	p.cluster, p.floorXID, p.incomplete = l.cluster, l.floorXID, l.incomplete
	if l.polledUntil > p.end {
		p.polledUntil = l.polledUntil
	}
	p.xids = make([]uint32, 0, len(l.xids))
	for x := range l.xids {
		p.xids = append(p.xids, x)
	}
	slices.Sort(p.xids)
	return p
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

func (l *txnLedger) boundary(c *outbox.Change) {
	if c.Kind == outbox.KindCommit && l.polledUntil != 0 && c.LSN > l.polledUntil {
		l.polled, l.polledUntil = nil, 0 // the stream is past what polling published
	}
	if c.Kind == outbox.KindCommit && l.inTx {
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

func (l *txnLedger) where(_ int, c *outbox.Change, err error) error {
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
	// Poll sessions only: the WAL position each poll record carries.
	wal position
}

// commit ends the open Kafka transaction with pos as its position record,
// commits it once every record is acked and none failed, and begins the
// next.
func (t *txnSession) commit(ctx context.Context, r *Relay, recordCtx context.Context, pos position) error {
	rec, err := pos.record(r.cfg.Replication.Slot, r.cfg.PositionTopic, time.Now())
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

func (p *publisher) walkTxn(ctx context.Context, changes []outbox.Change, t *txnSession, batches <-chan *replication.Batch) error {
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
		if changes[i].Kind == outbox.KindRow {
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
	pos := l.position()
	// A failure elsewhere in the session (the stream or the state save
	// losing Postgres) cancels ctx. A commit cut short by it has an
	// unknown outcome, which leaves a relay that was fenced while it was
	// cut off unable to tell (its EndTxn may have gone out): it would wait
	// for the pipeline lock instead of stopping. So the commit runs to its
	// answer, bounded by ShutdownTimeout once ctx ends, as the records are.
	cctx, cancel := context.WithCancel(p.recordCtx)
	defer cancel()
	var timer atomic.Pointer[time.Timer]
	stop := context.AfterFunc(ctx, func() { timer.Store(time.AfterFunc(p.r.cfg.ShutdownTimeout, cancel)) })
	defer func() {
		stop()
		if tm := timer.Load(); tm != nil {
			tm.Stop()
		}
	}()
	if err := t.commit(cctx, p.r, p.recordCtx, pos); err != nil {
		return err
	}
	p.r.Metrics.txnEvents(l.records)
	l.confirm(max(l.last.end, l.later))
	l.after, l.records, l.later = pos, 0, 0
	return nil
}

// closeTxn ends a session's exactly-once delivery after its records were
// flushed. A clean stop committed everything in streamTxn. After a
// failure, the open transaction is aborted where that is safe, which also
// tells a relay that was fenced while it was cut off from Postgres: it
// must stop, not wait for the pipeline again. Elsewhere (a record or the
// commit failed) what is open is left to the next session's fence (or the
// broker's transaction timeout), and the coordinator is asked, without the
// producer, whether another relay took the pipeline over.
func (r *Relay) closeTxn(ctx context.Context, t *txnSession) error {
	cause := t.k.Classify(t.failed())
	if cause == nil {
		cause = t.broken
	}
	open := t.k.TxnOpen()
	err := r.endTxn(ctx, t, cause)
	if open {
		// The transaction's records never become visible: aborted here,
		// by the next session's fence, or by the broker's timeout.
		if sink.Fenced(err) {
			cause = err
		}
		r.Metrics.txnAborted(cause)
	}
	return err
}

// endTxn is closeTxn's work, after a session that ended on cause.
func (r *Relay) endTxn(ctx context.Context, t *txnSession, cause error) error {
	if err := cause; err != nil {
		if sink.Fenced(err) {
			return err
		}
		// The producer is not used again, but another relay may have
		// taken over while this one was cut off: ask without it.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if perr := t.k.ProbeFailed(pctx); sink.Fenced(perr) {
			return perr
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
