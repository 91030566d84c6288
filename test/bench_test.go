package test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// TestBenchCommand runs `pgoutbox bench` briefly in WAL mode against a real
// Postgres and broker: the relay runs as its own process, every event is
// accounted for, and the JSON, the table and the chart come out.
func TestBenchCommand(t *testing.T) {
	pg := pgcluster.New(t)
	kafka := kafkatest.New(t)
	bin := testenv.Bin(t)
	out := t.TempDir()
	jsonPath := filepath.Join(out, "r.json")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench",
		"--database-url", pg.URL, "--kafka-brokers", strings.Join(kafka.Brokers, ","),
		"--modes", "wal", "--rate", "300", "--duration", "2s", "--writers", "2", "--events-per-tx", "2",
		"--drain-events", "3000", "--json", jsonPath, "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgoutbox bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdout:\n%s", stdout.String())

	var rep struct {
		Runs []struct {
			Mode           string             `json:"mode"`
			Events         int                `json:"events"`
			ThroughputEPS  float64            `json:"throughput_eps"`
			Latency        map[string]float64 `json:"latency_ms"`
			RelayCPUS      float64            `json:"relay_cpu_s"`
			RelayPeakRSSMB float64            `json:"relay_peak_rss_mb"`
		} `json:"runs"`
		Drain struct {
			Events          int     `json:"events"`
			EventsPerS      float64 `json:"events_per_s"`
			FloorEventsPerS float64 `json:"floor_events_per_s"`
		} `json:"drain"`
		Floor struct {
			Events          int                `json:"events"`
			Latency         map[string]float64 `json:"latency_ms"`
			DrainEventsPerS float64            `json:"drain_events_per_s"`
		} `json:"floor"`
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].Mode != "wal" {
		t.Fatalf("runs: %s", b)
	}
	r := rep.Runs[0]
	if r.Events != 600 { // 300/s for 2 s
		t.Errorf("wal run consumed %d events, want 600", r.Events)
	}
	if r.Latency["p50"] <= 0 && r.Latency["max"] <= 0 || r.Latency["p50"] > r.Latency["p99"] || r.Latency["p99"] > r.Latency["max"] {
		t.Errorf("latency %v", r.Latency)
	}
	if r.RelayPeakRSSMB <= 1 || r.RelayCPUS <= 0 || r.ThroughputEPS <= 0 {
		t.Errorf("relay cpu %v s, rss %v MB, throughput %v", r.RelayCPUS, r.RelayPeakRSSMB, r.ThroughputEPS)
	}
	if rep.Floor.Events != 600 || rep.Drain.Events != 3000 || rep.Drain.EventsPerS <= 0 ||
		rep.Drain.FloorEventsPerS <= 0 || rep.Floor.DrainEventsPerS != rep.Drain.FloorEventsPerS {
		t.Errorf("floor and drain: %s", b)
	}
	if !strings.Contains(stdout.String(), "p99.9 ms") || !strings.Contains(stdout.String(), "drain (wal)") {
		t.Errorf("no table on stdout")
	}
	svg, err := os.ReadFile(filepath.Join(out, "latency.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("latency.svg: %v", err)
		}
	}
	// Nothing is left behind: no slot of the bench's.
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var slots int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'bench\\_%'").Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots != 0 {
		t.Errorf("%d bench slots left behind", slots)
	}
}

