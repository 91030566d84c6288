// Package vanish finds outbox rows deleted before a poll phase published
// them, whose events are lost (Detector), and keeps the account it judges
// from while the WAL is streamed (WAL). It reads the table through Source
// (package poll, on the session's connection) and keeps its account
// through Account (package store, in pgoutbox_state), so that its
// arithmetic runs in tests on fakes of both.
package vanish

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"slices"
	"time"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/store"
)

const (
	// recount is the least time between two counts of the table's
	// known rows, which a suspected loss needs (the count reads the
	// table: 0.8 s for 2 million rows). A count that finds no loss
	// doubles the wait, up to recountMax, so that rollbacks beside
	// a cleanup of published rows, which keep raising the suspicion, cost
	// little; a count that finds one resets it. The wait is also at least
	// recountFactor times the last count's duration.
	recount       = 10 * time.Second
	recountMax    = 5 * time.Minute
	recountFactor = 50
	// reportEvery coalesces reports: the delete counter catches up
	// in steps of about a second, and one line every few seconds says as
	// much as one per step.
	reportEvery = 5 * time.Second
	// gapWait is how long after a phase's start every delete made
	// before it is in the delete counter: a backend that goes idle flushes
	// its statistics within 10 s. A gap is judged once a count after it
	// has run.
	gapWait = 11 * time.Second
	// gapMaxWait bounds the wait for the transactions running at a
	// phase's start: after it, the gap is not judged.
	gapMaxWait = 2 * time.Minute
	// maxTracked bounds the published positions remembered above
	// the settled position (a transaction open for long holds it back).
	maxTracked = 1 << 20
)

// Detector finds rows deleted before a poll phase published them.
// Polling reads rows that exist; a row deleted first (insert and delete in
// one transaction, or a cleanup job faster than the poll) leaves no trace
// in the table. It leaves two elsewhere:
//
//   - a position of the seq sequence that no visible row holds. Once every
//     transaction that drew positions up to b has finished (the snapshot's
//     xmin has reached the next transaction id read together with b) and
//     no unpublished row is left below b, each position up to b was either
//     published by this phase or never seen: a rolled-back insert, a
//     value the sequence skipped, or a deleted row. unseen counts those.
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
// The account is kept in pgoutbox_state (checkpoint) and carried from
// one phase to the next, and the WAL session moves it forward to what the
// WAL covered. A phase that finds one judges the positions drawn since it
// (while no relay ran, or after the WAL's last covered position) as it
// judges its own: unseen are the positions no row holds, and the delete
// counter counts from the checkpoint's reading. Where there is no
// checkpoint, or the statistics were reset since, the phase starts a new
// account, and rows deleted before it are not judged. Only the session's
// goroutine uses it.
type Detector struct {
	// What the detector is handed: where it reads the table and keeps its
	// account, and how it speaks.
	src   Source
	acct  Account
	mode  store.Mode
	log   *slog.Logger
	table string
	seq   poll.Sequence

	pos   positions
	del   deleteCount
	count knownCount
	rep   reports
	gap   gapJudge
	saved savedAccount
	// rebased says the last round started the account again (rebase):
	// "changed" or "added"; the session saves and reports it.
	rebased string
}

// positions is the account of the sequence's positions: which this phase
// published, and which no row holds.
type positions struct {
	// start is the last position drawn when the phase started; settled the
	// position up to which every position is accounted for.
	start, settled int64
	// candidates are (last position, next transaction id) readings
	// waiting for xmin to reach their id; ready is the highest settled
	// reading.
	candidates []candidate
	ready      int64
	// published are the positions above settled this phase published;
	// blind is set when they overflowed, and that range is not judged.
	published []int64
	blind     bool
	// pubHigh counts rows published with a position above start; known0
	// the rows present when the phase started.
	pubHigh, known0 int64
	// unseen positions in (start, settled]; lo and hi bound those found
	// since the last report.
	unseen, lo, hi int64
}

