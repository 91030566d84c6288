package vanish

import (
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/poll"
)

func TestVanishSettle(t *testing.T) {
	for _, tt := range []struct {
		name           string
		start          int64
		published      []int64 // in the order acked
		upTo           int64
		unseen, lo, hi int64
		left           int // positions remembered above upTo
	}{
		{name: "all seen", start: 10, published: []int64{11, 12, 13}, upTo: 13},
		{name: "gaps", start: 10, published: []int64{14, 11, 13}, upTo: 16, unseen: 3, lo: 12, hi: 16},
		{name: "above the range kept", start: 0, published: []int64{1, 5, 3}, upTo: 3, unseen: 1, lo: 2, hi: 2, left: 1},
		{name: "nothing seen", start: 5, upTo: 8, unseen: 3, lo: 6, hi: 8},
		{name: "duplicate ack", start: 0, published: []int64{1, 1, 2}, upTo: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &Detector{pos: positions{start: tt.start, settled: tt.start}}
			for _, s := range tt.published {
				d.Seen(s)
			}
			d.pos.settle(tt.upTo, &d.del)
			if d.pos.unseen != tt.unseen || d.pos.lo != tt.lo || d.pos.hi != tt.hi || len(d.pos.published) != tt.left || d.pos.settled != tt.upTo {
				t.Fatalf("unseen %d in [%d, %d], %d left, settled %d; want %d in [%d, %d], %d left, %d",
					d.pos.unseen, d.pos.lo, d.pos.hi, len(d.pos.published), d.pos.settled, tt.unseen, tt.lo, tt.hi, tt.left, tt.upTo)
			}
		})
	}
}

// A position counted unseen and published later (its transaction drew it
// before taking an xid) is taken back; positions from before the phase
// are not counted.
func TestVanishLatePosition(t *testing.T) {
	d := &Detector{pos: positions{start: 10, settled: 10}}
	d.Seen(12)
	d.pos.settle(13, &d.del) // 11 and 13 unseen
	d.Seen(11)
	d.Seen(9)
	if d.pos.unseen != 1 || d.pos.pubHigh != 2 {
		t.Fatalf("unseen %d, published above start %d; want 1 and 2", d.pos.unseen, d.pos.pubHigh)
	}
}

// Rows published before the gap is judged are counted where the account
// needs them: above the phase's start as published above it, inside the
// gap (above the account's known position) as rows of the gap this phase
// published; at or below that position they are known already.
func TestVanishSeenBeforeGapJudged(t *testing.T) {
	d := &Detector{pos: positions{start: 100, settled: 100}, gap: gapJudge{cp: &checkpoint{seq: 50, knownSeq: 40, batchFrom: 0, batchTo: -1}}}
	for _, s := range []int64{30, 45, 60, 100, 101, 102} {
		d.Seen(s)
	}
	if d.gap.pubEarly != 3 || d.pos.pubHigh != 2 {
		t.Fatalf("published in the gap %d, above the start %d; want 3 and 2", d.gap.pubEarly, d.pos.pubHigh)
	}
	c := d.checkpoint()
	if c.knownSeq != 100 || c.seq != 100 || c.known != d.pos.known0+2 {
		t.Fatalf("checkpoint %+v", c)
	}
}

func TestVanishGapJudged(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name string
		d    *Detector
		want bool
	}{
		{"no detector", nil, true},
		{"gap waiting for its count", &Detector{gap: gapJudge{cp: &checkpoint{}, began: now.Add(-time.Hour)}}, false},
		{"nothing unseen in the gap", &Detector{gap: gapJudge{began: now}}, true},
		{"everything unseen reported", &Detector{gap: gapJudge{began: now, unseen: 5}, pos: positions{unseen: 5}, rep: reports{reported: 5}}, true},
		{"before the counter caught up", &Detector{gap: gapJudge{began: now, unseen: 5}, pos: positions{unseen: 5}, del: deleteCount{deletes: 5}}, false},
		{"suspect, not counted since", &Detector{gap: gapJudge{began: now.Add(-time.Minute), unseen: 5}, pos: positions{unseen: 5}, del: deleteCount{deletes: 5},
			count: knownCount{last: now.Add(-time.Minute)}}, false},
		{"counted after the counter caught up", &Detector{gap: gapJudge{began: now.Add(-time.Minute), unseen: 5}, pos: positions{unseen: 5}, del: deleteCount{deletes: 5},
			count: knownCount{last: now}}, true},
		{"no suspicion left", &Detector{gap: gapJudge{began: now.Add(-time.Minute), unseen: 5}, pos: positions{unseen: 5}, del: deleteCount{deletes: 5},
			count: knownCount{vanishedKnown: 5, last: now.Add(-time.Minute)}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.GapJudged(); got != tt.want {
				t.Fatalf("GapJudged = %t, want %t", got, tt.want)
			}
		})
	}
}

