package relay

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/replication"
)

// At-least-once delivery: every event arrives, in order per aggregate; a
// crash sends again what was in flight. A WAL session confirms a
// transaction's commit LSN once it and every transaction before it are
// acked (the watermark); a poll session marks exactly the acked rows
// published.

// atLeastOnceWAL is a WAL session's at-least-once delivery.
type atLeastOnceWAL struct {
	// polled are the rows the poll phase before the session published;
	// order the column polling marks rows by; stats counts the rows not
	// sent again.
	polled *polledRows
	order  string
	stats  *Stats
	// floor is the saved floor's transaction id, read when the session
	// opened (0: none); see walLedger.
	floor uint32
	wm    *watermark
	// streamed gets each transaction once Kafka acked all its records.
	streamed *streamMarks
}

func (d *atLeastOnceWAL) begin(to confirmer, _ context.Context) ledger {
	d.wm = newWatermark(to.Start(), to.Confirm)
	if d.streamed != nil {
		d.wm.done = func(xid uint32) { d.streamed.add(xid) }
	}
	return &walLedger{wm: d.wm, polled: d.polled, order: d.order, stats: d.stats, floor: d.floor}
}

// end: nothing is open that a failure leaves behind.
func (d *atLeastOnceWAL) end(context.Context, error) error { return nil }

func (d *atLeastOnceWAL) position() (pglogrepl.LSN, int, error) {
	lsn, waiting := d.wm.position()
	return lsn, waiting, d.wm.failed()
}

// publish publishes the changes of a replication stream as they come, a
// batch at a time. It stops taking changes once ctx ends (the session
// failed) or a record failed: nothing after a failed record may be
// confirmed. A batch is released once walked: no change of it is kept.
func (d *atLeastOnceWAL) publish(ctx context.Context, pub *publisher, batches <-chan *replication.Batch) error {
	for b := range batches {
		err := d.walk(ctx, pub, b.Changes)
		b.Release()
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (d *atLeastOnceWAL) walk(ctx context.Context, pub *publisher, changes []outbox.Change) error {
	for i := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.wm.failed(); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		if err := pub.publish(ctx, changes[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

// walLedger confirms through the watermark: a transaction's records are
// counted as they are produced, its commit closes it, and the watermark
// confirms its commit LSN once it and every transaction before it are
// acked. A failure stops the watermark for good.
type walLedger struct {
	wm *watermark
	tx *txn // the transaction being read; nil between transactions
	// polled are the rows the poll phase before this session published;
	// the stream replays them until it passes polled.until.
	polled *polledRows
	order  string // the column polling marks rows by
	stats  *Stats // counts the rows not sent again
	// floor is the saved floor's transaction id, read at the session's
	// start (0: none). Every transaction below it is in Kafka: the floor
	// is saved once the confirmed position passed it. The stream replays
	// from the slot's confirmed position, which can be older: PostgreSQL
	// 15 and 16 write it to disk only when other fields of the slot
	// change (a crash replays from there), and the server learns it a
	// status interval after the floor was saved. Those rows are not sent
	// again.
	floor uint32
}

func (l *walLedger) skip(c *outbox.Change) bool {
	if l.floor != 0 && xidBefore(c.XID, l.floor) {
		l.stats.SkippedBelowFloor.Add(1)
		return true
	}
	set := l.polled.of(c)
	if len(set) == 0 {
		return false
	}
	if seq, ok := seqOf(c.Relation, c.Values, l.order); ok && set.take(seq) {
		l.stats.SkippedPolled.Add(1)
		return true
	}
	return false
}

func (l *walLedger) produce(_ int, c *outbox.Change) entry {
	if l.tx == nil {
		l.tx = l.wm.begin(c.XID)
	}
	l.wm.add(l.tx)
	return entry{tx: l.tx}
}

func (l *walLedger) ack(e entry, err error) { l.wm.ack(e.tx, err) }

func (l *walLedger) boundary(c *outbox.Change) {
	if c.Kind == outbox.KindCommit && l.polled.passed(c.LSN) {
		l.polled.forget() // the stream is past what polling published
	}
	if c.Kind != outbox.KindCommit || l.tx == nil {
		l.wm.mark(c.LSN)
		return
	}
	l.wm.commit(l.tx, c.LSN)
	l.tx = nil
}

func (l *walLedger) where(_ int, c *outbox.Change, err error) error {
	return fmt.Errorf("row at %s: %w", c.LSN, err)
}

// atLeastOncePoll is a poll session's at-least-once delivery: the acked
// rows of a batch are marked published, and that is all.
type atLeastOncePoll struct{}

func (atLeastOncePoll) settle(context.Context, *pollLedger) error { return nil }
func (atLeastOncePoll) end(context.Context, error) error          { return nil }
