package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// On a server with wal_level=replica, auto mode polls, delivers everything,
// and says why in the state table.
func TestAutoPollsWithoutLogicalReplication(t *testing.T) {
	e := testenv.New(t, pgcluster.Options{WALLevel: "replica"})
	cfg := e.Config()
	r := e.Start(cfg)
	var ids []string
	for i := 0; i < 20; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
	if m := r.Mode(); m != relay.ModePoll {
		t.Fatalf("mode %q, want poll", m)
	}
	var mode, reason string
	if err := e.Conn.QueryRow(context.Background(), "SELECT mode, mode_reason FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode, &reason); err != nil {
		t.Fatal(err)
	}
	if mode != "poll" || !strings.Contains(reason, "wal_level") {
		t.Fatalf("state says mode %q because %q", mode, reason)
	}
	t.Logf("state: %s (%s)", mode, reason)
}

// The slot is invalidated while the relay is stopped and events are written
// meanwhile. On restart, auto replaces the slot, polls what committed in
// between, delivers all of it, and returns to the WAL on the new slot.
func TestSlotInvalidatedWhileStopped(t *testing.T) {
	e := testenv.New(t, pgcluster.Options{Settings: map[string]string{"max_slot_wal_keep_size": "1MB"}})
	if e.PG.External() {
		t.Skip("needs the throwaway cluster's max_slot_wal_keep_size")
	}
	ctx := context.Background()
	cfg := e.Config()
	cfg.ProbeInterval = 300 * time.Millisecond
	e.Setup(cfg)
	r := e.Start(cfg)
	before := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"i":0}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", before, 10*time.Second)
	time.Sleep(1500 * time.Millisecond) // the floor is saved once a second
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}

	var ids []string
	for i := 1; i <= 20; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%4), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	if _, err := e.Conn.Exec(ctx, "CREATE TABLE filler (v text)"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the slot invalidated", func() bool {
		e.Conn.Exec(ctx, "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 20000)")
		e.Conn.Exec(ctx, "SELECT pg_switch_wal()")
		e.Conn.Exec(ctx, "CHECKPOINT")
		return e.Slot("pgoutbox").WALStatus == "lost"
	})

	r2 := e.Start(cfg)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 20*time.Second)
	testenv.Eventually(t, 20*time.Second, "back on the WAL", func() bool { return r2.Mode() == relay.ModeWAL })
	after := e.Insert(testenv.NewRow("order", "o-9", "Placed", `{"after":true}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", after, 10*time.Second)
	if s := e.Slot("pgoutbox"); s.WALStatus == "lost" || !s.Active {
		t.Fatalf("the new slot: %+v", s)
	}
	var losses int
	e.Conn.QueryRow(ctx, "SELECT slot_losses FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&losses)
	if losses != 1 {
		t.Fatalf("slot_losses %d, want 1", losses)
	}
}

// REPLICATION is revoked from the relay's role and granted back, several
// times, under continuous load: auto falls back to polling and returns to
// the WAL each time. A checker confirms every committed event arrived, in
// per-aggregate order, and reports the duplicates and how long the
// fallbacks and returns took.
func TestAutoSwitchesUnderLoad(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION;
GRANT SELECT, UPDATE ON outbox TO app; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO app; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app;
`+testenv.GrantHeartbeatSQL("app")); err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	cfg.ProbeInterval = 300 * time.Millisecond
	cfg.PollInterval = 50 * time.Millisecond
	e.Setup(cfg) // as the owner; the relay's role streams and polls
	cfg.Replication.DatabaseURL = e.AppURL("app")
	r := e.Start(cfg)
	testenv.Eventually(t, 10*time.Second, "streaming", func() bool { return r.Mode() == relay.ModeWAL && e.Slot("pgoutbox").Active })

	load := e.StartLoad(t, 3)
	const cycles = 3
	var fallbacks, returns []time.Duration
	for i := 0; i < cycles; i++ {
		time.Sleep(700 * time.Millisecond)
		start := time.Now()
		if _, err := e.Conn.Exec(ctx, `ALTER ROLE app NOREPLICATION`); err != nil {
			t.Fatal(err)
		}
		e.EndStreamUntil(t, "pgoutbox", 20*time.Second, "the fallback to polling", func() bool { return r.Mode() == relay.ModePoll })
		fallbacks = append(fallbacks, time.Since(start))
		time.Sleep(700 * time.Millisecond)
		start = time.Now()
		if _, err := e.Conn.Exec(ctx, `ALTER ROLE app REPLICATION`); err != nil {
			t.Fatal(err)
		}
		// Streaming, not only in WAL mode: the next revoke must find the
		// slot active to cut it.
		testenv.Eventually(t, 20*time.Second, "the return to the WAL", func() bool { return r.Mode() == relay.ModeWAL && e.Slot("pgoutbox").Active })
		returns = append(returns, time.Since(start))
	}
	time.Sleep(500 * time.Millisecond)
	committed := load.Finish()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	t.Logf("%d cycles (WAL->poll->WAL): %v (%.0f duplicates per switch)", cycles, rep, float64(rep.Duplicates)/(2*cycles))
	t.Logf("fallback took %v; return took %v", fallbacks, returns)
	if rep.Lost != 0 || rep.OrderViolations != 0 {
		t.Fatalf("lost %d, order violations %d", rep.Lost, rep.OrderViolations)
	}
	// Back on the WAL, the slot replays what polling published; those rows
	// are skipped, not sent again.
	if n := r.Stats.SkippedPolled.Load(); n == 0 {
		t.Fatal("no row replayed after a poll phase was skipped")
	} else {
		t.Logf("%d rows replayed by the WAL after polling were not sent again", n)
	}
	var switches int
	e.Conn.QueryRow(ctx, "SELECT switches FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&switches)
	if switches < 2*cycles {
		t.Fatalf("state counted %d switches, want at least %d", switches, 2*cycles)
	}
}

// A role that lacks a grant the relay needs gets a clear error, and the
// session that failed leaves no replication connection holding the slot.
func TestMissingGrantReleasesSlot(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION;
GRANT SELECT, UPDATE ON outbox TO app; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app`); err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	e.Setup(cfg)
	cfg.Replication.DatabaseURL = e.AppURL("app")
	r := e.Start(cfg)
	var err error
	select {
	case <-r.Done():
		err = r.Err()
	case <-time.After(20 * time.Second):
		t.Fatal("the relay did not stop")
	}
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("stopped with %v, want a permission error", err)
	}
	time.Sleep(500 * time.Millisecond)
	if s := e.Slot("pgoutbox"); s.Active {
		t.Fatalf("the slot is still held by pid %d after the relay stopped", s.ActivePID)
	}
}

// --mode wal never polls and --mode poll never replicates: where they
// cannot work, they stop at start and say why.
func TestForcedModesSayWhyTheyCannotRun(t *testing.T) {
	t.Run("wal on wal_level=replica", func(t *testing.T) {
		e := testenv.New(t, pgcluster.Options{WALLevel: "replica"})
		code, out := testenv.RunOnce(t, 20*time.Second, nil, "run", "--mode", "wal", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","))
		if code != 1 || !strings.Contains(out, "wal_level = logical") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		if strings.Contains(out, "polling") {
			t.Fatalf("--mode wal polled:\n%s", out)
		}
	})
	t.Run("poll without the polling columns", func(t *testing.T) {
		e := testenv.New(t)
		if _, err := e.Conn.Exec(context.Background(), "ALTER TABLE outbox DROP COLUMN published_at"); err != nil {
			t.Fatal(err)
		}
		code, out := testenv.RunOnce(t, 20*time.Second, nil, "run", "--mode", "poll", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","))
		if code != 1 || !strings.Contains(out, "polling columns") || !strings.Contains(out, "public.outbox lacks published_at\n") || !strings.Contains(out, "pgoutbox migrate") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		var slots int
		e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots").Scan(&slots)
		if slots != 0 {
			t.Fatal("--mode poll created a replication slot")
		}
	})
}
