package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a bench run measured. Its JSON form is the --json file.
type Report struct {
	Runs  []Result `json:"runs"`
	Drain *Drain   `json:"drain"`
	Floor *Floor   `json:"floor"`

	// Series are the latency samples behind Runs and Floor, for the chart.
	Series []Series `json:"-"`
	// Failed names the runs that could not be measured, and why.
	Failed []string `json:"-"`
}

// Result is one steady-load run of the relay in one mode.
type Result struct {
	Mode           string  `json:"mode"`
	PollIntervalMS float64 `json:"poll_interval_ms"`
	Rate           float64 `json:"rate"`
	Events         int     `json:"events"`
	ThroughputEPS  float64 `json:"throughput_eps"`
	Latency        Latency `json:"latency_ms"`
	RelayCPUS      float64 `json:"relay_cpu_s"`
	RelayPeakRSSMB float64 `json:"relay_peak_rss_mb"`

	// Shown on stdout, kept out of the JSON's fixed shape.
	Lag     Latency `json:"-"` // how late transactions started, ms
	Early   int     `json:"-"` // consumed before COMMIT returned: latency 0
	Missing int     `json:"-"`
	Dups    int     `json:"-"`
}

// Label names the run in the table and the chart.
func (r Result) Label() string {
	if r.Mode == "poll" {
		return fmt.Sprintf("poll %s", time.Duration(r.PollIntervalMS*float64(time.Millisecond)))
	}
	return r.Mode
}

// Drain is a backlog of committed events published from a standing start.
type Drain struct {
	Mode             string  `json:"mode"`
	Events           int     `json:"events"`
	EventsPerTx      int     `json:"events_per_tx"`
	Seconds          float64 `json:"seconds"`
	EventsPerS       float64 `json:"events_per_s"`
	RelayCPUS        float64 `json:"relay_cpu_s"`
	RelayPeakRSSMB   float64 `json:"relay_peak_rss_mb"`
	FloorSeconds     float64 `json:"floor_seconds"`
	FloorEventsPerS  float64 `json:"floor_events_per_s"`
	RatioToFloor     float64 `json:"ratio_to_floor"`
	BacklogInsertEPS float64 `json:"backlog_insert_eps"`
}

// Floor is a bare logical-replication reader under the same load: what
// Postgres itself delivers, with nothing done to the events.
type Floor struct {
	Method          string  `json:"method"`
	Rate            float64 `json:"rate"`
	Events          int     `json:"events"`
	Latency         Latency `json:"latency_ms"`
	DrainEventsPerS float64 `json:"drain_events_per_s"`
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
	fmt.Fprintln(tw, "run\trate/s\tevents\tevents/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\trelay cpu s\tpeak rss MB\tlag p99 ms\t")
	for _, run := range r.Runs {
		l := run.Latency
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t\n",
			run.Label(), run.Rate, run.Events, run.ThroughputEPS, l.P50, l.P90, l.P99, l.P999, l.Max,
			run.RelayCPUS, run.RelayPeakRSSMB, run.Lag.P99)
	}
	if f := r.Floor; f != nil && f.Events > 0 {
		l := f.Latency
		fmt.Fprintf(tw, "floor\t%.0f\t%d\t-\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t-\t-\t-\t\n",
			f.Rate, f.Events, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	tw.Flush()
	for _, run := range r.Runs {
		if run.Early > 0 || run.Missing > 0 || run.Dups > 0 {
			fmt.Fprintf(w, "%s: %d consumed before COMMIT returned (counted as 0 ms), %d missing, %d duplicates\n",
				run.Label(), run.Early, run.Missing, run.Dups)
		}
	}
	if d := r.Drain; d != nil {
		fmt.Fprintf(w, "\ndrain (%s): %d events (%d per transaction) in %.2f s = %.0f events/s; relay cpu %.2f s, peak rss %.1f MB\n",
			d.Mode, d.Events, d.EventsPerTx, d.Seconds, d.EventsPerS, d.RelayCPUS, d.RelayPeakRSSMB)
		if d.FloorEventsPerS > 0 {
			fmt.Fprintf(w, "drain (floor): %.2f s = %.0f events/s; the relay reaches %.0f%% of the floor\n",
				d.FloorSeconds, d.FloorEventsPerS, 100*d.RatioToFloor)
		}
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
}

// label for a mode and poll interval, before a Run exists.
func runLabel(mode string, poll time.Duration) string {
	if mode == "poll" {
		return "poll " + poll.String()
	}
	return mode
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
