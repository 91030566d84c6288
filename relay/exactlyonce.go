package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/store"
)

// Exactly-once delivery: a consumer with isolation.level=read_committed
// sees every event once. A session fences the producers before it, reads
// the position Kafka last committed (position.go) and resumes after it;
// its events go out in Kafka transactions, each with a position record on
// the pipeline's position topic that names what it carried, and the slot
// is confirmed, or the polled rows marked, only once the transaction is
// committed.

// txnObserver is what exactly-once delivery reports (Metrics).
type txnObserver interface {
	txnCommitted(took time.Duration)
	txnEvents(n int)
	txnAborted(cause error)
}

// txnSession is what a session's exactly-once delivery holds: the
// transactional producer, the open transaction's state, and where its
// position records go.
type txnSession struct {
	k        Broker
	pipeline string // keys the position records
	topic    string // the position topic
	obs      txnObserver
	log      *slog.Logger
	timeout  time.Duration // bounds opening
	// failed is the first record of the open transaction that failed.
	failed func() error
	// broken is a commit's failure: the producer is not used again, not
	// even to abort (sink/txn.go).
	broken error
}

func newTxnSession(k Broker, cfg Config, obs txnObserver, log *slog.Logger) *txnSession {
	return &txnSession{k: k, pipeline: cfg.Replication.Slot, topic: cfg.PositionTopic, obs: obs, log: log,
		timeout: cfg.queryTimeout(), failed: func() error { return nil }}
}

