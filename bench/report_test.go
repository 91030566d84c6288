package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func keys(m map[string]any) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// TestJSONShape pins the --json file's shape, which other tools read.
func TestJSONShape(t *testing.T) {
	rep := &Report{
		Runs: []Result{{Mode: "wal", Rate: 2000, Events: 60000, ThroughputEPS: 1999.5,
			Latency: Latency{P50: 0.3, P90: 0.5, P99: 2, P999: 5, Max: 9}, RelayCPUS: 3.2, RelayPeakRSSMB: 30.1,
			Lag: Latency{P99: 1}, Early: 3}},
		Drain: &Drain{Mode: "wal", Events: 100000, EventsPerS: 80000},
		Floor: &Floor{Method: floorMethod, Events: 60000},
	}
	path := filepath.Join(t.TempDir(), "sub", "r.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if got := keys(top); !slices.Equal(got, []string{"drain", "floor", "runs"}) {
		t.Fatalf("top-level keys %v", got)
	}
	run := top["runs"].([]any)[0].(map[string]any)
	want := []string{"events", "latency_ms", "mode", "poll_interval_ms", "rate", "relay_cpu_s", "relay_peak_rss_mb", "throughput_eps"}
	if got := keys(run); !slices.Equal(got, want) {
		t.Fatalf("run keys %v, want %v", got, want)
	}
	if got := keys(run["latency_ms"].(map[string]any)); !slices.Equal(got, []string{"max", "p50", "p90", "p99", "p999"}) {
		t.Fatalf("latency keys %v", got)
	}
	if run["mode"] != "wal" || run["poll_interval_ms"] != 0.0 || run["rate"] != 2000.0 || run["events"] != 60000.0 {
		t.Errorf("run values %v", run)
	}
	if p50 := run["latency_ms"].(map[string]any)["p50"]; p50 != 0.3 {
		t.Errorf("p50 %v", p50)
	}
	for _, k := range []string{"events", "events_per_s", "floor_events_per_s", "ratio_to_floor", "relay_peak_rss_mb"} {
		if _, ok := top["drain"].(map[string]any)[k]; !ok {
			t.Errorf("drain has no %q", k)
		}
	}
	for _, k := range []string{"latency_ms", "drain_events_per_s", "events"} {
		if _, ok := top["floor"].(map[string]any)[k]; !ok {
			t.Errorf("floor has no %q", k)
		}
	}

	var none map[string]any
	b, _ = json.Marshal(&Report{})
	json.Unmarshal(b, &none)
	if got := keys(none); !slices.Equal(got, []string{"drain", "floor", "runs"}) {
		t.Errorf("empty report keys %v", got)
	}
}

func TestTable(t *testing.T) {
	rep := &Report{Runs: []Result{{Mode: "poll", PollIntervalMS: 500, Rate: 100, Events: 10}}, Failed: []string{"x: y"}}
	var b strings.Builder
	rep.WriteTable(&b)
	for _, s := range []string{"poll 500ms", "p99.9 ms", "FAILED: x: y"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
}

func TestTrackerEarlyAndDuplicates(t *testing.T) {
	tr := newTracker()
	tr.register([]string{"a", "b"}, false)
	tr.register([]string{"w"}, true)
	t0 := time.Now()
	tr.consumed("a", t0) // before COMMIT returned
	tr.commit([]string{"a", "b"}, t0.Add(time.Millisecond))
	tr.consumed("b", t0.Add(3*time.Millisecond))
	tr.consumed("b", t0.Add(4*time.Millisecond)) // duplicate
	tr.consumed("w", t0)                         // warm-up
	tr.consumed("zzz", t0)                       // not ours
	st := tr.state()
	if st.committed != 2 || st.delivered != 2 || st.early != 1 || st.dups != 1 || !st.warmSeen {
		t.Errorf("state %+v", st)
	}
	lat := tr.latencies()
	slices.Sort(lat)
	if !slices.Equal(lat, []time.Duration{0, 2 * time.Millisecond}) {
		t.Errorf("latencies %v, want [0 2ms]", lat)
	}
}

func TestEventID(t *testing.T) {
	structured := &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"5f0c6a4e-8a53-4a5e-9d7b-6c1f2e3d4b5a","data":{"id":"x"}}`)}
	if got := eventID(structured); got != "5f0c6a4e-8a53-4a5e-9d7b-6c1f2e3d4b5a" {
		t.Errorf("structured: %q", got)
	}
	binary := &kgo.Record{Value: []byte(`{"id":"payload"}`), Headers: []kgo.RecordHeader{{Key: "ce_id", Value: []byte("abc")}}}
	if got := eventID(binary); got != "abc" {
		t.Errorf("binary: %q", got)
	}
	if got := eventID(&kgo.Record{Value: []byte(`{}`)}); got != "" {
		t.Errorf("none: %q", got)
	}
}

func TestUUIDAndPayload(t *testing.T) {
	u := newUUID()
	if len(u) != 36 || u[14] != '4' || !strings.Contains("89ab", string(u[19])) {
		t.Errorf("newUUID() = %q", u)
	}
	if p := payloadOf(200); len(p) != 200 || !json.Valid([]byte(p)) {
		t.Errorf("payloadOf(200) has %d bytes, valid %v", len(p), json.Valid([]byte(p)))
	}
}

func TestReadUsage(t *testing.T) {
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.PeakRSS < 1<<20 {
		t.Errorf("peak RSS of this test binary %d bytes; want at least 1 MiB", u.PeakRSS)
	}
}
