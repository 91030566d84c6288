package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a bench run measured. Its JSON form is the --json file.
type Report struct {
	// Runs are the relay's steady-load runs, at every rate.
	Runs []Result `json:"runs"`
	// Drain is the first delivery's drain; Drains, each delivery's.
	Drain  *Drain  `json:"drain"`
	Drains []Drain `json:"drains,omitempty"`
	// Floor is the floor at the first (or only) rate; Floors, the floor at
	// every rate, in the order of the rates.
	Floor  *Floor  `json:"floor"`
	Floors []Floor `json:"-"`
	// Sweep, with more than one rate, puts each rate's runs side by side
	// (the medians of their rounds).
	Sweep []SweepPoint `json:"sweep,omitempty"`
	// Summary has each run's median and range over its rounds, per rate.
	Summary []Summary `json:"summary,omitempty"`

	// Series are the latency samples behind Runs and Floor, for the chart.
	Series []Series `json:"-"`
	// Failed names the runs that could not be measured, and why.
	Failed []string `json:"-"`
}

// Result is one steady-load run of the relay in one mode.
type Result struct {
	Mode           string  `json:"mode"`
	Delivery       string  `json:"delivery,omitempty"`
	Relay          string  `json:"relay,omitempty"`  // the binary's name, with --relay-bin
	System         string  `json:"system,omitempty"` // a System's name: not pgoutbox
	PollIntervalMS float64 `json:"poll_interval_ms"`
	Rate           float64 `json:"rate"`
	Events         int     `json:"events"`
	ThroughputEPS  float64 `json:"throughput_eps"`
	Latency        Latency `json:"latency_ms"`
	RelayCPUS      float64 `json:"relay_cpu_s"`
	RelayPeakRSSMB float64 `json:"relay_peak_rss_mb"`
	// The load's shape: events per transaction, and the number of
	// aggregates each transaction locks one of first (0: none).
	EventsPerTx Range `json:"events_per_tx"`
	Aggregates  int   `json:"aggregates"`
	// Committed events; Events of them were consumed.
	Committed int `json:"committed"`
	// Round is the run's round of Config.Repeat, from 0.
	Round int `json:"round,omitempty"`
	// The relay's CPU time over the measured window (from the load's start
	// to the last event consumed) per event, and how much of the
	// machine's CPU time was idle in that window: near 0, the machine was
	// saturated and every figure of the run with it.
	RelayCPUUSPerEvent float64 `json:"relay_cpu_us_per_event"`
	IdleCPUPct         float64 `json:"idle_cpu_pct"`

	// The checker: events committed and not consumed, consumed more than
	// once, and consumed after a later event of their aggregate (where
	// the load orders an aggregate's events: --aggregates).
	Missing         int `json:"missing"`
	Dups            int `json:"duplicates"`
	OrderViolations int `json:"order_violations"`

	// Shown on stdout, kept out of the JSON's fixed shape.
	Lag   Latency `json:"-"` // how late transactions started, ms
	Early int     `json:"-"` // consumed before COMMIT returned: latency 0
}

// Label names the run in the table and the chart.
func (r Result) Label() string {
	if r.System != "" {
		return r.System
	}
	return withRelay(runLabel(r.Mode, time.Duration(r.PollIntervalMS*float64(time.Millisecond)), r.Delivery), r.Relay)
}

// Drain is a backlog of committed events published from a standing start.
type Drain struct {
	Mode             string  `json:"mode"`
	Delivery         string  `json:"delivery,omitempty"`
	Relay            string  `json:"relay,omitempty"`
	System           string  `json:"system,omitempty"`
	Events           int     `json:"events"`
	EventsPerTx      int     `json:"events_per_tx"`
	Seconds          float64 `json:"seconds"`
	EventsPerS       float64 `json:"events_per_s"`
	RelayCPUS        float64 `json:"relay_cpu_s"`
	CPUUSPerEvent    float64 `json:"relay_cpu_us_per_event"`
	RelayPeakRSSMB   float64 `json:"relay_peak_rss_mb"`
	Missing          int     `json:"missing"`
	Dups             int     `json:"duplicates"`
	OrderViolations  int     `json:"order_violations"`
	FloorSeconds     float64 `json:"floor_seconds"`
	FloorEventsPerS  float64 `json:"floor_events_per_s"`
	RatioToFloor     float64 `json:"ratio_to_floor"`
	BacklogInsertEPS float64 `json:"backlog_insert_eps"`
}