// deleteCount is the account of the table's delete counter, and of what
// truncates stand for.
type deleteCount struct {
	// deletes is the growth of n_tup_del since the reading the account
	// starts from (the phase's start, or the checkpoint's), plus what
	// truncates stand for (see rebase); last the last reading, and files
	// its relations (nil until the first).
	deletes, last int64
	files         map[uint32]poll.File
	// truncFrom and truncTo bound the positions a TRUNCATE (or a
	// partition dropped or detached, or a rewrite) may have taken rows of
	// (0: none): once settled, those no row holds count as deleted, and
	// truncSettled has the next round count and report without waiting.
	truncFrom, truncTo int64
	truncSettled       bool
	// lostFrom and lostTo bound the positions the last change may have
	// taken rows of, for its warning (settling clears truncFrom and
	// truncTo).
	lostFrom, lostTo int64
}

// knownCount is the last count of the rows known, and when to count again.
type knownCount struct {
	// vanishedKnown is the last count of known rows deleted; confirmed
	// the rows lost as of that count.
	vanishedKnown, confirmed int64
	last                     time.Time
	after                    time.Duration
}

// reports is what was reported.
type reports struct {
	// reported rows lost, last when; lastFrom and lastTo bound the
	// positions of the last report; first is set once the first was said.
	reported         int64
	last             time.Time
	first            bool
	lastFrom, lastTo int64
}

// gapJudge is the gap between the checkpoint the phase found and its
// start: the positions drawn while no phase ran.
type gapJudge struct {
	// cp is the checkpoint whose gap waits to be judged (judgeGap), until
	// xmin reaches next; pubEarly counts the rows of the gap this phase
	// published meanwhile.
	cp       *checkpoint
	next     uint64
	pubEarly int64
	// from is the first position of the gap judged at the start (0:
	// none); unseen the positions of the gap no row held.
	from, unseen int64
	// began is when the phase started.
	began time.Time
	// dropped is the gap the last rebase will not judge, to be said.
	dropped *checkpoint
}

// savedAccount is what was last saved of the account.
type savedAccount struct {
	// knownSeq is the saved checkpoint's known position; settled and
	// unseen the settled position and unseen count last saved; off is set
	// once the saved account cannot be trusted.
	knownSeq, settled, unseen int64
	off                       bool
	// bumped rows were added to the saved known rows before a batch was
	// produced; bumpAcked of them were acked since.
	bumped, bumpAcked int64
}

type candidate struct {
	last int64
	next uint64
}

// Source is what the detector reads of the table: poll.Poller's
// readings, and the snapshot's xmin on the same connection (PollSource).
type Source interface {
	Positions(ctx context.Context, seq poll.Sequence, above int64) (poll.Positions, error)
	CountKnown(ctx context.Context, upTo int64) (int64, error)
	CountGap(ctx context.Context, upTo, from, knownFrom, batchFrom, batchTo int64) (poll.GapCount, error)
	XMin(ctx context.Context) (uint64, error)
}

// Config is what the detector says its findings with.
type Config struct {
	// Table names the outbox table in what it logs.
	Table string
	// Mode is the mode the relay was started in: what a loss advises
	// depends on it.
	Mode store.Mode
	Log  *slog.Logger
}

// Start starts a poll phase's accounting from the sequence seq draws
// from. Where the account holds a checkpoint it continues that account,
// and judges the positions drawn since it once the transactions running
// now have finished (see judgeGap); otherwise it starts a new account here
// and saves it. An error means the table's positions cannot be read: the
// phase runs without a detector.
func Start(ctx context.Context, src Source, acct Account, seq poll.Sequence, cfg Config) (*Detector, error) {
	pos, err := src.Positions(ctx, seq, 0)
	if err != nil {
		return nil, err
	}
	d := &Detector{src: src, acct: acct, mode: cfg.Mode, log: cfg.Log, table: cfg.Table, seq: seq,
		pos: positions{start: pos.Last, settled: pos.Last, ready: pos.Last},
		del: deleteCount{last: pos.Deletes, files: filesByOID(pos.Files)}, gap: gapJudge{began: time.Now()}}
	cp, err := loadCheckpoint(ctx, acct)
	if err != nil && !store.IsMissing(err) {
		d.log.Warn("cannot read where the account of deleted rows stands", "err", err)
	}
	if cp != nil {
		switch why := cp.unjudgeable(pos); why {
		case "":
			d.gap.cp, d.gap.next, d.saved.knownSeq = cp, pos.Next, cp.knownSeq
			d.pos.unseen, d.rep.reported, d.del.deletes = cp.unseen, cp.reported, pos.Deletes-cp.deletes
			d.gap.from = cp.seq + 1
			return d, nil
		default:
			d.cannotJudge(cp, pos.Last, why)
		}
	}
	known, err := src.CountKnown(ctx, pos.Last)
	if err != nil {
		return nil, err
	}
	d.pos.known0 = known
	d.saveAccount(ctx)
	return d, nil
}

