package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Range is an inclusive range of events per transaction: "1-3", or "2"
// for exactly two. It is a flag.Value.
type Range struct{ Min, Max int }

// ParseRange reads "N" or "MIN-MAX", both positive, MIN at most MAX.
func ParseRange(s string) (Range, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err := errors.Join(err1, err2); err != nil {
		return Range{}, fmt.Errorf("%q: want N or MIN-MAX", s)
	}
	r := Range{a, b}
	if err := r.validate(); err != nil {
		return Range{}, fmt.Errorf("%q: %w", s, err)
	}
	return r, nil
}

func (r Range) validate() error {
	if r.Min < 1 || r.Max < r.Min {
		return errors.New("want positive numbers, the first at most the second")
	}
	return nil
}

// String is "N" or "MIN-MAX".
func (r Range) String() string {
	if r.Min == r.Max {
		return strconv.Itoa(r.Min)
	}
	return strconv.Itoa(r.Min) + "-" + strconv.Itoa(r.Max)
}

// Set parses s into r.
func (r *Range) Set(s string) error {
	v, err := ParseRange(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalText writes the JSON form, "1-3" or "1".
func (r Range) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Mean is the average number of events per transaction.
func (r Range) Mean() float64 { return float64(r.Min+r.Max) / 2 }

// At is the number of events of transaction i: the range's values in turn,
// so that every run of a bench, the floor's included, sees the same
// sequence of transaction sizes and the same total.
func (r Range) At(i int) int { return r.Min + i%(r.Max-r.Min+1) }

// aggregateOf picks transaction i's aggregate among n, spread evenly but
// not in turn (splitmix64 of i): concurrent writers now and then want the
// same row and wait for its lock, as an application's do. The choice
// depends on i only, so the relay's run and the floor's lock the same
// rows in the same order.
func aggregateOf(i, n int) int {
	z := uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(n))
}
