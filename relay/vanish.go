package relay

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

const (
	// vanishRecount is the least time between two counts of the table's
	// known rows, which a suspected loss needs (the count reads the
	// table: 0.8 s for 2 million rows). A count that finds no loss
	// doubles the wait, up to vanishRecountMax, so that rollbacks beside
	// a cleanup of published rows, which keep raising the suspicion, cost
	// little; a count that finds one resets it. The wait is also at least
	// vanishRecountFactor times the last count's duration.
	vanishRecount       = 10 * time.Second
	vanishRecountMax    = 5 * time.Minute
	vanishRecountFactor = 50
	// vanishReportEvery coalesces reports: the delete counter catches up
	// in steps of about a second, and one line every few seconds says as
	// much as one per step.
	vanishReportEvery = 5 * time.Second
	// maxVanishTracked bounds the published positions remembered above
	// the settled position (a transaction open for long holds it back).
	maxVanishTracked = 1 << 20
)

// vanishDetector finds rows deleted before a poll phase published them.
// Polling reads rows that exist; a row deleted first (insert and delete in
// one transaction, or a cleanup job faster than the poll) leaves no trace
// in the table. It leaves two elsewhere:
//
//   - a position of the seq sequence that no visible row holds. Once every
//     transaction that drew positions up to b has finished (the snapshot's
//     xmin has passed the xmax read together with b) and no unpublished row
//     is left below b, each position up to b was either published by this
//     phase or never seen: a rolled-back insert, a value the sequence
//     skipped, or a deleted row. unseen counts those.
//   - the table's delete counter (n_tup_del), which counts every attempted
//     delete. Less the deletes of rows this phase knew of (present when it
//     started, or published by it, counted from the table), what is left
//     are deletes of rows it never saw.
//
// Rows lost are at most the smaller of the two: rollbacks raise only the
// first, a cleanup job deleting published rows (retention included) only
// the second. The delete counter is flushed by each backend about once a
// second (up to 10 s late when it goes idle), so the figure can only grow
// as it catches up; a report is never withdrawn.
//
// It covers positions drawn after the phase started; rows written and
// deleted before (while no relay ran, or while the WAL was streamed) are
// not seen. Only the session's goroutine uses it.
type vanishDetector struct {
	table string
	seq   replication.Sequence
	// start is the last position drawn when the phase started; settled the
	// position up to which every position is accounted for.
	start, settled int64
	// candidates are (last position, snapshot xmax) readings waiting for
	// xmin to pass their xmax; ready is the highest settled reading.
	candidates []vanishCandidate
	ready      int64
	// published are the positions above settled this phase published;
	// blind is set when they overflowed, and that range is not judged.
	published []int64
	blind     bool
	// pubHigh counts rows published with a position above start; known0
	// the rows present when the phase started.
	pubHigh, known0 int64
	// unseen positions in (start, settled]; lo and hi bound those found
	// since the last report, lastFrom and lastTo those of the last report.
	unseen, lo, hi   int64
	lastFrom, lastTo int64
	// deletes is the growth of n_tup_del since the phase started.
	deletes, lastDel int64
	// vanishedKnown is the last count of known rows deleted.
	vanishedKnown int64
	lastCount     time.Time
	recountAfter  time.Duration
	// reported rows lost; pending is found but not yet reported.
	reported    int64
	lastReport  time.Time
	firstReport bool
}

type vanishCandidate struct {
	last int64
	xmax uint64
}