// unjudgeable says why the positions drawn since the checkpoint cannot be
// judged from it ("" when they can).
func (cp *checkpoint) unjudgeable(pos poll.Positions) string {
	switch {
	case !cp.sameStats || pos.Deletes < cp.deletes:
		return "the table's statistics were reset since (pg_stat_reset, or a crash of the server)"
	case cp.seq > pos.Last || cp.knownSeq > pos.Last:
		return "the sequence went back"
	case cp.files != "" && cp.files != filesKey(pos.Files):
		return "the table was truncated, rewritten, or a partition dropped, detached or attached since (what a TRUNCATE took then cannot be told from a DELETE)"
	}
	return ""
}

// filesKey is a reading's relations and files as the account saves them.
func filesKey(f poll.Files) string {
	sum := sha256.Sum256([]byte(f.Key()))
	return hex.EncodeToString(sum[:12])
}

func filesByOID(f poll.Files) map[uint32]poll.File {
	m := make(map[uint32]poll.File, len(f))
	for _, x := range f {
		m[x.OID] = x
	}
	return m
}

func (d *Detector) cannotJudge(cp *checkpoint, to int64, why string) {
	d.log.Warn("cannot judge whether outbox rows were deleted before publication while no poll phase ran: "+why+"; the account starts again here",
		"table", d.table, "seq_from", cp.seq+1, "seq_to", to)
}

// saveAccount saves the phase's account as the new checkpoint.
func (d *Detector) saveAccount(ctx context.Context) {
	if err := saveCheckpoint(ctx, d.acct, d.checkpoint()); err != nil {
		d.saved.off = true
		if !store.IsMissing(err) && ctx.Err() == nil {
			d.log.Warn("saving where the account of deleted rows stands failed", "err", err)
		}
		return
	}
	d.saved.knownSeq, d.saved.settled, d.saved.unseen = d.pos.start, d.pos.settled, d.pos.unseen
	d.saved.bumped, d.saved.bumpAcked = 0, 0
}