// A row of the batch in doubt (added to the account, not marked before a
// crash) that this phase publishes before the gap is judged is in the
// account already.
func TestVanishBatchInDoubtNotCountedTwice(t *testing.T) {
	d := &Detector{pos: positions{start: 100, settled: 100}, gap: gapJudge{cp: &checkpoint{seq: 50, knownSeq: 40, batchFrom: 51, batchTo: 70}}}
	for _, s := range []int64{51, 60, 70, 71, 101} {
		d.Seen(s)
	}
	if d.gap.pubEarly != 1 || d.pos.pubHigh != 1 {
		t.Fatalf("published in the gap %d, above the start %d; want 1 and 1", d.gap.pubEarly, d.pos.pubHigh)
	}
}

// advance counts the growth of each relation's delete counter, and tells a
// relation with a new file or gone (a TRUNCATE, a dropped partition) from
// one added; a relation gone takes its count along without it being read
// as a reset of the others'.
func TestVanishAdvance(t *testing.T) {
	files := func(fs ...poll.File) poll.Positions {
		var sum int64
		for _, f := range fs {
			sum += f.Deletes
		}
		return poll.Positions{Files: fs, Deletes: sum}
	}
	for _, tt := range []struct {
		name           string
		next           poll.Positions
		deletes        int64
		changed, added bool
	}{
		{"deletes", files(poll.File{OID: 1, Node: 10, Deletes: 5}, poll.File{OID: 2, Node: 20, Deletes: 9}), 10, false, false},
		{"truncated", files(poll.File{OID: 1, Node: 11, Deletes: 4}, poll.File{OID: 2, Node: 20, Deletes: 3}), 3, true, false},
		{"dropped", files(poll.File{OID: 2, Node: 20, Deletes: 4}), 2, true, false},
		{"attached", files(poll.File{OID: 1, Node: 10, Deletes: 2}, poll.File{OID: 2, Node: 20, Deletes: 2}, poll.File{OID: 3, Node: 30, Deletes: 50}), 0, false, true},
		{"statistics reset", files(poll.File{OID: 1, Node: 10, Deletes: 0}, poll.File{OID: 2, Node: 20, Deletes: 2}), 0, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &Detector{del: deleteCount{files: filesByOID(poll.Files{{OID: 1, Node: 10, Deletes: 2}, {OID: 2, Node: 20, Deletes: 2}}), last: 4}}
			changed, added := d.del.advance(tt.next)
			if d.del.deletes != tt.deletes || changed != tt.changed || added != tt.added || d.del.last != tt.next.Deletes {
				t.Fatalf("deletes %d, changed %t, added %t, last %d; want %d, %t, %t, %d",
					d.del.deletes, changed, added, d.del.last, tt.deletes, tt.changed, tt.added, tt.next.Deletes)
			}
		})
	}
}

// After a truncate, the positions of its window that no row holds count
// as deleted once settled, in the steps they settle in, and the window
// closes.
func TestVanishTruncateWindow(t *testing.T) {
	d := &Detector{pos: positions{start: 10, settled: 12}, del: deleteCount{truncFrom: 13, truncTo: 20}}
	for _, s := range []int64{13, 15, 21} {
		d.Seen(s)
	}
	d.pos.settle(16, &d.del) // 14 and 16 unseen
	if d.del.deletes != 2 || d.del.truncTo != 20 || d.del.truncSettled {
		t.Fatalf("after settling to 16: deletes %d, window to %d, settled %t", d.del.deletes, d.del.truncTo, d.del.truncSettled)
	}
	d.pos.settle(22, &d.del) // 17-20 in the window, 22 outside
	if d.del.deletes != 6 || d.del.truncTo != 0 || !d.del.truncSettled || d.pos.unseen != 7 {
		t.Fatalf("after settling to 22: deletes %d, window to %d, settled %t, unseen %d", d.del.deletes, d.del.truncTo, d.del.truncSettled, d.pos.unseen)
	}
}