// label names the drain's relay.
func (d Drain) label() string {
	if d.System != "" {
		return d.System
	}
	mode := d.Mode
	if d.Delivery == exactlyOnce {
		mode += ", " + exactlyOnce
	}
	return withRelay(mode, d.Relay)
}

// Floor is a bare logical-replication reader under the same load: what
// Postgres itself delivers, with nothing done to the events.
type Floor struct {
	Method          string  `json:"method"`
	Rate            float64 `json:"rate"`
	EventsPerTx     Range   `json:"events_per_tx"`
	Aggregates      int     `json:"aggregates"`
	Events          int     `json:"events"`
	Committed       int     `json:"committed"`
	Latency         Latency `json:"latency_ms"`
	CPUUSPerEvent   float64 `json:"cpu_us_per_event"` // the floor process's, as the relay's
	IdleCPUPct      float64 `json:"idle_cpu_pct"`
	DrainEventsPerS float64 `json:"drain_events_per_s"`
	Round           int     `json:"round,omitempty"`
}

// SweepPoint is one offered rate of a sweep: each relay run and the floor.
type SweepPoint struct {
	Rate float64    `json:"rate"`
	Runs []SweepRun `json:"runs"`
}

// SweepRun is one run at a sweep's rate: "wal", "poll 500ms" or "floor".
type SweepRun struct {
	Run           string  `json:"run"`
	Events        int     `json:"events"`
	Latency       Latency `json:"latency_ms"`
	CPUUSPerEvent float64 `json:"cpu_us_per_event"`
	IdleCPUPct    float64 `json:"idle_cpu_pct"`
}

// buildSweep groups the runs' medians by rate, in the order rates first
// appear.
func buildSweep(sum []Summary) []SweepPoint {
	var pts []SweepPoint
	for _, r := range sum {
		if len(pts) == 0 || pts[len(pts)-1].Rate != r.Rate {
			pts = append(pts, SweepPoint{Rate: r.Rate})
		}
		p := &pts[len(pts)-1]
		p.Runs = append(p.Runs, SweepRun{Run: r.Run, Events: r.Events, Latency: r.Latency,
			CPUUSPerEvent: r.CPUUSPerEvent.Median, IdleCPUPct: r.IdleCPUPct.Median})
	}
	return pts
}

// RateSeries are a sweep's points for one run label, for the rate chart.
func (r *Report) RateSeries() []RateSeries {
	var out []RateSeries
	for _, p := range r.Sweep {
		for _, run := range p.Runs {
			i := slices.IndexFunc(out, func(s RateSeries) bool { return s.Name == run.Run })
			if i < 0 {
				out = append(out, RateSeries{Name: run.Run})
				i = len(out) - 1
			}
			if run.Events > 0 {
				out[i].Points = append(out[i].Points, RatePoint{Rate: p.Rate, P50: run.Latency.P50, P99: run.Latency.P99})
			}
		}
	}
	return out
}

// Series is one latency distribution for the chart.
type Series struct {
	Name      string
	Latencies []time.Duration
}