// open starts a session's exactly-once delivery: a new producer, which
// fences any earlier one of the pipeline (a relay that lost its connection
// to Postgres but still produces), then the position Kafka last
// committed, then the first transaction.
func (t *txnSession) open(ctx context.Context) (position, error) {
	k := t.k
	if err := k.Renew(); err != nil {
		return position{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	if err := k.Txn.Fence(ctx); err != nil {
		return position{}, err
	}
	if err := k.Positions.EnsureCompactedTopic(ctx, t.topic); err != nil {
		return position{}, err
	}
	rec, err := k.Positions.LastCommitted(ctx, t.topic, []byte(t.pipeline))
	if err != nil {
		return position{}, err
	}
	var pos position
	if rec != nil {
		if pos, err = parsePosition(rec); err != nil {
			return position{}, err
		}
	}
	return pos, k.Txn.Begin()
}

// commit ends the open Kafka transaction with pos as its position record,
// commits it once every record is acked and none failed, and begins the
// next.
func (t *txnSession) commit(ctx context.Context, recordCtx context.Context, pos position) error {
	rec, err := pos.record(t.pipeline, t.topic, time.Now())
	if err != nil {
		return err
	}
	var posErr error
	done := make(chan struct{})
	if err := t.k.Produce(recordCtx, rec, func(_ *kgo.Record, err error) { posErr = t.k.Txn.Classify(err); close(done) }); err != nil {
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
	t.obs.txnCommitted(time.Since(start))
	if err := t.k.Txn.Begin(); err != nil {
		t.broken = err
		return err
	}
	return nil
}

// end ends a session's exactly-once delivery after its records were
// flushed. A clean stop committed everything. After a failure, the open
// transaction is aborted where that is safe, which also tells a relay
// that was fenced while it was cut off from Postgres: it must stop, not
// wait for the pipeline again. Elsewhere (a record or the commit failed)
// what is open is left to the next session's fence (or the broker's
// transaction timeout), and the coordinator is asked, without the
// producer, whether another relay took the pipeline over.
func (t *txnSession) end(ctx context.Context, _ error) error {
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
		t.obs.txnAborted(cause)
	}
	return err
}

// close is end's work, after a session that ended on cause.
func (t *txnSession) close(ctx context.Context, cause error) error {
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

// Transactions left open. A session whose Kafka transaction holds records
// and was never asked to commit (a failure, a stop while Kafka is
// unreachable) records it in the pipeline's state, and every exactly-once
// session reads that back before it reads the position topic: if Kafka's
// coordinator lost track of that transaction, LastCommitted aborts it
// rather than wait behind it for good (sink/orphan.go), in whichever
// process, the other relay of a pair's included.

// unended is where the transactions left open are recorded: the
// pipeline's state row, reached on a new connection to databaseURL where
// the session's is gone.
type unended struct {
	own         store.Pipeline
	databaseURL string
	log         *slog.Logger
}

// remember records the transaction k's producer leaves open, if it was
// never asked to commit: in k, for this process's next session, and in
// the pipeline's state, for any process's. It runs as a session ends,
// whatever ended it. The session's connection may be gone by then (a
// SIGTERM cancels the query in flight, which closes it; the server went
// away), so a save that fails is tried again on a new connection.
func (u unended) remember(conn store.Querier, k Transactions) {
	id, epoch, ok := k.Unsent()
	if !ok {
		return
	}
	k.Unended(id, epoch)
	save := func(conn store.Querier) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return u.own.SaveUnended(ctx, conn, id, epoch)
	}
	err := save(conn)
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if fresh, cerr := replication.Connect(ctx, u.databaseURL); cerr == nil {
			err = save(fresh)
			fresh.Close(context.Background())
		}
		cancel()
	}
	if err != nil {
		u.log.Warn("recording the kafka transaction left open failed: if Kafka's coordinator loses track of it, the next relay waits behind it",
			"producer_id", id, "epoch", epoch, "err", err)
	}
}

// learn tells k the transaction the pipeline's state records as left
// open.
func (u unended) learn(ctx context.Context, conn store.Querier, k Transactions) error {
	id, epoch, ok, err := u.own.Unended(ctx, conn)
	if err != nil || !ok {
		return err
	}
	k.Unended(id, epoch)
	return nil
}

// The poll session.

// exactlyOncePoll is a poll session's exactly-once delivery: each polled
// batch is one Kafka transaction, committed with the rows it carried as
// its position, or not at all.
type exactlyOncePoll struct {
	*txnSession
	// wal is the WAL position each poll record carries.
	wal position
}

// marker marks rows published (poll.Poller).
type marker interface {
	MarkPublished(ctx context.Context, seqs []int64) error
	MarkTransactions(ctx context.Context, floor outbox.Floor, below uint64, xids []uint32) (int64, error)
}

// openExactlyOncePoll starts a poll session's exactly-once delivery on the
// cluster cluster: after the fence, what the last committed Kafka
// transaction carried is marked published (resumePoll) before anything is
// polled from floor.
func openExactlyOncePoll(ctx context.Context, t *txnSession, cluster int64, rows marker, floor outbox.Floor) (*exactlyOncePoll, error) {
	pos, err := t.open(ctx)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res := resumePoll(pos, cluster)
	switch {
	case len(res.seqs) > 0:
		if err := rows.MarkPublished(mctx, res.seqs); err != nil {
			return nil, err
		}
	case res.foreign:
		t.log.Warn("exactly-once delivery: the last kafka transaction was written from the WAL of another cluster; polling may send again rows that it carried",
			"position_cluster", pos.cluster, "cluster", cluster)
	case res.markWAL:
		n, err := rows.MarkTransactions(mctx, floor, res.below, res.xids)
		if err != nil {
			return nil, err
		}
		if pos.incomplete {
			t.log.Warn("exactly-once delivery: the WAL published more transactions than its position record lists (a long transaction held the floor back); polling may send again rows of those not listed",
				"listed", len(pos.xids))
		}
		t.log.Info("exactly-once delivery: rows the WAL published are marked published before polling", "rows", n,
			"below_xid", pos.floorXID, "listed_transactions", len(pos.xids))
	}
	t.log.Info("exactly-once delivery: the last kafka transaction is marked published", "position", pos.String(),
		"position_topic", t.topic, "transactional_id", transactionalID(t.pipeline))
	return &exactlyOncePoll{txnSession: t, wal: res.wal}, nil
}

// settle commits the batch's Kafka transaction, with the rows it carried
// (exactly the acked ones) as its position; a batch with a failed record
// is not committed.
func (d *exactlyOncePoll) settle(ctx context.Context, led *flow.PollLedger) error {
	d.failed = led.Failed
	if err := led.Failed(); err != nil {
		return d.k.Txn.Classify(err)
	}
	pos := d.wal // the WAL's position it carries
	pos.mode, pos.seqs = ModePoll, led.AckedSeqs()
	if err := d.commit(ctx, ctx, pos); err != nil {
		return err
	}
	d.obs.txnEvents(len(pos.seqs))
	return nil
}

// The WAL session.

// exactlyOnceWAL is a WAL session's exactly-once delivery: the rows of
// whole Postgres transactions go into one Kafka transaction, committed
// when it reached its bounds or nothing more waits, and the slot is
// confirmed only then (txnLedger).
type exactlyOnceWAL struct {
	*txnSession
	ledger   *txnLedger
	streamed *streamMarks
	to       confirmer
	// recordCtx is what records are produced with (publisher.recordCtx).
	recordCtx context.Context
	// maxRecords and maxAge bound a Kafka transaction; shutdown bounds a
	// commit once the session ends.
	maxRecords       int
	maxAge, shutdown time.Duration
	// interval is the least time between the end of one Kafka commit
	// (committed) and the next (Config.TransactionInterval).
	interval  time.Duration
	committed time.Time
	// settleFor is how long the next transaction's first record waits
	// after committed (Config.TransactionSettle).
	settleFor time.Duration
}

// walOpening is what a WAL session opens its exactly-once delivery with.
type walOpening struct {
	// cluster is the session's cluster; floor is where its state saver
	// tells the floor it saved.
	cluster int64
	floor   *atomic.Uint64
	// hasSeq: the tables have the polling columns; order is the column
	// polling marks rows by.
	hasSeq bool
	order  string
	stats  *Stats
	// streamed gets the Postgres transactions of each committed Kafka
	// transaction.
	streamed *streamMarks
	// readPolled marks last published and reads the rows polling marked
	// that the stream may replay (polledSince).
	readPolled func(ctx context.Context, last []int64) (flow.Seqs, pglogrepl.LSN, error)
}

// openExactlyOnceWAL starts a WAL session's exactly-once delivery: what
// Kafka has is skipped (resumeWAL). After a WAL record, everything at or
// below its commit. After a poll record, what is at or below the WAL
// position it carries, and every row polling published: the rows of the
// last poll transaction are marked first, then the marked rows the stream
// can replay (at or above the published floor) are read, until the stream
// passes the WAL's end as it is now (every polled row committed before
// it). WAL records carry that end until the stream passes it, so that a
// session after a crash meanwhile reads the polled rows again.
func openExactlyOnceWAL(ctx context.Context, t *txnSession, cfg Config, o walOpening) (*exactlyOnceWAL, error) {
	pos, err := t.open(ctx)
	if err != nil {
		return nil, err
	}
	res := resumeWAL(pos, o.cluster, o.hasSeq)
	if res.foreign {
		t.log.Warn("exactly-once delivery: the last kafka transaction was written on another cluster; its position means nothing here and the stream may send again what it carried",
			"position_cluster", pos.cluster, "cluster", o.cluster)
	}
	l := newTxnLedger(res.after, o.cluster, o.order, o.stats, t.k.Txn.Classify, o.floor)
	l.collect = o.streamed != nil
	if res.readPolled {
		var until pglogrepl.LSN
		if l.polled, until, err = o.readPolled(ctx, res.mark); err != nil {
			return nil, err
		}
		l.polledUntil = cmp.Or(res.polledUntil, until)
	}
	t.log.Info("exactly-once delivery: kafka has everything up to", "position", res.from.String(),
		"rows_published_by_polling", len(l.polled),
		"position_topic", t.topic, "transactional_id", transactionalID(t.pipeline))
	t.failed = l.failed
	return &exactlyOnceWAL{txnSession: t, ledger: l, streamed: o.streamed, maxRecords: cfg.TransactionMaxRecords, maxAge: cfg.TransactionMaxAge,
		shutdown: cfg.ShutdownTimeout, interval: cfg.TransactionInterval, settleFor: cfg.TransactionSettle}, nil
}

func (d *exactlyOnceWAL) begin(to confirmer, recordCtx context.Context) ledger {
	d.to, d.recordCtx, d.ledger.confirm = to, recordCtx, to.Confirm
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
	l := d.ledger
	if l.records == 0 || l.inTx {
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
		if err := l.failed(); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		if changes[i].Kind == outbox.KindRow && l.records == 0 {
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
		if l.due(idle, d.maxRecords, d.maxAge) {
			if err := d.commitOpen(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitSettle waits until Config.TransactionSettle has passed since the last
// commit.
func (d *exactlyOnceWAL) waitSettle(ctx context.Context) error {
	if d.committed.IsZero() {
		return nil
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
	if err := d.commit(cctx, d.recordCtx, pos); err != nil {
		return err
	}
	d.committed = time.Now()
	d.obs.txnEvents(l.records)
	l.confirm(max(l.last.end, l.later))
	d.streamed.add(l.fresh...)
	l.after, l.records, l.later, l.fresh = pos, 0, 0, l.fresh[:0]
	return nil
}

// newTxnLedger is the ledger of a WAL session that resumes after what
// Kafka has (resumeWAL), on the cluster cluster.
func newTxnLedger(after position, cluster int64, order string, stats *Stats, classify func(error) error, floor *atomic.Uint64) *txnLedger {
	l := &txnLedger{after: after, stats: stats, classify: classify, floor: floor,
		cluster: cluster, order: order}
	for _, x := range after.xids {
		l.xids.add(x)
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
	classify func(error) error // sink.Txn.Classify
	// floor is the transaction id below which every transaction is in
	// Kafka, as the state saver finds it (walSession.floor).
	floor   *atomic.Uint64
	cluster int64
	// polled are rows polling published, which the stream may replay
	// until it passes polledUntil.
	polled      flow.Seqs
	polledUntil pglogrepl.LSN
	order       string // the column polling marks rows by

	// The transactions at or above floorXID that Kafka has (or will have
	// with the open transaction) from the WAL; unlistedMax is the newest
	// one not listed once more than maxListedXIDs were.
	floorXID    uint64
	xids        xidSet
	incomplete  bool
	unlistedMax uint32

	// The publisher's goroutine only.
	records int       // produced into the open Kafka transaction
	fresh   []uint32  // the Postgres transactions in it, when collect
	collect bool      // someone marks rows by them (walOpening.streamed)
	began   time.Time // when its first record was produced
	inTx    bool      // between a Postgres transaction's first row and its commit
	last    position  // the last Postgres transaction in the Kafka transaction
	later   pglogrepl.LSN

	mu  sync.Mutex
	err error // the first record that failed
}

func (l *txnLedger) Skip(c *outbox.Change) bool {
	if c.FinalLSN <= l.after.commit {
		l.stats.SkippedCommitted.Add(1)
		return true
	}
	if len(l.polled) > 0 {
		if seq, ok := flow.SeqOf(c.Relation, c.Values, l.order); ok && l.polled.Take(seq) {
			l.stats.SkippedPolled.Add(1)
			return true
		}
	}
	return false
}

func (l *txnLedger) Produce(_ int, c *outbox.Change) flow.Entry {
	if l.records == 0 {
		l.began = time.Now()
	}
	l.records++
	l.inTx = true
	if n := len(l.fresh); l.collect && (n == 0 || l.fresh[n-1] != c.XID) {
		l.fresh = append(l.fresh, c.XID)
	}
	if !l.xids.has(c.XID) {
		if len(l.xids) < maxListedXIDs {
			l.xids.add(c.XID)
		} else if !l.incomplete || flow.XIDBefore(l.unlistedMax, c.XID) {
			l.incomplete, l.unlistedMax = true, c.XID
		}
	}
	return flow.Entry{}
}

// position is the position record of the open Kafka transaction: the last
// Postgres transaction in it, the floor the state saver last found, and the
// transactions at or above it that Kafka has from the WAL.
func (l *txnLedger) position() position {
	if f := l.floor.Load(); f > l.floorXID {
		l.floorXID = f
		l.xids = slices.DeleteFunc(l.xids, func(x uint32) bool { return flow.XIDBefore(x, uint32(f)) })
		if l.incomplete && flow.XIDBefore(l.unlistedMax, uint32(f)) {
			l.incomplete = false
		}
	}
	p := l.last
	p.cluster, p.floorXID, p.incomplete = l.cluster, l.floorXID, l.incomplete
	if l.polledUntil > p.end {
		p.polledUntil = l.polledUntil
	}
	// A copy: the set changes with the next transaction, the position
	// stays what the record said.
	p.xids = slices.Clone(l.xids)
	return p
}

// xidSet is the transaction ids a position record lists, kept in the
// record's (numeric) order: a commit copies it instead of collecting and
// sorting a map of up to maxListedXIDs ids, which at a thousand
// transactions a second and a floor a second behind cost about a tenth of
// exactly-once delivery's CPU. Ids mostly come in ascending order, each
// several times in a row (once per row of its transaction): both are
// checked first.
type xidSet []uint32

func (s xidSet) has(x uint32) bool {
	if n := len(s); n > 0 && s[n-1] == x {
		return true
	}
	_, ok := slices.BinarySearch(s, x)
	return ok
}

func (s *xidSet) add(x uint32) {
	if n := len(*s); n == 0 || (*s)[n-1] < x {
		*s = append(*s, x)
		return
	}
	if i, ok := slices.BinarySearch(*s, x); !ok {
		*s = slices.Insert(*s, i, x)
	}
}

func (l *txnLedger) Ack(_ flow.Entry, err error) {
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

func (l *txnLedger) Boundary(c *outbox.Change) {
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

func (l *txnLedger) Where(_ int, c *outbox.Change, err error) error {
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