// newVanishDetector starts a poll phase's accounting. It returns nil (and
// logs why once) when the table's positions cannot be read.
func (r *Relay) newVanishDetector(ctx context.Context, poller *replication.Poller) *vanishDetector {
	seq, err := poller.Sequence(ctx)
	if err != nil {
		if !r.vanishOffLogged {
			r.vanishOffLogged = true
			r.log.Warn("cannot tell whether rows are deleted before polling publishes them: seq draws from no sequence this role may read (grant SELECT on it)",
				"table", r.table.String(), "err", err)
		}
		return nil
	}
	pos, err := poller.Positions(ctx, seq, 0)
	if err != nil {
		r.log.Warn("cannot tell whether rows are deleted before polling publishes them", "table", r.table.String(), "err", err)
		return nil
	}
	known, err := poller.CountKnown(ctx, pos.Last)
	if err != nil {
		r.log.Warn("cannot tell whether rows are deleted before polling publishes them", "table", r.table.String(), "err", err)
		return nil
	}
	return &vanishDetector{
		table: r.table.String(), seq: seq, start: pos.Last, settled: pos.Last, ready: pos.Last,
		known0: known, lastDel: pos.Deletes,
	}
}

// from is the first position the detector accounts for; 0 when it is off.
func (d *vanishDetector) from() int64 {
	if d == nil {
		return 0
	}
	return d.start + 1
}

// seen records a position this phase published (Kafka acked it).
func (d *vanishDetector) seen(seq int64) {
	if d == nil {
		return
	}
	if seq > d.start {
		d.pubHigh++
	}
	switch {
	case seq > d.settled:
		if len(d.published) < maxVanishTracked {
			d.published = append(d.published, seq)
		} else {
			d.blind = true
		}
	case seq > d.start && d.unseen > 0:
		// Counted unseen, then published: its transaction drew the
		// position before it took an xid, so the xmax read with the
		// position did not cover it.
		d.unseen--
	}
}

// vanishReport is what one round found: rows lost since the last report.
type vanishReport struct {
	lost, total        int64
	from, to           int64
	unseen, foreignDel int64
}

// round reads the positions once and settles what it can. It returns a
// report when more rows are known lost than were reported.
func (d *vanishDetector) round(ctx context.Context, poller *replication.Poller) (*vanishReport, error) {
	pos, err := poller.Positions(ctx, d.seq, d.settled)
	if err != nil {
		return nil, err
	}
	if pos.Deletes >= d.lastDel {
		d.deletes += pos.Deletes - d.lastDel
	}
	d.lastDel = pos.Deletes // a statistics reset starts the counter again
	if n := len(d.candidates); pos.Last > d.ready && (n == 0 || pos.Last > d.candidates[n-1].last) {
		d.candidates = append(d.candidates, vanishCandidate{pos.Last, pos.XMax})
	}
	i := 0
	for i < len(d.candidates) && d.candidates[i].xmax <= pos.XMin {
		d.ready = d.candidates[i].last
		i++
	}
	d.candidates = d.candidates[i:]
	upTo := d.ready
	if pos.MinUnpublished > 0 {
		upTo = min(upTo, pos.MinUnpublished-1)
	}
	if upTo > d.settled {
		d.settle(upTo)
	}

	suspect := min(d.unseen, d.deletes-d.vanishedKnown) > d.reported
	if !suspect || time.Since(d.lastCount) < max(d.recountAfter, vanishRecount) {
		return nil, nil
	}
	began := time.Now()
	n, err := poller.CountKnown(ctx, d.start)
	if err != nil {
		return nil, err
	}
	d.lastCount = time.Now()
	d.vanishedKnown = d.known0 + d.pubHigh - n
	lost := min(d.unseen, d.deletes-d.vanishedKnown)
	if lost <= d.reported {
		d.recountAfter = min(2*max(d.recountAfter, vanishRecount), vanishRecountMax)
	} else {
		d.recountAfter = vanishRecount
	}
	d.recountAfter = max(d.recountAfter, vanishRecountFactor*d.lastCount.Sub(began))
	if lost <= d.reported || time.Since(d.lastReport) < vanishReportEvery {
		return nil, nil
	}
	if d.lo == 0 {
		// Only the delete counter caught up: the rows lie where the
		// last report said.
		d.lo, d.hi = d.lastFrom, d.lastTo
	}
	rep := &vanishReport{lost: lost - d.reported, total: lost, from: d.lo, to: d.hi,
		unseen: d.unseen, foreignDel: d.deletes - d.vanishedKnown}
	d.reported, d.lastReport = lost, time.Now()
	d.lastFrom, d.lastTo, d.lo, d.hi = d.lo, d.hi, 0, 0
	return rep, nil
}

