package nemesis

import (
	"math"
	"testing"
)

func series(n int, f func(i int) float64) []Sample {
	out := make([]Sample, n)
	for i := range out {
		v := f(i)
		out[i] = Sample{T: Seconds(i), RSS: []float64{v}, FDs: []float64{20}, Goroutines: []float64{30},
			RetainedWAL: 1, LatencyP50: 1, LatencyP99: 5}
	}
	return out
}

func rss(gs []Growth) Growth {
	for _, g := range gs {
		if g.Metric == "RSS" {
			return g
		}
	}
	return Growth{}
}

// The growth criterion: flat use with noise, spikes and a warm-up passes; a
// leak, even a slow one, fails; a relay down for a while is left out.
func TestJudge(t *testing.T) {
	for _, c := range []struct {
		name  string
		v     func(i int) float64
		grows bool
	}{
		{"flat", func(i int) float64 { return 40 }, false},
		{"noisy with spikes", func(i int) float64 {
			if i%17 == 0 {
				return 90 // a fault's backlog
			}
			return 40 + float64(i%5)
		}, false},
		{"warm-up then flat", func(i int) float64 { return 20 + min(float64(i), 25) }, false},
		{"leak", func(i int) float64 { return 30 + 0.5*float64(i) }, true},
		{"slow leak", func(i int) float64 { return 40 + 0.2*float64(i) }, true},
		{"down half the time", func(i int) float64 {
			if i%2 == 0 {
				return math.NaN()
			}
			return 40
		}, false},
	} {
		g := rss(Judge(series(200, c.v), SoakMetrics))
		if g.Grows != c.grows || g.Insufficient {
			t.Errorf("%s: %v", c.name, g)
		}
	}
	if g := rss(Judge(series(5, func(int) float64 { return 1 }), SoakMetrics)); !g.Insufficient {
		t.Errorf("5 samples judged: %v", g)
	}
}