// TestBenchApplicationLoadSweep runs `pgoutbox bench` with an
// application's load (each transaction locks one of 20 aggregate rows,
// then inserts 1 to 3 events) at two rates: every event of the relay's
// runs and the floor's arrives, each run reports its CPU per event and the
// machine's idle CPU, the sweep lists both rates for the relay and the
// floor, and the aggregate rows were locked and the table dropped after.
func TestBenchApplicationLoadSweep(t *testing.T) {
	pg := pgcluster.New(t)
	kafka := kafkatest.New(t)
	bin := testenv.Bin(t)
	out := t.TempDir()
	jsonPath := filepath.Join(out, "r.json")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	updatedBefore := tuplesUpdated(t, ctx, conn)

	cmd := exec.CommandContext(ctx, bin, "bench",
		"--database-url", pg.URL, "--kafka-brokers", strings.Join(kafka.Brokers, ","),
		"--modes", "wal", "--rates", "150,300", "--duration", "2s", "--writers", "2",
		"--aggregates", "20", "--events-per-tx", "1-3",
		"--drain-events", "0", "--json", jsonPath, "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgoutbox bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdout:\n%s", stdout.String())

	type latency struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
		Max float64 `json:"max"`
	}
	var rep struct {
		Runs []struct {
			Mode        string  `json:"mode"`
			Rate        float64 `json:"rate"`
			EventsPerTx string  `json:"events_per_tx"`
			Aggregates  int     `json:"aggregates"`
			Events      int     `json:"events"`
			Committed   int     `json:"committed"`
			Latency     latency `json:"latency_ms"`
			CPUPerEvent float64 `json:"relay_cpu_us_per_event"`
			Idle        float64 `json:"idle_cpu_pct"`
		} `json:"runs"`
		Floor struct {
			Rate        float64 `json:"rate"`
			Events      int     `json:"events"`
			Committed   int     `json:"committed"`
			CPUPerEvent float64 `json:"cpu_us_per_event"`
			Idle        float64 `json:"idle_cpu_pct"`
		} `json:"floor"`
		Sweep []struct {
			Rate float64 `json:"rate"`
			Runs []struct {
				Run         string  `json:"run"`
				Events      int     `json:"events"`
				Latency     latency `json:"latency_ms"`
				CPUPerEvent float64 `json:"cpu_us_per_event"`
				Idle        float64 `json:"idle_cpu_pct"`
			} `json:"runs"`
		} `json:"sweep"`
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	// 150 events/s at 2 events per transaction on average for 2 s is 150
	// transactions of 1, 2, 3, 1, ... events: 300 events; 300/s, 600.
	want := map[float64]int{150: 300, 300: 600}
	if len(rep.Runs) != 2 {
		t.Fatalf("runs: %s", b)
	}
	for _, r := range rep.Runs {
		if r.Mode != "wal" || r.EventsPerTx != "1-3" || r.Aggregates != 20 {
			t.Errorf("run at %v: mode %q, events per tx %q, aggregates %d", r.Rate, r.Mode, r.EventsPerTx, r.Aggregates)
		}
		if r.Committed != want[r.Rate] || r.Events != r.Committed {
			t.Errorf("relay at %v/s: %d of %d committed events consumed, want %d", r.Rate, r.Events, r.Committed, want[r.Rate])
		}
		if r.CPUPerEvent <= 0 || r.CPUPerEvent > 1e6 || r.Idle < 0 || r.Idle > 100 {
			t.Errorf("relay at %v/s: %v us cpu per event, %v%% idle", r.Rate, r.CPUPerEvent, r.Idle)
		}
		if r.Latency.P50 > r.Latency.P99 || r.Latency.P99 > r.Latency.Max || r.Latency.Max <= 0 {
			t.Errorf("relay at %v/s: latency %+v", r.Rate, r.Latency)
		}
	}
	if f := rep.Floor; f.Rate != 150 || f.Events != 300 || f.Committed != 300 || f.CPUPerEvent <= 0 || f.Idle < 0 || f.Idle > 100 {
		t.Errorf("floor: %+v", f)
	}
	if len(rep.Sweep) != 2 {
		t.Fatalf("sweep: %s", b)
	}
	for _, p := range rep.Sweep {
		var names []string
		for _, r := range p.Runs {
			names = append(names, r.Run)
			if r.Events != want[p.Rate] || r.CPUPerEvent <= 0 || r.Idle < 0 || r.Idle > 100 || r.Latency.Max <= 0 {
				t.Errorf("sweep at %v/s, %s: %+v", p.Rate, r.Run, r)
			}
		}
		if strings.Join(names, ",") != "wal,floor" {
			t.Errorf("sweep at %v/s: runs %v", p.Rate, names)
		}
	}
	for _, s := range []string{"cpu us/event", "idle %", "sweep: latency and CPU per event against the offered rate", "1-3 events per transaction, each locking one of 20 aggregates first"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("stdout lacks %q", s)
		}
	}
	for _, name := range []string{"latency.svg", "rates.svg"} {
		svg, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(svg))
		for {
			if _, err := dec.Token(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if !bytes.Contains(svg, []byte("<polyline")) {
			t.Errorf("%s draws nothing", name)
		}
	}

	// Every transaction (four runs: the relay and the floor at each rate)
	// locked an aggregate row first: 2 × (150 + 300) updates at least.
	const txs = 2 * (150 + 300)
	deadline := time.Now().Add(30 * time.Second)
	for updated := tuplesUpdated(t, ctx, conn) - updatedBefore; updated < txs; updated = tuplesUpdated(t, ctx, conn) - updatedBefore {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows updated in the database during the bench; want at least %d aggregate locks", updated, txs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_tables WHERE tablename LIKE 'bench\_aggregates\_%')
		+ (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'bench\_%')`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d aggregate tables or slots left behind", left)
	}
}

// tuplesUpdated is the database's count of updated rows, from the
// cumulative statistics (flushed when a backend exits, or within a second).
func tuplesUpdated(t *testing.T, ctx context.Context, conn *pgx.Conn) int64 {
	t.Helper()
	if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT tup_updated FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBenchUnqualifiedTable runs `pgoutbox bench --table outbox`: an
// unqualified name is in schema public, as for `pgoutbox run`, for the
// outbox table the bench migrates and writes, its publication, and the
// aggregates table it creates beside it.
func TestBenchUnqualifiedTable(t *testing.T) {
	pg := pgcluster.New(t)
	kafka := kafkatest.New(t)
	bin := testenv.Bin(t)
	jsonPath := filepath.Join(t.TempDir(), "r.json")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench",
		"--database-url", pg.URL, "--kafka-brokers", strings.Join(kafka.Brokers, ","), "--table", "outbox",
		"--modes", "wal", "--rate", "200", "--duration", "1s", "--writers", "2", "--aggregates", "5",
		"--drain-events", "0", "--no-floor", "--json", jsonPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgoutbox bench --table outbox: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var rep struct {
		Runs []struct {
			Events int `json:"events"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].Events != 200 { // 200/s for 1 s
		t.Fatalf("runs: %s", b)
	}
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var outboxInPublic bool
	var otherSchemas int
	if err := conn.QueryRow(ctx, `SELECT to_regclass('public.outbox') IS NOT NULL,
  (SELECT count(*) FROM pg_namespace WHERE nspname = 'outbox')`).Scan(&outboxInPublic, &otherSchemas); err != nil {
		t.Fatal(err)
	}
	if !outboxInPublic || otherSchemas != 0 {
		t.Errorf("public.outbox exists: %v; schemas named outbox: %d", outboxInPublic, otherSchemas)
	}
}

