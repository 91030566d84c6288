package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

type statusJSON struct {
	Mode         string `json:"mode"`
	ModeReason   string `json:"mode_reason"`
	ReasonCode   string `json:"mode_reason_code"`
	ConfirmedLSN string `json:"confirmed_lsn"`
	Slot         *struct {
		LagBytes      int64 `json:"lag_bytes"`
		RetainedBytes int64 `json:"retained_wal_bytes"`
	} `json:"slot"`
	Unpublished int64      `json:"unpublished_rows"`
	Oldest      *float64   `json:"oldest_unpublished_seconds"`
	LastPublish *time.Time `json:"last_publish_at"`
	Alive       *time.Time `json:"alive_at"`
	// KafkaProblem is what the relay last saved about the broker it
	// publishes to, Broker its name.
	KafkaProblem string      `json:"kafka_problem"`
	Broker       string      `json:"broker"`
	KafkaKnown   bool        `json:"kafka_known"`
	LostDeleted  *lostStatus `json:"lost_deleted"`
	// DeadLetters are the open ones, HeldAggregates their aggregates.
	DeadLetters    *int64   `json:"dead_letters"`
	HeldAggregates *int64   `json:"held_aggregates"`
	Problems       []string `json:"problems"`
	Cluster        *int64   `json:"system_identifier"`
	// ClusterChange is set once a relay saw the state move to a new cluster.
	ClusterChange *struct {
		At       time.Time `json:"at"`
		Previous *int64    `json:"previous_system_identifier"`
		What     string    `json:"what"`
	} `json:"cluster_change"`
}

// status runs pgoutbox status --json and returns what it printed and
// whether it exited 0.
func (e *env) status(t *testing.T, extra ...string) (statusJSON, bool) {
	t.Helper()
	bin := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	cmd := exec.Command(bin, append([]string{"status", "--json", "--database-url", e.url}, extra...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("status: %v", err)
	}
	var st statusJSON
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status output is not JSON: %v\n%s\n%s", err, out, stderr.String())
	}
	return st, err == nil
}

