package test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// While the broker is down, status shows the slot's lag and the oldest
// unpublished row growing, and says so with a non-zero exit once over the
// limits; with the broker back both shrink again.
func TestOpsStatusLagGrowsWhileBrokerDown(t *testing.T) {
	e := testenv.New(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.Brokers = broker.Brokers
	cfg := e.Config()
	e.Setup(cfg)
	e.Start(cfg)
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
	testenv.Eventually(t, 15*time.Second, "last_publish_at saved", func() bool {
		st, _ := e.Status(t)
		return st.LastPublish != nil && st.Alive != nil
	})
	healthy, ok := e.Status(t)
	if !ok || len(healthy.Problems) > 0 || healthy.Slot == nil {
		t.Fatalf("healthy pipeline: exit ok %t, %+v", ok, healthy)
	}

	broker.Kill()
	more := func(n int) {
		for i := 0; i < n; i++ {
			ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"pad":"%s"}`, strings.Repeat("x", 2000))))...)
		}
	}
	more(20)
	time.Sleep(time.Second)
	first, _ := e.Status(t)
	more(20)
	time.Sleep(1500 * time.Millisecond)
	second, ok := e.Status(t, "--max-pending-age", "1s")
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
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 60*time.Second)
	testenv.Eventually(t, 30*time.Second, "the lag shrinking after the outage", func() bool {
		st, _ := e.Status(t)
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
	e := testenv.New(t, pgcluster.Options{WALLevel: "replica"})
	pollingProblem := func(st testenv.Status) bool {
		for _, p := range st.Problems {
			if strings.HasPrefix(p, "polling instead of streaming the WAL: ") {
				return true
			}
		}
		return false
	}
	// pgoutbox_polling_since_timestamp_seconds says the same as status,
	// from the same state.
	pollingSince := func(r *testenv.Running) float64 {
		t.Helper()
		srv := httptest.NewServer(r.Handler())
		defer srv.Close()
		return testenv.Scrape(t, srv.URL)["pgoutbox_polling_since_timestamp_seconds"]
	}
	cfg := e.Config()
	cfg.Operations.MonitorInterval = 200 * time.Millisecond
	before := time.Now().Add(-time.Second)
	r := e.Start(cfg)
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
	if m := r.Mode(); m != relay.ModePoll {
		t.Fatalf("auto mode on wal_level=replica: mode %q, want poll", m)
	}
	st, ok := e.Status(t)
	if ok || !pollingProblem(st) || st.ReasonCode != "wal-unavailable" || !strings.Contains(st.ModeReason, "wal_level") {
		t.Fatalf("auto mode polling: exit ok %t, reason %q (%s), problems %q", ok, st.ModeReason, st.ReasonCode, st.Problems)
	}
	testenv.Eventually(t, 10*time.Second, "polling since the fallback in the metrics", func() bool {
		since := pollingSince(r)
		return since >= float64(before.Unix()) && since <= float64(time.Now().Unix())
	})
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}

	cfg = testenv.PollConfig(e)
	cfg.Operations.MonitorInterval = 200 * time.Millisecond
	r = e.Start(cfg)
	ids = e.Insert(testenv.NewRow("order", "o-2", "Placed", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
	testenv.Eventually(t, 15*time.Second, "the poll mode's reason saved", func() bool {
		st, _ = e.Status(t)
		return st.ReasonCode == "started"
	})
	if pollingProblem(st) || st.Mode != "poll" || st.ModeReason != "started in poll mode" {
		t.Fatalf("started in poll mode: mode %s, reason %q (%s), problems %q", st.Mode, st.ModeReason, st.ReasonCode, st.Problems)
	}
	time.Sleep(500 * time.Millisecond) // more than a sample of the monitor since the reason was saved
	if since := pollingSince(r); since != 0 {
		t.Errorf("started in poll mode: pgoutbox_polling_since_timestamp_seconds %v, want 0", since)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}

	// The reason as a pgoutbox older than the codes saved it.
	if _, err := e.Conn.Exec(context.Background(), "UPDATE pgoutbox_state SET mode_reason = 'started in poll mode'"); err != nil {
		t.Fatal(err)
	}
	st, _ = e.Status(t)
	if pollingProblem(st) || st.ModeReason != "started in poll mode" || st.ReasonCode != "started" {
		t.Fatalf("older reason: %q (%s), problems %q", st.ModeReason, st.ReasonCode, st.Problems)
	}
	if _, err := e.Conn.Exec(context.Background(), "UPDATE pgoutbox_state SET mode_reason = 'replication not ready: wal_level is replica'"); err != nil {
		t.Fatal(err)
	}
	if st, _ = e.Status(t); !pollingProblem(st) || st.ReasonCode != "" {
		t.Fatalf("older fallback reason: %q (%s), problems %q", st.ModeReason, st.ReasonCode, st.Problems)
	}
}