// judgeGap adds the positions drawn between the checkpoint and the phase's
// start to the account, once every transaction running at the start has
// finished (xmin reached the next transaction id read at the start): a
// row such a transaction inserted is then present or deleted, not counted
// as missing while it was only invisible. Unseen are the positions of the gap no row holds;
// known are the checkpoint's rows, the rows of the gap present now, and
// those of it this phase published meanwhile (deleted since or not).
func (d *Detector) judgeGap(ctx context.Context, xmin uint64) error {
	cp := d.gap.cp
	if xmin < d.gap.next && time.Since(d.gap.began) < gapMaxWait {
		return nil
	}
	c, err := d.src.CountGap(ctx, d.pos.start, cp.seq, cp.knownSeq, cp.batchFrom, cp.batchTo)
	if err != nil {
		return err
	}
	// The rows of a batch added to known and never marked (a crash in
	// between) are still pending: counted once, not twice.
	known0 := cp.known - c.BatchPending + c.PresentPending + d.gap.pubEarly
	// Rows of the account deleted since; a negative figure means rows
	// appeared that it did not count (another relay marking rows of this
	// table published, values written into seq by hand).
	if vk := known0 + d.pos.pubHigh - c.Known; vk < 0 || xmin < d.gap.next {
		why := "more rows are known now than the account counted"
		if xmin < d.gap.next {
			why = "a transaction open since the phase started holds the snapshot back"
		}
		// A new account from now: the counter as it reads now, the
		// rows known now.
		pos, err := d.src.Positions(ctx, d.seq, d.pos.settled)
		if err != nil {
			return err
		}
		d.cannotJudge(cp, d.pos.start, why)
		d.pos.known0, d.count.vanishedKnown, d.count.confirmed = c.Known-d.pos.pubHigh, 0, 0
		d.del.last, d.del.deletes, d.del.files = pos.Deletes, 0, filesByOID(pos.Files)
		d.pos.unseen, d.rep.reported, d.gap.from = d.pos.unseen-cp.unseen, 0, 0
	} else {
		d.pos.known0, d.count.vanishedKnown = known0, vk
		d.gap.unseen = max(0, d.pos.start-cp.seq-c.Present)
		d.pos.unseen += d.gap.unseen
		if d.gap.unseen > 0 && d.pos.lo == 0 {
			d.pos.lo, d.pos.hi = cp.seq+1, d.pos.start
		} else if d.gap.unseen > 0 {
			d.pos.lo = cp.seq + 1
		}
		d.log.Info("judging rows deleted before publication since the last accounted position",
			"table", d.table, "seq_from", cp.seq+1, "seq_to", d.pos.start, "unseen_positions", d.gap.unseen)
	}
	d.gap.cp, d.count.last = nil, time.Now()
	d.saveAccount(ctx)
	return nil
}

// checkpoint is the account as pgoutbox_state keeps it.
func (d *Detector) checkpoint() checkpoint {
	return checkpoint{seq: d.pos.settled, knownSeq: d.pos.start, known: d.pos.known0 + d.pos.pubHigh,
		deletes: d.del.last - d.del.deletes, unseen: d.pos.unseen, reported: d.rep.reported, sameStats: true, files: d.del.filesKey()}
}

func (c *deleteCount) filesKey() string {
	f := make(poll.Files, 0, len(c.files))
	for _, x := range c.files {
		f = append(f, x)
	}
	slices.SortFunc(f, func(a, b poll.File) int { return cmp.Compare(a.OID, b.OID) })
	return filesKey(f)
}

// From is the first position the detector accounts for; 0 when it is off.
func (d *Detector) From() int64 {
	switch {
	case d == nil:
		return 0
	case d.gap.from > 0:
		return d.gap.from
	}
	return d.pos.start + 1
}

// Seen records a position this phase published (Kafka acked it).
func (d *Detector) Seen(seq int64) {
	if d == nil {
		return
	}
	if seq > d.pos.start {
		d.pos.pubHigh++
	} else if g := d.gap.cp; g != nil && seq > g.knownSeq && (seq < g.batchFrom || seq > g.batchTo) {
		// A row of the batch in doubt is in the account already.
		d.gap.pubEarly++
	}
	if d.saved.bumped > 0 && seq > d.saved.knownSeq {
		d.saved.bumpAcked++
	}
	switch {
	case seq > d.pos.settled:
		if len(d.pos.published) < maxTracked {
			d.pos.published = append(d.pos.published, seq)
		} else {
			d.pos.blind = true
		}
	case seq > d.pos.start && d.pos.unseen > 0:
		// Counted unseen, then published: its transaction drew the
		// position before it took an xid, so the next id read with the
		// position did not cover it.
		d.pos.unseen--
	}
}

// report is what one round found: rows lost since the last report.
type report struct {
	lost, total        int64
	from, to           int64
	unseen, foreignDel int64
}