// While the broker is down, status shows the slot's lag and the oldest
// unpublished row growing, and says so with a non-zero exit once over the
// limits; with the broker back both shrink again.
func TestOpsStatusLagGrowsWhileBrokerDown(t *testing.T) {
	e := newEnv(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.brokers = broker.Brokers
	cfg := e.config()
	e.setup(cfg)
	e.start(cfg)
	ids := e.insert(row{"order", "o-1", "Placed", `{}`})
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 15*time.Second)
	eventually(t, 15*time.Second, "last_publish_at saved", func() bool {
		st, _ := e.status(t)
		return st.LastPublish != nil && st.Alive != nil
	})
	healthy, ok := e.status(t)
	if !ok || len(healthy.Problems) > 0 || healthy.Slot == nil {
		t.Fatalf("healthy pipeline: exit ok %t, %+v", ok, healthy)
	}

	broker.Kill()
	more := func(n int) {
		for i := 0; i < n; i++ {
			ids = append(ids, e.insert(row{"order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"pad":"%s"}`, strings.Repeat("x", 2000))})...)
		}
	}
	more(20)
	time.Sleep(time.Second)
	first, _ := e.status(t)
	more(20)
	time.Sleep(1500 * time.Millisecond)
	second, ok := e.status(t, "--max-pending-age", "1s")
	t.Logf("lag %d -> %d bytes, oldest %v -> %v s, unpublished %d -> %d", first.Slot.LagBytes, second.Slot.LagBytes,
		deref(first.Oldest), deref(second.Oldest), first.Unpublished, second.Unpublished)
	if second.Slot.LagBytes <= first.Slot.LagBytes || first.Slot.LagBytes <= 0 {
		t.Errorf("slot lag did not grow while the broker was down: %d then %d bytes", first.Slot.LagBytes, second.Slot.LagBytes)
	}
	if first.Oldest == nil || second.Oldest == nil || *second.Oldest <= *first.Oldest {
		t.Errorf("the oldest unpublished row's age did not grow: %v then %v", first.Oldest, second.Oldest)
	}
	if second.Unpublished < first.Unpublished || second.Unpublished < 40 {
		t.Errorf("unpublished rows: %d then %d, want at least the 40 written while the broker was down", first.Unpublished, second.Unpublished)
	}
	if ok || !strings.Contains(strings.Join(second.Problems, "\n"), "oldest unpublished") {
		t.Errorf("status exited ok=%t with problems %q; want a non-zero exit naming the oldest unpublished row", ok, second.Problems)
	}

	broker.Start()
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 60*time.Second)
	eventually(t, 30*time.Second, "the lag shrinking after the outage", func() bool {
		st, _ := e.status(t)
		return st.Slot != nil && st.Slot.LagBytes < first.Slot.LagBytes
	})
}

func deref(f *float64) float64 {
	if f == nil {
		return -1
	}
	return *f
}

// Polling is a problem for status when auto mode fell back to it, and not
// when the relay was started in poll mode, also for the reason an older
// pgoutbox saved; --json gives the reason's code.
func TestStatusPollingReason(t *testing.T) {
	e := newEnv(t, pgcluster.Options{WALLevel: "replica"})
	pollingProblem := func(st statusJSON) bool {
		for _, p := range st.Problems {
			if strings.HasPrefix(p, "polling instead of streaming the WAL: ") {
				return true
			}
		}
		return false
	}
	// pgoutbox_polling_since_timestamp_seconds says the same as status,
	// from the same state.
	pollingSince := func(r *running) float64 {
		t.Helper()
		srv := httptest.NewServer(r.Handler())
		defer srv.Close()
		return scrape(t, srv.URL)["pgoutbox_polling_since_timestamp_seconds"]
	}
	cfg := e.config()
	cfg.Operations.MonitorInterval = 200 * time.Millisecond
	before := time.Now().Add(-time.Second)
	r := e.start(cfg)
	ids := e.insert(row{"order", "o-1", "Placed", `{}`})
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 15*time.Second)
	if m := r.Mode(); m != relay.ModePoll {
		t.Fatalf("auto mode on wal_level=replica: mode %q, want poll", m)
	}
	st, ok := e.status(t)
	if ok || !pollingProblem(st) || st.ReasonCode != "wal-unavailable" || !strings.Contains(st.ModeReason, "wal_level") {
		t.Fatalf("auto mode polling: exit ok %t, reason %q (%s), problems %q", ok, st.ModeReason, st.ReasonCode, st.Problems)
	}
	eventually(t, 10*time.Second, "polling since the fallback in the metrics", func() bool {
		since := pollingSince(r)
		return since >= float64(before.Unix()) && since <= float64(time.Now().Unix())
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	cfg = pollConfig(e)
	cfg.Operations.MonitorInterval = 200 * time.Millisecond
	r = e.start(cfg)
	ids = e.insert(row{"order", "o-2", "Placed", `{}`})
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 15*time.Second)
	eventually(t, 15*time.Second, "the poll mode's reason saved", func() bool {
		st, _ = e.status(t)
		return st.ReasonCode == "started"
	})
	if pollingProblem(st) || st.Mode != "poll" || st.ModeReason != "started in poll mode" {
		t.Fatalf("started in poll mode: mode %s, reason %q (%s), problems %q", st.Mode, st.ModeReason, st.ReasonCode, st.Problems)
	}
	time.Sleep(500 * time.Millisecond) // more than a sample of the monitor since the reason was saved
	if since := pollingSince(r); since != 0 {
		t.Errorf("started in poll mode: pgoutbox_polling_since_timestamp_seconds %v, want 0", since)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// The reason as a pgoutbox older than the codes saved it.
	if _, err := e.conn.Exec(context.Background(), "UPDATE pgoutbox_state SET mode_reason = 'started in poll mode'"); err != nil {
		t.Fatal(err)
	}
	st, _ = e.status(t)
	if pollingProblem(st) || st.ModeReason != "started in poll mode" || st.ReasonCode != "started" {
		t.Fatalf("older reason: %q (%s), problems %q", st.ModeReason, st.ReasonCode, st.Problems)
	}
	if _, err := e.conn.Exec(context.Background(), "UPDATE pgoutbox_state SET mode_reason = 'replication not ready: wal_level is replica'"); err != nil {
		t.Fatal(err)
	}
	if st, _ = e.status(t); !pollingProblem(st) || st.ReasonCode != "" {
		t.Fatalf("older fallback reason: %q (%s), problems %q", st.ModeReason, st.ReasonCode, st.Problems)
	}
}
