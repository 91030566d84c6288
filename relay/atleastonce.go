package relay

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
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
	polled *flow.Polled
	order  string
	stats  *Stats
	// floor is the saved floor's transaction id, read when the session
	// opened (0: none); see flow.WALLedger.
	floor uint32
	wm    *flow.Watermark
	// streamed gets each transaction once Kafka acked all its records.
	streamed *streamMarks
	// broker names the broker in a failed record's error.
	broker string
}

func (d *atLeastOnceWAL) begin(to confirmer, _ context.Context) ledger {
	var done func(xid uint32)
	if d.streamed != nil {
		done = func(xid uint32) { d.streamed.add(xid) }
	}
	d.wm = flow.NewWatermark(to.Start(), to.Confirm, done)
	return flow.NewWALLedger(d.wm, d.polled, d.order, d.floor, d.stats.skipped())
}

// End: nothing is open that a failure leaves behind.
func (d *atLeastOnceWAL) End(context.Context, error) error { return nil }

func (d *atLeastOnceWAL) position() (pglogrepl.LSN, int, error) {
	lsn, waiting := d.wm.Position()
	return lsn, waiting, d.wm.Failed()
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
		if err := d.wm.Failed(); err != nil {
			return fmt.Errorf("%s: %w", d.broker, err)
		}
		if err := pub.publish(ctx, changes[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

// atLeastOncePoll is a poll session's at-least-once delivery: the acked
// rows of a batch are marked published, and that is all.
type atLeastOncePoll struct{}

func (atLeastOncePoll) Settle(context.Context, *flow.PollLedger) error { return nil }
func (atLeastOncePoll) End(context.Context, error) error               { return nil }
