package relay

import "testing"

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
