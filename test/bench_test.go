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

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/pgtest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

// TestBenchCommand runs `pgoutbox bench` briefly in WAL mode against a real
// Postgres and broker: the relay runs as its own process, every event is
// accounted for, and the JSON, the table and the chart come out.
func TestBenchCommand(t *testing.T) {
	pg := pgtest.New(t)
	kafka := kafkatest.New(t)
	bin := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
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
