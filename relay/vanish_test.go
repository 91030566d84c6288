package relay

import (
	"testing"
	"time"
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
			d := &vanishDetector{start: tt.start, settled: tt.start}
			for _, s := range tt.published {
				d.seen(s)
			}
			d.settle(tt.upTo)
			if d.unseen != tt.unseen || d.lo != tt.lo || d.hi != tt.hi || len(d.published) != tt.left || d.settled != tt.upTo {
				t.Fatalf("unseen %d in [%d, %d], %d left, settled %d; want %d in [%d, %d], %d left, %d",
					d.unseen, d.lo, d.hi, len(d.published), d.settled, tt.unseen, tt.lo, tt.hi, tt.left, tt.upTo)
			}
		})
	}
}

// A position counted unseen and published later (its transaction drew it
// before taking an xid) is taken back; positions from before the phase
// are not counted.
func TestVanishLatePosition(t *testing.T) {
	d := &vanishDetector{start: 10, settled: 10}
	d.seen(12)
	d.settle(13) // 11 and 13 unseen
	d.seen(11)
	d.seen(9)
	if d.unseen != 1 || d.pubHigh != 2 {
		t.Fatalf("unseen %d, published above start %d; want 1 and 2", d.unseen, d.pubHigh)
	}
}

// Rows published before the gap is judged are counted where the account
// needs them: above the phase's start as published above it, inside the
// gap (above the account's known position) as rows of the gap this phase
// published; at or below that position they are known already.
func TestVanishSeenBeforeGapJudged(t *testing.T) {
	d := &vanishDetector{start: 100, settled: 100, gap: &gapCheckpoint{seq: 50, knownSeq: 40, batchFrom: 0, batchTo: -1}}
	for _, s := range []int64{30, 45, 60, 100, 101, 102} {
		d.seen(s)
	}
	if d.pubGapEarly != 3 || d.pubHigh != 2 {
		t.Fatalf("published in the gap %d, above the start %d; want 3 and 2", d.pubGapEarly, d.pubHigh)
	}
	c := d.checkpoint()
	if c.knownSeq != 100 || c.seq != 100 || c.known != d.known0+2 {
		t.Fatalf("checkpoint %+v", c)
	}
}

func TestVanishGapJudged(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name string
		d    *vanishDetector
		want bool
	}{
		{"no detector", nil, true},
		{"gap waiting for its count", &vanishDetector{gap: &gapCheckpoint{}, began: now.Add(-time.Hour)}, false},
		{"nothing unseen in the gap", &vanishDetector{began: now}, true},
		{"everything unseen reported", &vanishDetector{began: now, gapUnseen: 5, unseen: 5, reported: 5}, true},
		{"before the counter caught up", &vanishDetector{began: now, gapUnseen: 5, unseen: 5, deletes: 5}, false},
		{"suspect, not counted since", &vanishDetector{began: now.Add(-time.Minute), gapUnseen: 5, unseen: 5, deletes: 5,
			lastCount: now.Add(-time.Minute)}, false},
		{"counted after the counter caught up", &vanishDetector{began: now.Add(-time.Minute), gapUnseen: 5, unseen: 5, deletes: 5,
			lastCount: now}, true},
		{"no suspicion left", &vanishDetector{began: now.Add(-time.Minute), gapUnseen: 5, unseen: 5, deletes: 5, vanishedKnown: 5,
			lastCount: now.Add(-time.Minute)}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.gapJudged(); got != tt.want {
				t.Fatalf("gapJudged = %t, want %t", got, tt.want)
			}
		})
	}
}

// A row of the batch in doubt (added to the account, not marked before a
// crash) that this phase publishes before the gap is judged is in the
// account already.
func TestVanishBatchInDoubtNotCountedTwice(t *testing.T) {
	d := &vanishDetector{start: 100, settled: 100, gap: &gapCheckpoint{seq: 50, knownSeq: 40, batchFrom: 51, batchTo: 70}}
	for _, s := range []int64{51, 60, 70, 71, 101} {
		d.seen(s)
	}
	if d.pubGapEarly != 1 || d.pubHigh != 1 {
		t.Fatalf("published in the gap %d, above the start %d; want 1 and 1", d.pubGapEarly, d.pubHigh)
	}
}
