package test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/bench"
	"github.com/pgoutbox/pgoutbox/test/nemesis"
)

// The soak: the relays run at a steady application load for an hour (or
// PGOUTBOX_SOAK_DURATION) with a fault every few minutes (PGOUTBOX_SOAK_GAP,
// default 3 minutes), and the relay's RSS, goroutines, open file
// descriptors, the slot's retained WAL and the commit-to-consume latency
// are sampled every PGOUTBOX_SOAK_EVERY (default 10 s). The run fails when
// one of them grows without bound (nemesis.SoakMetrics: the last quarter's
// median against the second quarter's) or when the checker finds a
// problem. It draws an SVG per series into PGOUTBOX_SOAK_OUT (default
// soak-out). It runs only when asked (make soak): an hour does not fit in
// make test.
func TestSoak(t *testing.T) {
	d := os.Getenv("PGOUTBOX_SOAK_DURATION")
	if d == "" {
		t.Skip("the soak runs when PGOUTBOX_SOAK_DURATION is set (make soak)")
	}
	duration, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("PGOUTBOX_SOAK_DURATION: %v", err)
	}
	every, gap := 10*time.Second, 3*time.Minute
	if v := os.Getenv("PGOUTBOX_SOAK_EVERY"); v != "" {
		if every, err = time.ParseDuration(v); err != nil {
			t.Fatalf("PGOUTBOX_SOAK_EVERY: %v", err)
		}
	}
	if v := os.Getenv("PGOUTBOX_SOAK_GAP"); v != "" {
		if gap, err = time.ParseDuration(v); err != nil {
			t.Fatalf("PGOUTBOX_SOAK_GAP: %v", err)
		}
	}
	out := os.Getenv("PGOUTBOX_SOAK_OUT")
	if out == "" {
		out = "../soak-out" // the repository root's, as make soak; go test runs in test/
	}
	if out, err = filepath.Abs(out); err != nil {
		t.Fatal(err)
	}
	seed := uint64(1)
	opts := nemesis.Options{Seed: seed, Delivery: nemesis.AtLeastOnce, Mode: nemesis.ModeAuto, Relays: 2,
		Duration: duration, MeanGap: gap, SoakEvery: every, Out: out,
		// An application's steady load: two writers, a transaction
		// every 20 ms each on average.
		Writer: nemesis.WriterConfig{Writers: 2, Pace: 20 * time.Millisecond}}
	if v := os.Getenv("PGOUTBOX_SOAK_DELIVERY"); v != "" {
		opts.Delivery = nemesis.Delivery(v)
	}
	res := runNemesis(t, opts, nemesisEnv(t, nemesisKafka(t, os.Getenv("PGOUTBOX_NEMESIS_BROKER")), true))
	for _, g := range res.Growth {
		t.Logf("%v", g)
	}
	if err := soakCharts(res, out); err != nil {
		t.Fatal(err)
	}
	t.Logf("soak of %v: %d samples; charts in %s", duration, len(res.Samples), out)
}

// soakCharts draws one SVG per metric, a line per relay, the faults as
// marks.
func soakCharts(res nemesis.Result, dir string) error {
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return err
	}
	evs, err := nemesis.ReadHistory(f)
	f.Close()
	if err != nil {
		return err
	}
	var start time.Time
	var marks []bench.Mark
	for _, e := range evs {
		if e.Type == nemesis.EventRun {
			start = e.Time.Add(-time.Duration(float64(e.T) * float64(time.Second)))
		}
		if e.Type == nemesis.EventFaultStart {
			marks = append(marks, bench.Mark{T: e.Time.Sub(start), Label: string(e.Fault.Kind)})
		}
	}
	for _, m := range nemesis.SoakMetrics {
		width := 0
		for _, s := range res.Samples {
			width = max(width, len(m.Value(s)))
		}
		var series []bench.TimeSeries
		for i := 0; i < width; i++ {
			name := m.Name
			if width > 1 {
				name = fmt.Sprintf("relay %d", i)
			}
			ts := bench.TimeSeries{Name: name}
			for _, s := range res.Samples {
				v := math.NaN()
				if vs := m.Value(s); i < len(vs) {
					v = vs[i]
				}
				ts.Points = append(ts.Points, bench.TimePoint{T: time.Duration(float64(s.T) * float64(time.Second)), V: v})
			}
			series = append(series, ts)
		}
		title := fmt.Sprintf("%s over a %v soak (%s, mode %s)", m.Name, res.Schedule.Config.Duration, res.Delivery, res.Mode)
		file := filepath.Join(dir, "soak-"+strings.ReplaceAll(m.Name, " ", "-")+".svg")
		w, err := os.Create(file)
		if err != nil {
			return err
		}
		err = bench.WriteTimeSVG(w, title, m.Unit, series, marks)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
