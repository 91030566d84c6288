package bench

import (
	"testing"
	"time"
)

func TestQuantileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0, 1 * time.Millisecond}, {0.5, 500 * time.Millisecond}, {0.9, 900 * time.Millisecond},
		{0.99, 990 * time.Millisecond}, {0.999, 999 * time.Millisecond}, {1, 1000 * time.Millisecond},
		{0.9991, 1000 * time.Millisecond}, // the next rank up
	} {
		if got := Quantile(s, c.q); got != c.want {
			t.Errorf("Quantile(1..1000 ms, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile(nil) = %v, want 0", got)
	}
	one := []time.Duration{7 * time.Millisecond}
	for _, q := range []float64{0, 0.5, 0.999, 1} {
		if got := Quantile(one, q); got != 7*time.Millisecond {
			t.Errorf("Quantile([7ms], %v) = %v", q, got)
		}
	}
}

func TestSummarize(t *testing.T) {
	// Unsorted input, which Summarize must not reorder.
	in := []time.Duration{3 * time.Millisecond, 1 * time.Millisecond, 2500 * time.Microsecond, 100 * time.Millisecond}
	got := Summarize(in)
	want := Latency{P50: 2.5, P90: 100, P99: 100, P999: 100, Max: 100}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if in[0] != 3*time.Millisecond {
		t.Error("Summarize sorted its input")
	}
	if (Summarize(nil) != Latency{}) {
		t.Error("Summarize(nil) is not zero")
	}
	if got := ms(1234567 * time.Nanosecond); got != 1.235 {
		t.Errorf("ms(1.234567ms) = %v, want 1.235", got)
	}
}
