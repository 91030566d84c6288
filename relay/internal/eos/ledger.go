package eos

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/store"
)

// Ledger is the WAL session's ledger under exactly-once delivery. Rows of
// transactions at or below what Kafka has (after) are skipped. The rows of
// whole Postgres transactions go into one Kafka transaction, which the
// session commits with the position of the last of them (Position,
// Committed); the slot is confirmed only then. Positions with nothing to
// publish (empty transactions, heartbeats) are confirmed at once when no
// Kafka transaction has records, after its commit otherwise.
type Ledger struct {
	after    Position // its mode is wal
	confirm  func(pglogrepl.LSN)
	skipped  flow.Skipped
	classify func(error) error // sink.Txn.Classify
	// floor is the transaction id below which every transaction is in
	// Kafka, as the WAL session's state saver finds it.
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
	fresh   []uint32  // the Postgres transactions in it, when streamed is set
	began   time.Time // when its first record was produced
	inTx    bool      // between a Postgres transaction's first row and its commit
	last    Position  // the last Postgres transaction in the Kafka transaction
	later   pglogrepl.LSN
	// streamed gets the Postgres transactions of each committed Kafka
	// transaction (nil: nobody marks rows by them).
	streamed func(xids ...uint32)

	mu  sync.Mutex
	err error // the first record that failed
}

// newLedger is the ledger of a WAL session that resumes after what Kafka
// has (resumeWAL), on the cluster cluster.
func newLedger(after Position, cluster int64, order string, skipped flow.Skipped, classify func(error) error, floor *atomic.Uint64) *Ledger {
	l := &Ledger{after: after, skipped: skipped, classify: classify, floor: floor,
		cluster: cluster, order: order}
	for _, x := range after.XIDs {
		l.xids.add(x)
	}
	l.incomplete, l.unlistedMax, l.floorXID = after.Incomplete, uint32(after.FloorXID), after.FloorXID
	return l
}

// WALOpening is what a WAL session opens its exactly-once delivery with.
type WALOpening struct {
	// Cluster is the session's cluster; Floor is where its state saver
	// tells the floor it saved.
	Cluster int64
	Floor   *atomic.Uint64
	// HasSeq: the tables have the polling columns; Order is the column
	// polling marks rows by.
	HasSeq  bool
	Order   string
	Skipped flow.Skipped
	// Streamed gets the Postgres transactions of each committed Kafka
	// transaction (nil: nobody marks rows by them).
	Streamed func(xids ...uint32)
	// ReadPolled marks last published and reads the rows polling marked
	// that the stream may replay.
	ReadPolled func(ctx context.Context, last []int64) (flow.Seqs, pglogrepl.LSN, error)
}

// OpenWAL starts a WAL session's exactly-once delivery and returns its
// ledger: what Kafka has is skipped (resumeWAL). After a WAL record,
// everything at or below its commit. After a poll record, what is at or
// below the WAL position it carries, and every row polling published: the
// rows of the last poll transaction are marked first, then the marked rows
// the stream can replay (at or above the published floor) are read, until
// the stream passes the WAL's end as it is now (every polled row committed
// before it). WAL records carry that end until the stream passes it, so
// that a session after a crash meanwhile reads the polled rows again.
func OpenWAL(ctx context.Context, t *Session, o WALOpening) (*Ledger, error) {
	pos, err := t.open(ctx)
	if err != nil {
		return nil, err
	}
	res := resumeWAL(pos, o.Cluster, o.HasSeq)
	if res.foreign {
		t.log.Warn("exactly-once delivery: the last kafka transaction was written on another cluster; its position means nothing here and the stream may send again what it carried",
			"position_cluster", pos.Cluster, "cluster", o.Cluster)
	}
	l := newLedger(res.after, o.Cluster, o.Order, o.Skipped, t.k.Txn.Classify, o.Floor)
	l.streamed = o.Streamed
	if res.readPolled {
		var until pglogrepl.LSN
		if l.polled, until, err = o.ReadPolled(ctx, res.mark); err != nil {
			return nil, err
		}
		l.polledUntil = cmp.Or(res.polledUntil, until)
	}
	t.log.Info("exactly-once delivery: kafka has everything up to", "position", res.from.String(),
		"rows_published_by_polling", len(l.polled),
		"position_topic", t.cfg.Topic, "transactional_id", t.cfg.TransactionalID)
	t.failed = l.Failed
	return l, nil
}