// settle accounts for the positions in (settled, upTo]: each was published
// by this phase or is unseen.
func (d *vanishDetector) settle(upTo int64) {
	slices.Sort(d.published)
	k := 0
	for k < len(d.published) && d.published[k] <= upTo {
		k++
	}
	if !d.blind {
		in := slices.Compact(slices.Clone(d.published[:k]))
		d.unseen += (upTo - d.settled) - int64(len(in))
		// The lowest and highest unseen positions of the range.
		prev := d.settled
		for _, s := range append(in, upTo+1) {
			if s > prev+1 {
				if d.lo == 0 {
					d.lo = prev + 1
				}
				d.hi = s - 1
			}
			prev = max(prev, s)
		}
	}
	d.published = append(d.published[:0], d.published[k:]...)
	d.blind = false
	d.settled = upTo
}

// vanishRound runs the detector after a poll, reports what it found, and
// never fails the session: counting is a check beside publishing.
func (r *Relay) vanishRound(ctx context.Context, conn *pgx.Conn, poller *replication.Poller, d *vanishDetector, handoff bool) {
	if d == nil {
		return
	}
	rep, err := d.round(ctx, poller)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("counting rows deleted before publication failed", "table", r.table.String(), "err", err)
		}
		return
	}
	if rep == nil {
		return
	}
	r.Metrics.lostDeleted.WithLabelValues(r.table.String()).Add(float64(rep.lost))
	advice := "keep outbox rows until they are published (delete only rows with published_at set), or stream the WAL: with wal_level=logical, --mode auto or wal publishes rows that are deleted in the same transaction"
	r.log.Error(fmt.Sprintf("up to %d outbox rows were deleted before polling published them: their events are lost", rep.lost),
		"table", r.table.String(), "lost_up_to", rep.lost, "lost_total_up_to", rep.total,
		"seq_from", rep.from, "seq_to", rep.to, "unseen_positions", rep.unseen, "deletes_of_unseen_rows", rep.foreignDel,
		"what_to_do", advice)
	if !d.firstReport {
		d.firstReport = true
		switch {
		case handoff:
		case r.cfg.Mode == ModeAuto:
			r.log.Error("polling cannot relay this table: the application deletes outbox rows before they are published, and only the WAL sees them. Auto mode keeps polling what it can see; give the server wal_level=logical (and the role REPLICATION) so auto mode streams the WAL, or keep rows until published_at is set",
				"table", r.table.String())
		case r.cfg.Mode == ModePoll:
			r.log.Error("--mode poll cannot relay this table: the application deletes outbox rows before they are published. Use --mode auto or wal on a server with wal_level=logical, or keep rows until published_at is set",
				"table", r.table.String())
		}
	}
	if err := saveVanished(ctx, conn, r.cfg.Replication.Slot, rep); err != nil && ctx.Err() == nil {
		if isUndefinedTable(err) {
			r.log.Warn("pgoutbox_state lacks the lost-row columns: run pgoutbox migrate so that status shows this loss")
		} else {
			r.log.Warn("saving the lost-row count failed", "err", err)
		}
	}
}

// saveVanished adds a report to the pipeline's state, where status reads
// it. The range spans the reports that followed each other within an hour:
// one episode, reported in steps as the delete counter catches up.
func saveVanished(ctx context.Context, conn *pgx.Conn, pipeline string, rep *vanishReport) error {
	return store.Pipeline{Name: pipeline}.SaveLost(ctx, conn, rep.lost, rep.from, rep.to)
}