// TestBenchDeliveryAxis runs `pgoutbox bench --delivery
// at-least-once,exactly-once` briefly in WAL mode: each delivery gets its
// steady-load run and its drain, every event arrives once to the bench's
// read_committed consumer, and the table names both.
func TestBenchDeliveryAxis(t *testing.T) {
	pg := pgcluster.New(t)
	kafka := kafkatest.New(t)
	bin := testenv.Bin(t)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench",
		"--database-url", pg.URL, "--kafka-brokers", strings.Join(kafka.Brokers, ","),
		"--modes", "wal", "--delivery", "at-least-once,exactly-once", "--rate", "300", "--duration", "2s", "--writers", "2",
		"--drain-events", "3000", "--no-floor", "--json", jsonPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgoutbox bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdout:\n%s", stdout.String())
	var rep struct {
		Runs []struct {
			Delivery string `json:"delivery"`
			Events   int    `json:"events"`
		} `json:"runs"`
		Drains []struct {
			Delivery string `json:"delivery"`
			Events   int    `json:"events"`
		} `json:"drains"`
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Delivery != "at-least-once" || rep.Runs[1].Delivery != "exactly-once" ||
		len(rep.Drains) != 2 || rep.Drains[1].Delivery != "exactly-once" {
		t.Fatalf("runs and drains: %s", b)
	}
	for _, r := range rep.Runs {
		if r.Events != 600 {
			t.Errorf("%s run consumed %d events, want 600", r.Delivery, r.Events)
		}
	}
	for _, d := range rep.Drains {
		if d.Events != 3000 {
			t.Errorf("%s drain: %d events, want 3000", d.Delivery, d.Events)
		}
	}
	for _, want := range []string{"wal exactly-once", "drain (wal, exactly-once)", "drain (wal)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout does not show %q", want)
		}
	}
	if strings.Contains(stdout.String(), "duplicates") && strings.Contains(stdout.String(), "exactly-once at") {
		for _, line := range strings.Split(stdout.String(), "\n") {
			if strings.HasPrefix(line, "wal exactly-once at") && !strings.Contains(line, " 0 duplicates") {
				t.Errorf("exactly-once run: %s", line)
			}
		}
	}
}
