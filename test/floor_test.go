package test

import (
	"context"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
)

// After a fallback from the WAL to polling (here: REPLICATION revoked, as
// when a failover leaves no slot), polling starts from the published
// floor, so it re-sends what the WAL published since that floor was saved.
// With the default heartbeat, after several seconds of streaming under
// load, that is at most about a second of events: the floor follows the
// confirmed position, not a timer of several seconds.
func TestFallbackResendsAboutASecond(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION;
GRANT SELECT, UPDATE ON outbox TO app; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO app; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app;
DO $$ DECLARE f regprocedure; BEGIN -- its arguments differ between versions
  FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'pg_logical_emit_message' LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO app', f);
  END LOOP; END $$`); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.Replication.HeartbeatInterval = 0 // the default
	cfg.PollInterval = 50 * time.Millisecond
	e.setup(cfg)
	cfg.Replication.DatabaseURL = e.appURL("app")
	r := e.start(cfg)
	eventually(t, 10*time.Second, "streaming", func() bool { return r.Mode() == relay.ModeWAL && e.slot("pgoutbox").Active })

	load := e.startLoad(t, 3)
	started := time.Now()
	time.Sleep(7 * time.Second)
	load.mu.Lock()
	streamed := len(load.committed)
	load.mu.Unlock()
	rate := float64(streamed) / time.Since(started).Seconds()
	if _, err := e.conn.Exec(ctx, `ALTER ROLE app NOREPLICATION`); err != nil {
		t.Fatal(err)
	}
	e.conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'pgoutbox' AND active`)
	eventually(t, 20*time.Second, "the fallback to polling", func() bool { return r.Mode() == relay.ModePoll })
	time.Sleep(time.Second)
	committed := load.finish()
	rep := check(t, e.brokers, "outbox.event.account", committed)
	resent := float64(rep.duplicates) / rate
	t.Logf("%v; %d events streamed in 7s (%.0f/s) before the fallback; re-sent after it: %d, %.2fs of events",
		rep, streamed, rate, rep.duplicates, resent)
	if rep.lost != 0 || rep.orderViolations != 0 {
		t.Fatalf("lost %d, order violations %d", rep.lost, rep.orderViolations)
	}
	if resent > 2 {
		t.Fatalf("the fallback re-sent %d events, %.1fs worth: the floor trails the confirmed position by more than a second", rep.duplicates, resent)
	}
}
