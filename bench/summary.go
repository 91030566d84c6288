package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Spread is one figure over a run's rounds: the median and the range.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// spreadOf returns the median (of an even count, the mean of the middle
// two) and the range of vs.
func spreadOf(vs []float64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[n-1]}
}

// Overlaps reports whether two spreads share a value.
func (s Spread) Overlaps(o Spread) bool { return s.Min <= o.Max && o.Min <= s.Max }

func (s Spread) String() string {
	if s.Min == s.Max {
		return fmt.Sprintf("%.2f", s.Median)
	}
	return fmt.Sprintf("%.2f (%.2f-%.2f)", s.Median, s.Min, s.Max)
}

// Summary is one run's figures at one rate over its rounds (Config.Repeat):
// the median and the range of each.
type Summary struct {
	Rate   float64 `json:"rate"`
	Run    string  `json:"run"` // a Result's Label, or "floor"
	Rounds int     `json:"rounds"`
	Events int     `json:"events"` // the fewest of a round
	P50    Spread  `json:"p50_ms"`
	P99    Spread  `json:"p99_ms"`
	// Latency is the median of each quantile over the rounds.
	Latency       Latency `json:"latency_ms"`
	CPUUSPerEvent Spread  `json:"cpu_us_per_event"`
	IdleCPUPct    Spread  `json:"idle_cpu_pct"`
}

// summarize groups the rounds of each run and of the floor by rate, in the
// order they first appear.
func summarize(runs []Result, floors []Floor) []Summary {
	type key struct {
		rate float64
		run  string
	}
	type figures struct{ p50, p90, p99, p999, max, cpu, idle []float64 }
	var order []key
	byKey := map[key]*figures{}
	events := map[key]int{}
	add := func(k key, events_ int, l Latency, cpu, idle float64) {
		f, ok := byKey[k]
		if !ok {
			f = &figures{}
			byKey[k] = f
			order = append(order, k)
			events[k] = events_
		}
		events[k] = min(events[k], events_)
		f.p50, f.p90, f.p99 = append(f.p50, l.P50), append(f.p90, l.P90), append(f.p99, l.P99)
		f.p999, f.max = append(f.p999, l.P999), append(f.max, l.Max)
		f.cpu, f.idle = append(f.cpu, cpu), append(f.idle, idle)
	}
	for _, r := range runs {
		add(key{r.Rate, r.Label()}, r.Events, r.Latency, r.RelayCPUUSPerEvent, r.IdleCPUPct)
	}
	for _, f := range floors {
		add(key{f.Rate, "floor"}, f.Events, f.Latency, f.CPUUSPerEvent, f.IdleCPUPct)
	}
	// Each rate's runs together, rates in the order they first appear.
	var rates []float64
	for _, k := range order {
		if !slices.Contains(rates, k.rate) {
			rates = append(rates, k.rate)
		}
	}
	var out []Summary
	for _, rate := range rates {
		for _, k := range order {
			if k.rate != rate {
				continue
			}
			f := byKey[k]
			out = append(out, Summary{Rate: k.rate, Run: k.run, Rounds: len(f.p50), Events: events[k],
				P50: spreadOf(f.p50), P99: spreadOf(f.p99), CPUUSPerEvent: spreadOf(f.cpu), IdleCPUPct: spreadOf(f.idle),
				Latency: Latency{P50: spreadOf(f.p50).Median, P90: spreadOf(f.p90).Median, P99: spreadOf(f.p99).Median,
					P999: spreadOf(f.p999).Median, Max: spreadOf(f.max).Median}})
		}
	}
	return out
}

// Find returns the summary of a run at a rate, or nil.
func (r *Report) Find(rate float64, run string) *Summary {
	for i := range r.Summary {
		if r.Summary[i].Rate == rate && r.Summary[i].Run == run {
			return &r.Summary[i]
		}
	}
	return nil
}

// writeSummary writes each run's median and range over its rounds, when
// there was more than one.
func (r *Report) writeSummary(w io.Writer) {
	if !slices.ContainsFunc(r.Summary, func(s Summary) bool { return s.Rounds > 1 }) {
		return
	}
	fmt.Fprintln(w, "\nover the rounds: median (min-max)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\trun\trounds\tp50 ms\tp99 ms\tcpu us/event\tidle %\t")
	for _, s := range r.Summary {
		fmt.Fprintf(tw, "%.0f\t%s\t%d\t%s\t%s\t%s\t%s\t\n", s.Rate, s.Run, s.Rounds, s.P50, s.P99, s.CPUUSPerEvent, s.IdleCPUPct)
	}
	tw.Flush()
}