// WriteJSON writes r to path, creating its directory.
func (r *Report) WriteJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable writes the results as aligned text.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\trate/s\tevents\tevents/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\trelay cpu s\tcpu us/event\tidle %\tpeak rss MB\tlag p99 ms\tlost/dup/order\t")
	row := func(run Result) {
		l := run.Latency
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.0f\t%.1f\t%.2f\t%d/%d/%d\t\n",
			run.Label(), run.Rate, run.Events, run.ThroughputEPS, l.P50, l.P90, l.P99, l.P999, l.Max,
			run.RelayCPUS, run.RelayCPUUSPerEvent, run.IdleCPUPct, run.RelayPeakRSSMB, run.Lag.P99,
			run.Missing, run.Dups, run.OrderViolations)
	}
	floorRow := func(f Floor) {
		if f.Events == 0 {
			return
		}
		l := f.Latency
		fmt.Fprintf(tw, "floor\t%.0f\t%d\t-\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t-\t%.1f\t%.0f\t-\t-\t-\t\n",
			f.Rate, f.Events, l.P50, l.P90, l.P99, l.P999, l.Max, f.CPUUSPerEvent, f.IdleCPUPct)
	}
	floors := r.Floors
	if len(floors) == 0 && r.Floor != nil {
		floors = []Floor{*r.Floor}
	}
	// Each rate's relay runs, then its floor.
	var rates []float64
	for _, run := range r.Runs {
		if !slices.Contains(rates, run.Rate) {
			rates = append(rates, run.Rate)
		}
	}
	for _, f := range floors {
		if !slices.Contains(rates, f.Rate) {
			rates = append(rates, f.Rate)
		}
	}
	for _, rate := range rates {
		for _, run := range r.Runs {
			if run.Rate == rate {
				row(run)
			}
		}
		for _, f := range floors {
			if f.Rate == rate {
				floorRow(f)
			}
		}
	}
	tw.Flush()
	for _, run := range r.Runs {
		if run.Early > 0 || run.Missing > 0 || run.Dups > 0 || run.OrderViolations > 0 {
			fmt.Fprintf(w, "%s at %.0f/s: %d consumed before COMMIT returned (counted as 0 ms), %d missing, %d duplicates, %d out of their aggregate's order\n",
				run.Label(), run.Rate, run.Early, run.Missing, run.Dups, run.OrderViolations)
		}
	}
	for _, f := range floors {
		if f.Committed > f.Events {
			fmt.Fprintf(w, "floor at %.0f/s: %d missing\n", f.Rate, f.Committed-f.Events)
		}
	}
	r.writeSummary(w)
	if len(r.Sweep) > 0 {
		r.writeSweep(w)
	}
	drains := r.Drains
	if len(drains) == 0 && r.Drain != nil {
		drains = []Drain{*r.Drain}
	}
	for i, d := range drains {
		if i == 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "drain (%s): %d events (%d per transaction) in %.2f s = %.0f events/s; relay cpu %.2f s (%.1f us per event), peak rss %.1f MB; %d missing, %d duplicates\n",
			d.label(), d.Events, d.EventsPerTx, d.Seconds, d.EventsPerS, d.RelayCPUS, d.CPUUSPerEvent, d.RelayPeakRSSMB, d.Missing, d.Dups)
		if d.FloorEventsPerS > 0 {
			fmt.Fprintf(w, "drain (floor): %.2f s = %.0f events/s; the relay reaches %.0f%% of the floor\n",
				d.FloorSeconds, d.FloorEventsPerS, 100*d.RatioToFloor)
		}
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
}

// writeSweep writes one line per rate: each run's p50, p99 and CPU per
// event, and the machine's idle share during the run.
func (r *Report) writeSweep(w io.Writer) {
	fmt.Fprintln(w, "\nsweep: latency and CPU per event against the offered rate")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\trun\tevents\tp50 ms\tp99 ms\tcpu us/event\tidle %\tp99 / floor p99\t")
	for _, p := range r.Sweep {
		var floorP99 float64
		for _, run := range p.Runs {
			if run.Run == "floor" {
				floorP99 = run.Latency.P99
			}
		}
		for _, run := range p.Runs {
			ratio := "-"
			if run.Run != "floor" && floorP99 > 0 {
				ratio = fmt.Sprintf("%.1f", run.Latency.P99/floorP99)
			}
			fmt.Fprintf(tw, "%.0f\t%s\t%d\t%.2f\t%.2f\t%.1f\t%.0f\t%s\t\n",
				p.Rate, run.Run, run.Events, run.Latency.P50, run.Latency.P99, run.CPUUSPerEvent, run.IdleCPUPct, ratio)
		}
	}
	tw.Flush()
}

// label for a mode, poll interval and delivery, before a Run exists.
func runLabel(mode string, poll time.Duration, delivery string) string {
	l := mode
	if mode == "poll" {
		l = "poll " + poll.String()
	}
	if delivery == exactlyOnce {
		l += " " + exactlyOnce
	}
	return l
}

// withRelay adds a relay binary's name, if any, to a label.
func withRelay(label, relay string) string {
	if relay == "" {
		return label
	}
	return label + " [" + relay + "]"
}

// slug turns a label into a name part: lower-case letters, digits and '_'.
func slug(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case c == '.':
			b.WriteByte('p')
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