// round reads the positions once and settles what it can. It returns a
// report when more rows are known lost than were reported.
func (d *Detector) round(ctx context.Context) (*report, error) {
	pos, err := d.src.Positions(ctx, d.seq, d.pos.settled)
	if err != nil {
		return nil, err
	}
	if changed, added := d.del.advance(pos); changed || added {
		if err := d.rebase(ctx, pos, changed); err != nil {
			return nil, err
		}
	}
	if n := len(d.pos.candidates); pos.Last > d.pos.ready && (n == 0 || pos.Last > d.pos.candidates[n-1].last) {
		d.pos.candidates = append(d.pos.candidates, candidate{pos.Last, pos.Next})
	}
	i := 0
	for i < len(d.pos.candidates) && d.pos.candidates[i].next <= pos.XMin {
		d.pos.ready = d.pos.candidates[i].last
		i++
	}
	d.pos.candidates = d.pos.candidates[i:]
	upTo := d.pos.ready
	if pos.MinUnpublished > 0 {
		upTo = min(upTo, pos.MinUnpublished-1)
	}
	if upTo > d.pos.settled {
		d.pos.settle(upTo, &d.del)
	}

	suspect := d.gap.cp == nil && min(d.pos.unseen, d.del.deletes-d.count.vanishedKnown) > d.rep.reported
	if !suspect {
		return nil, nil
	}
	if time.Since(d.count.last) >= max(d.count.after, recount) || d.gap.countDue(d.count.last) || d.del.truncSettled {
		d.del.truncSettled = false
		began := time.Now()
		n, err := d.src.CountKnown(ctx, d.pos.start)
		if err != nil {
			return nil, err
		}
		d.count.last = time.Now()
		d.count.vanishedKnown = d.pos.known0 + d.pos.pubHigh - n
		d.count.confirmed = min(d.pos.unseen, d.del.deletes-d.count.vanishedKnown)
		if d.count.confirmed <= d.rep.reported {
			d.count.after = min(2*max(d.count.after, recount), recountMax)
		} else {
			d.count.after = recount
		}
		d.count.after = max(d.count.after, recountFactor*d.count.last.Sub(began))
	}
	// What a count confirmed is reported once the last report is old
	// enough, without counting again.
	lost := d.count.confirmed
	if lost <= d.rep.reported || time.Since(d.rep.last) < reportEvery {
		return nil, nil
	}
	if d.pos.lo == 0 {
		// Only the delete counter caught up: the rows lie where the
		// last report said.
		d.pos.lo, d.pos.hi = d.rep.lastFrom, d.rep.lastTo
	}
	rep := &report{lost: lost - d.rep.reported, total: lost, from: d.pos.lo, to: d.pos.hi,
		unseen: d.pos.unseen, foreignDel: d.del.deletes - d.count.vanishedKnown}
	d.rep.reported, d.rep.last = lost, time.Now()
	d.rep.lastFrom, d.rep.lastTo, d.pos.lo, d.pos.hi = d.pos.lo, d.pos.hi, 0, 0
	return rep, nil
}

// advance takes a reading's delete counters, relation by relation, and
// tells whether a relation got a new file or went (changed: a TRUNCATE, a
// rewrite, a partition dropped or detached, all of which take rows without
// counting deletes) or came (added: a partition attached or created).
func (c *deleteCount) advance(pos poll.Positions) (changed, added bool) {
	common := 0
	for _, f := range pos.Files {
		old, ok := c.files[f.OID]
		switch {
		case !ok:
			added = true
			continue
		case old.Node != f.Node:
			changed = true
		}
		common++
		// A statistics reset starts the counter again.
		if f.Deletes >= old.Deletes {
			c.deletes += f.Deletes - old.Deletes
		}
	}
	changed = changed || common < len(c.files)
	c.last, c.files = pos.Deletes, filesByOID(pos.Files)
	return changed, added
}

