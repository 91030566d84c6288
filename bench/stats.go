package bench

import (
	"math"
	"slices"
	"time"
)

// Latency summarizes a latency distribution, in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// Quantile returns the q-quantile (0 <= q <= 1) of sorted by the
// nearest-rank method: the smallest value such that at least q of the
// values are at most it. It returns 0 for an empty slice.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return sorted[rank-1]
}

// Summarize returns the quantiles of lat, which it does not modify.
func Summarize(lat []time.Duration) Latency {
	s := slices.Clone(lat)
	slices.Sort(s)
	return summarizeSorted(s)
}

func summarizeSorted(s []time.Duration) Latency {
	if len(s) == 0 {
		return Latency{}
	}
	return Latency{
		P50:  ms(Quantile(s, 0.50)),
		P90:  ms(Quantile(s, 0.90)),
		P99:  ms(Quantile(s, 0.99)),
		P999: ms(Quantile(s, 0.999)),
		Max:  ms(s[len(s)-1]),
	}
}

// ms converts d to milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// round returns v rounded to digits decimals.
func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
