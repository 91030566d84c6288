package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
			EventsPerTx: Range{1, 3}, Aggregates: 200, Committed: 60000, RelayCPUUSPerEvent: 53.3, IdleCPUPct: 41.5,
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
	want := []string{"aggregates", "committed", "duplicates", "events", "events_per_tx", "idle_cpu_pct", "latency_ms", "missing", "mode",
		"order_violations", "poll_interval_ms", "rate", "relay_cpu_s", "relay_cpu_us_per_event", "relay_peak_rss_mb", "throughput_eps"}
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
	if run["events_per_tx"] != "1-3" || run["aggregates"] != 200.0 || run["relay_cpu_us_per_event"] != 53.3 || run["idle_cpu_pct"] != 41.5 {
		t.Errorf("load shape and cpu %v", run)
	}
	if _, ok := top["sweep"]; ok {
		t.Errorf("a single-rate report has a sweep: %s", b)
	}
	for _, k := range []string{"events", "events_per_s", "floor_events_per_s", "ratio_to_floor", "relay_peak_rss_mb"} {
		if _, ok := top["drain"].(map[string]any)[k]; !ok {
			t.Errorf("drain has no %q", k)
		}
	}
	for _, k := range []string{"latency_ms", "drain_events_per_s", "events", "cpu_us_per_event", "idle_cpu_pct"} {
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
	for _, s := range []string{"poll 500ms", "p99.9 ms", "FAILED: x: y", "cpu us/event", "idle %"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
	if strings.Contains(b.String(), "sweep") {
		t.Errorf("a single-rate table has a sweep:\n%s", b.String())
	}
}

// sweepReport is a sweep at two rates, WAL and the floor, with the floor
// missing at the second rate (its run failed).
func sweepReport() *Report {
	runs := []Result{
		{Mode: "wal", Rate: 500, Events: 1000, Latency: Latency{P50: 0.4, P99: 1.2}, RelayCPUUSPerEvent: 90, IdleCPUPct: 70},
		{Mode: "wal", Rate: 8000, Events: 16000, Latency: Latency{P50: 3.5, P99: 40}, RelayCPUUSPerEvent: 45, IdleCPUPct: 3},
	}
	floors := []Floor{{Rate: 500, Events: 1000, Latency: Latency{P50: 0.1, P99: 0.4}, CPUUSPerEvent: 20, IdleCPUPct: 80}}
	rep := &Report{Runs: runs, Floors: floors, Floor: &floors[0], Summary: summarize(runs, floors)}
	rep.Sweep = buildSweep(rep.Summary)
	return rep
}

func TestSweepReport(t *testing.T) {
	rep := sweepReport()
	if len(rep.Sweep) != 2 || rep.Sweep[0].Rate != 500 || rep.Sweep[1].Rate != 8000 {
		t.Fatalf("sweep %+v", rep.Sweep)
	}
	if got := rep.Sweep[0].Runs; len(got) != 2 || got[0].Run != "wal" || got[1].Run != "floor" ||
		got[0].CPUUSPerEvent != 90 || got[1].CPUUSPerEvent != 20 || got[1].Latency.P99 != 0.4 {
		t.Errorf("at 500/s: %+v", got)
	}
	if got := rep.Sweep[1].Runs; len(got) != 1 || got[0].Run != "wal" || got[0].IdleCPUPct != 3 {
		t.Errorf("at 8000/s: %+v", got)
	}

	var b strings.Builder
	rep.WriteTable(&b)
	out := b.String()
	i := strings.Index(out, "sweep: latency and CPU per event against the offered rate")
	if i < 0 {
		t.Fatalf("no sweep table:\n%s", out)
	}
	var lines []string
	for _, l := range strings.Split(out[i:], "\n")[2:] {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"500 wal 1000 0.40 1.20 90.0 70 3.0", // p99 three times the floor's
		"500 floor 1000 0.10 0.40 20.0 80 -",
		"8000 wal 16000 3.50 40.00 45.0 3 -", // no floor to compare with
	}
	if !slices.Equal(lines, want) {
		t.Errorf("sweep rows\n%q\nwant\n%q", lines, want)
	}
	// The main table: each rate's relay run, then its floor.
	main := out[:i]
	if a, f, c := strings.Index(main, "wal     500"), strings.Index(main, "floor     500"), strings.Index(main, "wal    8000"); a < 0 || f < a || c < f {
		t.Errorf("main table out of order (%d %d %d):\n%s", a, f, c, main)
	}

	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Sweep []struct {
			Rate float64 `json:"rate"`
			Runs []struct {
				Run           string  `json:"run"`
				CPUUSPerEvent float64 `json:"cpu_us_per_event"`
				IdleCPUPct    float64 `json:"idle_cpu_pct"`
				Latency       Latency `json:"latency_ms"`
			} `json:"runs"`
		} `json:"sweep"`
	}
	if err := json.Unmarshal(js, &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Sweep) != 2 || top.Sweep[0].Runs[1].Run != "floor" || top.Sweep[0].Runs[1].Latency.P50 != 0.1 {
		t.Errorf("sweep JSON %s", js)
	}

	rs := rep.RateSeries()
	if len(rs) != 2 || rs[0].Name != "wal" || len(rs[0].Points) != 2 || rs[1].Name != "floor" || len(rs[1].Points) != 1 ||
		rs[0].Points[1] != (RatePoint{Rate: 8000, P50: 3.5, P99: 40}) {
		t.Errorf("rate series %+v", rs)
	}
}

func TestRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Range
		err  bool
	}{
		{in: "1", want: Range{1, 1}},
		{in: "1-3", want: Range{1, 3}},
		{in: " 2 - 5 ", want: Range{2, 5}},
		{in: "4-4", want: Range{4, 4}},
		{in: "0", err: true},
		{in: "3-1", err: true},
		{in: "-2", err: true},
		{in: "1-", err: true},
		{in: "a-b", err: true},
		{in: "1-2-3", err: true},
		{in: "", err: true},
	} {
		got, err := ParseRange(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	r := Range{1, 3}
	if r.String() != "1-3" || (Range{2, 2}).String() != "2" || r.Mean() != 2 {
		t.Errorf("String %q, Mean %v", r.String(), r.Mean())
	}
	// Sizes in turn: any 3 consecutive transactions carry 1+2+3 events.
	var sizes []int
	for i := range 7 {
		sizes = append(sizes, r.At(i))
	}
	if !slices.Equal(sizes, []int{1, 2, 3, 1, 2, 3, 1}) {
		t.Errorf("sizes %v", sizes)
	}
	var v Range
	if err := v.Set("2-4"); err != nil || v != (Range{2, 4}) {
		t.Errorf("Set: %v %v", v, err)
	}
}

func TestAggregateOf(t *testing.T) {
	const n, txs = 200, 20000
	seen := make([]int, n)
	for i := range txs {
		a := aggregateOf(i, n)
		if a < 0 || a >= n {
			t.Fatalf("aggregateOf(%d) = %d", i, a)
		}
		if a != aggregateOf(i, n) {
			t.Fatalf("aggregateOf(%d) not deterministic", i)
		}
		seen[a]++
	}
	for a, c := range seen {
		if c < txs/n/2 || c > txs/n*2 {
			t.Errorf("aggregate %d chosen %d times of %d: not spread", a, c, txs)
		}
	}
	if aggregateOf(0, n) == aggregateOf(1, n) && aggregateOf(1, n) == aggregateOf(2, n) {
		t.Errorf("consecutive transactions share an aggregate")
	}
}

func TestCPUTimes(t *testing.T) {
	t0, err := parseCPUTimes("cpu  100 5 50 800 40 3 2 0 7 0")
	if err != nil {
		t.Fatal(err)
	}
	if t0 != (CPUTimes{Idle: 840, Total: 1000}) {
		t.Errorf("parsed %+v", t0)
	}
	t1 := CPUTimes{Idle: 840 + 30, Total: 1000 + 200}
	if got := IdlePercent(t0, t1); got != 15 {
		t.Errorf("idle %v%%, want 15", got)
	}
	if got := IdlePercent(t0, t0); got != -1 {
		t.Errorf("idle over no time %v, want -1", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4", "cpu 1 x 3 4"} {
		if _, err := parseCPUTimes(bad); err == nil {
			t.Errorf("parseCPUTimes(%q) accepted", bad)
		}
	}
	now, err := ReadCPUTimes()
	if err != nil || now.Total == 0 || now.Idle > now.Total {
		t.Errorf("ReadCPUTimes() = %+v, %v", now, err)
	}
}

func TestReadThreadsCPU(t *testing.T) {
	// The spin runs on one thread that stays alive, measured by the kernel's
	// own account of that thread (getrusage RUSAGE_THREAD), so that a busy
	// machine slows the spin but cannot make the two readings disagree.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const rusageThread = 1 // RUSAGE_THREAD on Linux
	threadCPU := func() time.Duration {
		t.Helper()
		var ru syscall.Rusage
		if err := syscall.Getrusage(rusageThread, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, err := ReadThreadsCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	spin0 := threadCPU()
	var spun time.Duration
	for deadline := time.Now().Add(10 * time.Second); spun < 30*time.Millisecond && time.Now().Before(deadline); {
		spun = threadCPU() - spin0
	}
	c1, err := ReadThreadsCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if spun < 30*time.Millisecond {
		t.Fatalf("the spin got %s of CPU in 10 s", spun)
	}
	// Every thread is summed, the spinning one included: the reading grows
	// by at least what that thread ran (less rusage's microsecond rounding).
	if c1-c0 < spun-time.Millisecond {
		t.Errorf("a thread that ran %s read as %s of CPU", spun, c1-c0)
	}
}

func TestFloorLines(t *testing.T) {
	var got []string
	w := &floorLines{fn: func(id string, at time.Time) { got = append(got, id+"@"+strconv.FormatInt(at.UnixNano(), 10)) }}
	for _, chunk := range []string{"a 1\nb ", "2\n", "junk\nc 3", "\n"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write %d, %v", n, err)
		}
	}
	if !slices.Equal(got, []string{"a@1", "b@2", "c@3"}) || w.bad != 1 {
		t.Errorf("got %v, %d bad", got, w.bad)
	}
}

func TestTrackerEarlyAndDuplicates(t *testing.T) {
	tr := newTracker()
	tr.register([]string{"a", "b"}, false)
	tr.register([]string{"w", "w2", "w3"}, true)
	t0 := time.Now()
	tr.consumed("a", t0) // before COMMIT returned
	tr.commit([]string{"a", "b"}, t0.Add(time.Millisecond))
	tr.consumed("b", t0.Add(3*time.Millisecond))
	tr.consumed("b", t0.Add(4*time.Millisecond)) // duplicate
	tr.consumed("w", t0)                         // warm-up
	tr.consumedFrom("w2", 2, t0)                 // warm-up, on another partition
	tr.consumedFrom("w3", 0, t0)                 // warm-up, on the first one's
	tr.consumed("zzz", t0)                       // not ours
	st := tr.state()
	if st.committed != 2 || st.delivered != 2 || st.early != 1 || st.dups != 1 || st.warmParts != 2 {
		t.Errorf("state %+v", st)
	}
	lat := tr.latencies()
	slices.Sort(lat)
	if !slices.Equal(lat, []time.Duration{0, 2 * time.Millisecond}) {
		t.Errorf("latencies %v, want [0 2ms]", lat)
	}
}

// The checker counts an event consumed after a later event of its
// aggregate, whichever transactions they came in; other aggregates and
// duplicates do not count.
func TestTrackerOrder(t *testing.T) {
	tr := newTracker()
	t0 := time.Now()
	for _, tx := range []struct {
		ids     []string
		agg     string
		version int64
	}{{[]string{"a1", "a2"}, "A", 1}, {[]string{"a3"}, "A", 2}, {[]string{"b1"}, "B", 7}} {
		tr.register(tx.ids, false)
		tr.order(tx.ids, tx.agg, tx.version)
		tr.commit(tx.ids, t0)
	}
	for _, id := range []string{"b1", "a1", "a3", "a2", "a2", "a3"} {
		tr.consumed(id, t0.Add(time.Millisecond))
	}
	if st := tr.state(); st.outOfOrder != 1 || st.dups != 2 || st.delivered != 4 {
		t.Errorf("state %+v, want 1 out of order (a2 after a3), 2 duplicates", st)
	}
}

func TestEventID(t *testing.T) {
	h := func(k, v string) []kgo.RecordHeader { return []kgo.RecordHeader{{Key: k, Value: []byte(v)}} }
	for _, tc := range []struct {
		name    string
		headers []kgo.RecordHeader
		value   string
		want    string
	}{
		{"structured", nil, `{"specversion":"1.0","id":"5f0c6a4e-8a53-4a5e-9d7b-6c1f2e3d4b5a","data":{"id":"x"}}`, "5f0c6a4e-8a53-4a5e-9d7b-6c1f2e3d4b5a"},
		{"binary, Kafka", h("ce_id", "abc"), `{"id":"payload"}`, "abc"},
		{"binary, NATS", h("ce-id", "abc"), `{"id":"payload"}`, "abc"},
		{"Debezium's outbox router", h("id", "def"), `"{\"id\": 1}"`, "def"},
		{"the router's id header as JsonConverter writes it", h("id", `"def"`), `{}`, "def"},
		{"the same with its schema", h("id", `{"schema":{"type":"string","optional":false},"payload":"def"}`), `{}`, "def"},
		{"none", nil, `{}`, ""},
	} {
		if got := eventID(tc.headers, []byte(tc.value)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
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

// TestSummaryOverRounds: three rounds of two runs at one rate and one of
// another; the median, the range, the fewest events, and the table.
func TestSummaryOverRounds(t *testing.T) {
	wal := func(round int, p99, cpu float64) Result {
		return Result{Mode: "wal", Rate: 2000, Round: round, Events: 1000 + round, Latency: Latency{P50: 1, P99: p99}, RelayCPUUSPerEvent: cpu, IdleCPUPct: 20}
	}
	runs := []Result{
		wal(0, 9, 70), {System: "debezium", Rate: 2000, Events: 900, Latency: Latency{P99: 30}},
		wal(1, 5, 60), {System: "debezium", Rate: 2000, Round: 1, Events: 950, Latency: Latency{P99: 20}},
		wal(2, 7, 80), {System: "debezium", Rate: 2000, Round: 2, Events: 990, Latency: Latency{P99: 40}},
		{Mode: "wal", Rate: 500, Events: 100, Latency: Latency{P99: 2}},
	}
	floors := []Floor{{Rate: 2000, Events: 1000, Latency: Latency{P99: 1}}, {Rate: 2000, Round: 1, Events: 1000, Latency: Latency{P99: 3}}}
	sum := summarize(runs, floors)
	got := make([]string, len(sum))
	for i, s := range sum {
		got[i] = fmt.Sprintf("%g %s n=%d events=%d p99=%s cpu=%s", s.Rate, s.Run, s.Rounds, s.Events, s.P99, s.CPUUSPerEvent)
	}
	want := []string{
		"2000 wal n=3 events=1000 p99=7.00 (5.00-9.00) cpu=70.00 (60.00-80.00)",
		"2000 debezium n=3 events=900 p99=30.00 (20.00-40.00) cpu=0.00",
		"2000 floor n=2 events=1000 p99=2.00 (1.00-3.00) cpu=0.00",
		"500 wal n=1 events=100 p99=2.00 cpu=0.00",
	}
	if !slices.Equal(got, want) {
		t.Errorf("summary\n%q\nwant\n%q", got, want)
	}
	if sum[0].P99.Overlaps(sum[1].P99) || !sum[0].P99.Overlaps(Spread{Min: 8, Max: 12}) {
		t.Errorf("overlaps: %v and %v", sum[0].P99, sum[1].P99)
	}
	rep := &Report{Runs: runs, Summary: sum}
	var b strings.Builder
	rep.WriteTable(&b)
	if !strings.Contains(b.String(), "over the rounds: median (min-max)") {
		t.Errorf("no summary table:\n%s", b.String())
	}
}
