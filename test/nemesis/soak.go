package nemesis

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sample is one reading of the soak's resources.
type Sample struct {
	T Seconds `json:"t"`
	// Per relay process (by index); a relay that is down has no reading
	// (NaN), and a restarted one starts again from its own baseline.
	RSS        []float64 `json:"rss_mib"`
	FDs        []float64 `json:"fds"`
	Goroutines []float64 `json:"goroutines"`
	// RetainedWAL is pg_current_wal_lsn() - restart_lsn of the slot, MiB
	// (NaN without a slot).
	RetainedWAL float64 `json:"retained_wal_mib"`
	// Latency is commit-to-consume of the events first read since the
	// previous sample, milliseconds.
	LatencyP50 float64 `json:"latency_p50_ms"`
	LatencyP99 float64 `json:"latency_p99_ms"`
}

// Metric is one of the soak's series and how much it may grow.
type Metric struct {
	Name  string
	Unit  string
	Value func(s Sample) []float64
	// A series grows without bound when the median of its last quarter
	// exceeds the median of its second quarter by more than Ratio times
	// it plus Slack. The first quarter is the warm-up (caches, buffers,
	// the first large transaction) and is not compared.
	Ratio, Slack float64
}

// SoakMetrics are the series the soak samples and the growth each may
// show. The slacks are what a process whose use is flat still moves by
// between quarters on this machine: a few MiB of heap, a goroutine per
// open connection, a connection's descriptors; the retained WAL follows
// the confirmed position, which a fault holds back for its length; the
// latency moves with the machine's other load.
var SoakMetrics = []Metric{
	{Name: "RSS", Unit: "MiB", Value: func(s Sample) []float64 { return s.RSS }, Ratio: 0.1, Slack: 8},
	{Name: "goroutines", Unit: "", Value: func(s Sample) []float64 { return s.Goroutines }, Ratio: 0.1, Slack: 10},
	{Name: "open file descriptors", Unit: "", Value: func(s Sample) []float64 { return s.FDs }, Ratio: 0.1, Slack: 8},
	{Name: "retained WAL", Unit: "MiB", Value: func(s Sample) []float64 { return []float64{s.RetainedWAL} }, Ratio: 1, Slack: 16},
	{Name: "latency p50", Unit: "ms", Value: func(s Sample) []float64 { return []float64{s.LatencyP50} }, Ratio: 1, Slack: 5},
	{Name: "latency p99", Unit: "ms", Value: func(s Sample) []float64 { return []float64{s.LatencyP99} }, Ratio: 1, Slack: 50},
}

// Growth is the verdict on one series.
type Growth struct {
	Metric       string  `json:"metric"`
	Series       int     `json:"series"` // the relay, or 0
	Second       float64 `json:"second_quarter_median"`
	Last         float64 `json:"last_quarter_median"`
	Limit        float64 `json:"limit"`
	Grows        bool    `json:"grows"`
	Samples      int     `json:"samples"`
	Insufficient bool    `json:"insufficient,omitempty"`
}

func (g Growth) String() string {
	if g.Insufficient {
		return fmt.Sprintf("%s[%d]: too few samples (%d)", g.Metric, g.Series, g.Samples)
	}
	verdict := "flat"
	if g.Grows {
		verdict = "GROWS"
	}
	return fmt.Sprintf("%s[%d]: second quarter median %.1f, last quarter median %.1f, limit %.1f: %s",
		g.Metric, g.Series, g.Second, g.Last, g.Limit, verdict)
}

// Judge applies each metric's growth criterion to the samples, per series.
// Readings that are NaN (a relay down) are left out of the medians.
func Judge(samples []Sample, metrics []Metric) []Growth {
	var out []Growth
	for _, m := range metrics {
		width := 0
		for _, s := range samples {
			width = max(width, len(m.Value(s)))
		}
		for i := 0; i < width; i++ {
			series := make([]float64, len(samples))
			for j, s := range samples {
				v := m.Value(s)
				series[j] = math.NaN()
				if i < len(v) {
					series[j] = v[i]
				}
			}
			g := grows(series, m.Ratio, m.Slack)
			g.Metric, g.Series = m.Name, i
			out = append(out, g)
		}
	}
	return out
}

// grows compares the median of the last quarter of values with that of the
// second quarter.
func grows(values []float64, ratio, slack float64) Growth {
	n := len(values)
	g := Growth{Samples: n}
	second := finite(values[n/4 : n/2])
	last := finite(values[n-n/4:])
	if n < 8 || len(second) == 0 || len(last) == 0 {
		g.Insufficient = true
		return g
	}
	g.Second, g.Last = median(second), median(last)
	g.Limit = g.Second*(1+ratio) + slack
	g.Grows = g.Last > g.Limit
	return g
}

func finite(vs []float64) []float64 {
	var out []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile of sorted values, nearest rank.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// processReading reads a process's resident set (MiB) and its open file
// descriptors from /proc.
func processReading(pid int) (rss, fds float64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				return 0, 0, err
			}
			rss = kb / 1024
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, err
	}
	return rss, float64(len(ents)), nil
}

// retainedWAL reads how much WAL the slot holds, MiB.
func retainedWAL(ctx context.Context, url, slot string) float64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return math.NaN()
	}
	defer c.Close(context.Background())
	var b *float64
	if err := c.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::float8 FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&b); err != nil || b == nil {
		return math.NaN()
	}
	return *b / (1 << 20)
}
