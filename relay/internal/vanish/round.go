package vanish

import (
	"context"
	"fmt"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/store"
)

// Round runs the detector after a poll and reports what it found: it
// returns how many more rows it found lost (0: none). It never fails the
// session: counting is a check beside publishing. handoff says the phase
// publishes what committed before a new slot, which a loss's advice
// leaves alone. A nil detector does nothing.
func (d *Detector) Round(ctx context.Context, handoff bool) int64 {
	if d == nil {
		return 0
	}
	if d.gap.cp != nil {
		xmin, err := d.src.XMin(ctx)
		if err == nil {
			err = d.judgeGap(ctx, xmin)
		}
		if err != nil && ctx.Err() == nil {
			d.log.Warn("counting rows deleted before publication failed", "table", d.table, "err", err)
		}
	}
	rep, err := d.round(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("counting rows deleted before publication failed", "table", d.table, "err", err)
		}
		return 0
	}
	switch d.rebased {
	case "changed":
		d.log.Warn("the outbox table was truncated or rewritten, or one of its partitions dropped or detached: rows it held that polling had not published yet are lost; they are counted as deleted, up to the positions drawn since the last poll that no row holds",
			"table", d.table, "seq_from", d.del.lostFrom, "seq_to", d.del.lostTo)
	case "added":
		d.log.Info("a partition was added to the outbox table: the account of deleted rows counts its rows from here", "table", d.table)
	}
	if cp := d.gap.dropped; cp != nil {
		d.cannotJudge(cp, d.pos.start, "the table was truncated or rewritten, or a partition dropped, detached or attached, before the gap was judged")
		d.gap.dropped = nil
	}
	if d.rebased != "" {
		d.rebased = ""
		d.saveAccount(ctx)
	}
	d.saveProgress(ctx)
	if rep == nil {
		return 0
	}
	advice := "keep outbox rows until they are published (delete only rows with published_at set), or stream the WAL: with wal_level=logical, --mode auto or wal publishes rows that are deleted in the same transaction"
	d.log.Error(fmt.Sprintf("up to %d outbox rows were deleted before polling published them: their events are lost", rep.lost),
		"table", d.table, "lost_up_to", rep.lost, "lost_total_up_to", rep.total,
		"seq_from", rep.from, "seq_to", rep.to, "unseen_positions", rep.unseen, "deletes_of_unseen_rows", rep.foreignDel,
		"what_to_do", advice)
	if !d.rep.first {
		d.rep.first = true
		switch {
		case handoff:
		case d.mode == store.ModeAuto:
			d.log.Error("polling cannot relay this table: the application deletes outbox rows before they are published, and only the WAL sees them. Auto mode keeps polling what it can see; give the server wal_level=logical (and the role REPLICATION) so auto mode streams the WAL, or keep rows until published_at is set",
				"table", d.table)
		case d.mode == store.ModePoll:
			d.log.Error("--mode poll cannot relay this table: the application deletes outbox rows before they are published. Use --mode auto or wal on a server with wal_level=logical, or keep rows until published_at is set",
				"table", d.table)
		}
	}
	// Added to the pipeline's state, where status reads it, and to the
	// account's reported rows in the same statement. The range spans the
	// reports that followed each other within an hour: one episode,
	// reported in steps as the delete counter catches up.
	if err := d.acct.SaveLost(ctx, rep.lost, rep.from, rep.to); err != nil && ctx.Err() == nil {
		if store.IsMissing(err) {
			d.log.Warn("pgoutbox_state lacks the lost-row columns: run pgoutbox migrate so that status shows this loss")
		} else {
			d.log.Warn("saving the lost-row count failed", "err", err)
		}
	}
	return rep.lost
}

// saveProgress saves the positions the phase settled, when they moved.
// A save that fails leaves an older position, whose gap the next phase
// counts again: nothing is judged twice or skipped.
func (d *Detector) saveProgress(ctx context.Context) {
	if d.saved.off || (d.saved.bumped == 0 && (d.gap.cp != nil || (d.pos.settled == d.saved.settled && d.pos.unseen == d.saved.unseen))) {
		return
	}
	settled, unseen := d.pos.settled, d.pos.unseen
	if d.gap.cp != nil {
		settled, unseen = d.gap.cp.seq, d.gap.cp.unseen // the gap is not judged yet
	}
	// The batch is marked: what was added for rows Kafka did not ack
	// is taken back, and the batch is no longer in doubt.
	err := d.acct.SaveGapProgress(ctx, d.saved.knownSeq, settled, unseen, d.saved.bumped-d.saved.bumpAcked)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("saving where the account of deleted rows stands failed", "err", err)
		}
		return
	}
	d.saved.bumped, d.saved.bumpAcked = 0, 0
	if d.gap.cp == nil {
		d.saved.settled, d.saved.unseen = d.pos.settled, d.pos.unseen
	}
}

// WillPublish adds the rows a poll is about to produce above the phase's
// start to the saved known rows, before Kafka has them: a crash after
// they are marked published then never counts their later deletes as
// deletes of rows nobody saw. If the save fails, the saved account is
// dropped, and the next phase starts a new one.
func (d *Detector) WillPublish(ctx context.Context, rows []poll.Row) {
	if d == nil || d.saved.off {
		return
	}
	var n, lo, hi int64
	for i := range rows {
		if s := rows[i].Seq; s > d.saved.knownSeq {
			if n == 0 || s < lo {
				lo = s
			}
			hi = max(hi, s)
			n++
		}
	}
	if n == 0 {
		return
	}
	// A batch is published only after the last one was taken back
	// (saveProgress); one that failed stays added, and its range in
	// doubt: lo and hi then span both.
	err := d.acct.AddGapBatch(ctx, d.saved.knownSeq, n, lo, hi)
	d.saved.bumped += n
	if err != nil {
		d.saved.off = true
		if e := d.acct.ForgetGap(ctx); e != nil && ctx.Err() == nil {
			d.log.Warn("saving the account of deleted rows failed", "err", err)
		}
	}
}