// ConfirmTo makes the ledger confirm positions through confirm (the
// stream's).
func (l *Ledger) ConfirmTo(confirm func(pglogrepl.LSN)) { l.confirm = confirm }

// Skip tells a row Kafka has: at or below what it has from the WAL, or
// one polling published.
func (l *Ledger) Skip(c *outbox.Change) bool {
	if c.FinalLSN <= l.after.Commit {
		l.skipped.Committed.Add(1)
		return true
	}
	if len(l.polled) > 0 && c.Inserted() { // polling read inserts only
		if seq, ok := flow.SeqOf(c.Relation, c.Values, l.order); ok && l.polled.Take(seq) {
			l.skipped.Polled.Add(1)
			return true
		}
	}
	return false
}

// Produce counts a row into the open Kafka transaction, and its Postgres
// transaction into the ones the position record lists.
func (l *Ledger) Produce(_ int, c *outbox.Change) flow.Entry {
	if l.records == 0 {
		l.began = time.Now()
	}
	l.records++
	l.inTx = true
	if n := len(l.fresh); l.streamed != nil && (n == 0 || l.fresh[n-1] != c.XID) {
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

// Position is the position record of the open Kafka transaction: the last
// Postgres transaction in it, the floor the state saver last found, and the
// transactions at or above it that Kafka has from the WAL.
func (l *Ledger) Position() Position {
	if f := l.floor.Load(); f > l.floorXID {
		l.floorXID = f
		l.xids = slices.DeleteFunc(l.xids, func(x uint32) bool { return flow.XIDBefore(x, uint32(f)) })
		if l.incomplete && flow.XIDBefore(l.unlistedMax, uint32(f)) {
			l.incomplete = false
		}
	}
	p := l.last
	p.Cluster, p.FloorXID, p.Incomplete = l.cluster, l.floorXID, l.incomplete
	if l.polledUntil > p.End {
		p.PolledUntil = l.polledUntil
	}
	// A copy: the set changes with the next transaction, the position
	// stays what the record said.
	p.XIDs = slices.Clone(l.xids)
	return p
}

// Committed takes the commit of the open Kafka transaction with position
// pos: the slot is confirmed past it, its Postgres transactions go to
// whoever marks their rows, and the next transaction starts empty.
func (l *Ledger) Committed(pos Position) {
	l.confirm(max(l.last.End, l.later))
	if l.streamed != nil && len(l.fresh) > 0 {
		l.streamed(l.fresh...)
	}
	l.after, l.records, l.later, l.fresh = pos, 0, 0, l.fresh[:0]
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

// Ack keeps a record's failure, the first one.
func (l *Ledger) Ack(_ flow.Entry, err error) {
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

// Failed is the first record that failed.
func (l *Ledger) Failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Boundary closes a Postgres transaction in the open Kafka transaction,
// or confirms a position with nothing to publish (at once when nothing is
// open, after the next commit otherwise).
func (l *Ledger) Boundary(c *outbox.Change) {
	if c.Kind == outbox.KindCommit && l.polledUntil != 0 && c.LSN > l.polledUntil {
		l.polled, l.polledUntil = nil, 0 // the stream is past what polling published
	}
	if c.Kind == outbox.KindCommit && l.inTx {
		l.inTx = false
		l.last = Position{Mode: store.ModeWAL, End: c.LSN, Commit: c.FinalLSN}
		return
	}
	if l.records == 0 {
		l.confirm(c.LSN)
	} else {
		l.later = max(l.later, c.LSN)
	}
}

// Where names a row in an error by its LSN.
func (l *Ledger) Where(_ int, c *outbox.Change, err error) error {
	return fmt.Errorf("row at %s: %w", c.LSN, err)
}

// Records are the records produced into the open Kafka transaction.
func (l *Ledger) Records() int { return l.records }

// Whole tells whether the open Kafka transaction holds records and ends
// with a whole Postgres transaction: it may be committed.
func (l *Ledger) Whole() bool { return l.records > 0 && !l.inTx }

// Due tells whether the open Kafka transaction should be committed now:
// it ends with a whole Postgres transaction and either nothing more is
// waiting to be read, or it reached its size or age bound.
func (l *Ledger) Due(idle bool, maxRecords int, maxAge time.Duration) bool {
	if !l.Whole() {
		return false
	}
	return idle || l.records >= maxRecords || time.Since(l.began) >= maxAge
}