// rebase starts the account again after the table's relations changed: a
// TRUNCATE or a dropped partition takes its rows without counting deletes,
// so the known rows it took would pass for deletes of known rows and hide
// as many later deletes of unseen ones; an attached partition brings rows
// the account never counted. The rows known are counted again; the
// deletes of unseen rows found so far are carried over, counted against
// the last count of known rows (which can only make them more, never hide
// one). Where rows went (changed), every position drawn and not yet
// settled may have been one of them: once settled, those no row holds
// count as deleted.
func (d *Detector) rebase(ctx context.Context, pos poll.Positions, changed bool) error {
	carry := max(0, d.del.deletes-d.count.vanishedKnown)
	n, err := d.src.CountKnown(ctx, d.pos.start)
	if err != nil {
		return err
	}
	d.pos.known0, d.pos.pubHigh, d.count.vanishedKnown, d.del.deletes = n, 0, 0, carry
	d.count.last, d.count.after = time.Now(), 0
	if d.gap.cp != nil {
		// The gap's count would see the same change: it is not judged.
		d.gap.dropped = d.gap.cp
		d.gap.cp, d.gap.from, d.gap.unseen = nil, 0, 0
	}
	if changed && pos.Last > d.pos.settled {
		if d.del.truncTo == 0 {
			d.del.truncFrom = d.pos.settled + 1
		}
		d.del.truncTo = pos.Last
	}
	d.del.lostFrom, d.del.lostTo = d.del.truncFrom, d.del.truncTo
	d.rebased = map[bool]string{true: "changed", false: "added"}[changed]
	return nil
}

// countDue tells that the gap's final count is due: every delete made
// before the phase started is in the counter now, and the last count
// (lastCount) came before.
func (g *gapJudge) countDue(lastCount time.Time) bool {
	wait := g.began.Add(gapWait)
	return g.unseen > 0 && time.Now().After(wait) && lastCount.Before(wait)
}

// GapJudged tells whether the gap judged at the start is settled: nothing
// to find there, everything it could hold reported, or a count after the
// delete counter caught up. A handoff or a return to the WAL waits for it,
// as the WAL's first checkpoint starts a new account.
func (d *Detector) GapJudged() bool {
	switch {
	case d == nil:
		return true
	case d.gap.cp != nil:
		return false
	case d.gap.unseen == 0 || d.rep.reported >= d.pos.unseen:
		return true
	}
	if time.Since(d.gap.began) < gapWait {
		return false
	}
	return d.count.last.After(d.gap.began.Add(gapWait)) || min(d.pos.unseen, d.del.deletes-d.count.vanishedKnown) <= d.rep.reported
}

// settle accounts for the positions in (settled, upTo]: each was
// published by this phase or is unseen. Where a truncate may have taken
// rows, del counts those no row holds as deleted.
func (p *positions) settle(upTo int64, del *deleteCount) {
	slices.Sort(p.published)
	k := 0
	for k < len(p.published) && p.published[k] <= upTo {
		k++
	}
	if !p.blind {
		in := slices.Compact(slices.Clone(p.published[:k]))
		p.unseen += (upTo - p.settled) - int64(len(in))
		del.window(p.settled, upTo, in)
		// The lowest and highest unseen positions of the range.
		prev := p.settled
		for _, s := range append(in, upTo+1) {
			if s > prev+1 {
				if p.lo == 0 {
					p.lo = prev + 1
				}
				p.hi = s - 1
			}
			prev = max(prev, s)
		}
	} else {
		del.blindWindow(p.settled, upTo)
	}
	p.published = append(p.published[:0], p.published[k:]...)
	p.blind = false
	p.settled = upTo
}

// window counts, of the positions in (settled, upTo] where a TRUNCATE may
// have taken rows, those no row holds (not among in, the positions
// published, sorted) as deleted, as a delete would be; it closes the
// window once settled past it.
func (c *deleteCount) window(settled, upTo int64, in []int64) {
	if c.truncTo == 0 {
		return
	}
	from, to := max(settled+1, c.truncFrom), min(upTo, c.truncTo)
	if to >= from {
		lo, _ := slices.BinarySearch(in, from)
		hi, _ := slices.BinarySearch(in, to+1)
		c.deletes += (to - from + 1) - int64(hi-lo)
	}
	if upTo >= c.truncTo {
		c.truncFrom, c.truncTo, c.truncSettled = 0, 0, true
	}
}

// blindWindow is window where which positions were published is not
// known: every one of the range may have been taken.
func (c *deleteCount) blindWindow(settled, upTo int64) {
	if c.truncTo == 0 || upTo < c.truncFrom {
		return
	}
	c.deletes += min(upTo, c.truncTo) - max(settled+1, c.truncFrom) + 1
	if upTo >= c.truncTo {
		c.truncFrom, c.truncTo, c.truncSettled = 0, 0, true
	}
}
