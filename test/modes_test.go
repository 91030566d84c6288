package test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

func pollConfig(e *env) relay.Config {
	cfg := e.config()
	cfg.Mode = relay.ModePoll
	cfg.PollInterval = 50 * time.Millisecond
	return cfg
}

// insertOpen begins a transaction on its own connection and inserts a row;
// the caller commits or rolls back.
func (e *env) insertOpen(r row) (id string, commit, rollback func()) {
	e.t.Helper()
	ctx := context.Background()
	conn := e.connect()
	tx, err := conn.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, $4) RETURNING id::text`,
		r.aggType, r.aggID, r.typ, r.payload).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id, func() {
		if err := tx.Commit(ctx); err != nil {
			e.t.Fatal(err)
		}
	}, func() { tx.Rollback(ctx) }
}

// Transactions commit out of insertion order and one rolls back: polling
// publishes every committed row, later commits included, and nothing of the
// rolled-back transaction. The long transaction does not hold back the
// rows of one that committed while it was open.
func TestPollCommitOrderRollbackAndLongTransaction(t *testing.T) {
	e := newEnv(t)
	e.start(pollConfig(e))

	a, commitA, _ := e.insertOpen(row{"order", "a", "Placed", `{"tx":"A"}`})   // lowest seq, commits last
	c, _, rollbackC := e.insertOpen(row{"order", "c", "Placed", `{"tx":"C"}`}) // rolls back
	b := e.insert(row{"order", "b", "Placed", `{"tx":"B"}`})[0]                // highest seq, commits first
	first := kafkatest.Consume(t, e.brokers, []string{"outbox.event.order"}, 1, 10*time.Second)
	if id := decodeEvent(t, first[0]).ID; id != b {
		t.Fatalf("first published %s, want B %s (A and C are still open)", id, b)
	}
	time.Sleep(300 * time.Millisecond) // several polls while A is open
	commitA()
	rollbackC()
	awaitIDs(t, e.brokers, "outbox.event.order", []string{a, b}, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	recs := drain(t, e.brokers, "outbox.event.order", 0)
	if len(recs) != 2 {
		t.Fatalf("%d records, want exactly B then A", len(recs))
	}
	for _, r := range recs {
		if decodeEvent(t, r).ID == c {
			t.Fatal("a row of the rolled-back transaction was published")
		}
	}
	var unpublished int
	e.conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&unpublished)
	if unpublished != 0 {
		t.Fatalf("%d rows left unmarked", unpublished)
	}
}

// Many writers lock their aggregate (an UPDATE of its row) and then insert
// several events; unrelated transactions take transaction ids meanwhile, so
// xid order differs from commit order. Polling delivers each aggregate's
// events in commit order across thousands of events.
func TestPollOrderUnderContention(t *testing.T) {
	e := newEnv(t)
	e.start(pollConfig(e))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		conn := e.connect()
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Take an xid, hold it a moment, commit: shifts xids
				// against the commit order of the writers.
				tx, err := conn.Begin(ctx)
				if err != nil {
					return
				}
				tx.Exec(ctx, "SELECT pg_current_xact_id()")
				time.Sleep(2 * time.Millisecond)
				tx.Commit(ctx)
			}
		}()
	}
	load := e.startLoad(t, 4)
	time.Sleep(4 * time.Second)
	committed := load.finish()
	close(stop)
	wg.Wait()
	rep := check(t, e.brokers, "outbox.event.account", committed)
	t.Logf("%v", rep)
	if rep.committed < 1000 {
		t.Fatalf("only %d events; the test needs thousands", rep.committed)
	}
	// The same rows in transaction-id order, as an xid-ordered poller would
	// publish them: a writer takes its xid before it waits for the lock,
	// so xid order and commit order differ.
	var xidMisordered int
	if err := e.conn.QueryRow(context.Background(), `SELECT count(*) FROM (
  SELECT (payload->>'seq')::int AS s,
         lag((payload->>'seq')::int) OVER (PARTITION BY aggregateid ORDER BY txid, seq) AS prev
  FROM outbox WHERE aggregatetype = 'account') x WHERE s < prev`).Scan(&xidMisordered); err != nil {
		t.Fatal(err)
	}
	t.Logf("in transaction-id order, %d events would have been out of commit order", xidMisordered)
	if rep.lost != 0 || rep.orderViolations != 0 || rep.duplicates != 0 {
		t.Fatalf("lost %d, order violations %d, duplicates %d", rep.lost, rep.orderViolations, rep.duplicates)
	}
}

// On a server with wal_level=replica, auto mode polls, delivers everything,
// and says why in the state table.
func TestAutoPollsWithoutLogicalReplication(t *testing.T) {
	e := newEnv(t, pgcluster.Options{WALLevel: "replica"})
	cfg := e.config()
	r := e.start(cfg)
	var ids []string
	for i := 0; i < 20; i++ {
		ids = append(ids, e.insert(row{"order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)})...)
	}
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 15*time.Second)
	if m := r.Mode(); m != relay.ModePoll {
		t.Fatalf("mode %q, want poll", m)
	}
	var mode, reason string
	if err := e.conn.QueryRow(context.Background(), "SELECT mode, mode_reason FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode, &reason); err != nil {
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
	e := newEnv(t, pgcluster.Options{Settings: map[string]string{"max_slot_wal_keep_size": "1MB"}})
	if e.pg.External() {
		t.Skip("needs the throwaway cluster's max_slot_wal_keep_size")
	}
	ctx := context.Background()
	cfg := e.config()
	cfg.ProbeInterval = 300 * time.Millisecond
	e.setup(cfg)
	r := e.start(cfg)
	before := e.insert(row{"order", "o-1", "Placed", `{"i":0}`})
	awaitIDs(t, e.brokers, "outbox.event.order", before, 10*time.Second)
	time.Sleep(1500 * time.Millisecond) // the floor is saved once a second
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	var ids []string
	for i := 1; i <= 20; i++ {
		ids = append(ids, e.insert(row{"order", fmt.Sprint("o-", i%4), "Placed", fmt.Sprintf(`{"i":%d}`, i)})...)
	}
	if _, err := e.conn.Exec(ctx, "CREATE TABLE filler (v text)"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the slot invalidated", func() bool {
		e.conn.Exec(ctx, "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 20000)")
		e.conn.Exec(ctx, "SELECT pg_switch_wal()")
		e.conn.Exec(ctx, "CHECKPOINT")
		return e.slot("pgoutbox").WALStatus == "lost"
	})

	r2 := e.start(cfg)
	awaitIDs(t, e.brokers, "outbox.event.order", ids, 20*time.Second)
	eventually(t, 20*time.Second, "back on the WAL", func() bool { return r2.Mode() == relay.ModeWAL })
	after := e.insert(row{"order", "o-9", "Placed", `{"after":true}`})
	awaitIDs(t, e.brokers, "outbox.event.order", after, 10*time.Second)
	if s := e.slot("pgoutbox"); s.WALStatus == "lost" || !s.Active {
		t.Fatalf("the new slot: %+v", s)
	}
	var losses int
	e.conn.QueryRow(ctx, "SELECT slot_losses FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&losses)
	if losses != 1 {
		t.Fatalf("slot_losses %d, want 1", losses)
	}
}

// appURL is the test server's URL for another role.
func (e *env) appURL(user string) string {
	u, err := url.Parse(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

// grantHeartbeatSQL grants role EXECUTE on every pg_logical_emit_message,
// which the heartbeats call: PostgreSQL 17 added a fourth argument (flush),
// so the signature to name differs per version.
func grantHeartbeatSQL(role string) string {
	return `DO $$DECLARE f regprocedure; BEGIN
FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'pg_logical_emit_message' LOOP
EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, ` + "'" + role + "'" + `);
END LOOP; END$$`
}

// REPLICATION is revoked from the relay's role and granted back, several
// times, under continuous load: auto falls back to polling and returns to
// the WAL each time. A checker confirms every committed event arrived, in
// per-aggregate order, and reports the duplicates and how long the
// fallbacks and returns took.
func TestAutoSwitchesUnderLoad(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION;
GRANT SELECT, UPDATE ON outbox TO app; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO app; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app;
`+grantHeartbeatSQL("app")); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.ProbeInterval = 300 * time.Millisecond
	cfg.PollInterval = 50 * time.Millisecond
	e.setup(cfg) // as the owner; the relay's role streams and polls
	cfg.Replication.DatabaseURL = e.appURL("app")
	r := e.start(cfg)
	eventually(t, 10*time.Second, "streaming", func() bool { return r.Mode() == relay.ModeWAL && e.slot("pgoutbox").Active })

	load := e.startLoad(t, 3)
	const cycles = 3
	var fallbacks, returns []time.Duration
	for i := 0; i < cycles; i++ {
		time.Sleep(700 * time.Millisecond)
		start := time.Now()
		if _, err := e.conn.Exec(ctx, `ALTER ROLE app NOREPLICATION`); err != nil {
			t.Fatal(err)
		}
		e.conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'pgoutbox' AND active`)
		eventually(t, 20*time.Second, "the fallback to polling", func() bool { return r.Mode() == relay.ModePoll })
		fallbacks = append(fallbacks, time.Since(start))
		time.Sleep(700 * time.Millisecond)
		start = time.Now()
		if _, err := e.conn.Exec(ctx, `ALTER ROLE app REPLICATION`); err != nil {
			t.Fatal(err)
		}
		// Streaming, not only in WAL mode: the next revoke must find the
		// slot active to cut it.
		eventually(t, 20*time.Second, "the return to the WAL", func() bool { return r.Mode() == relay.ModeWAL && e.slot("pgoutbox").Active })
		returns = append(returns, time.Since(start))
	}
	time.Sleep(500 * time.Millisecond)
	committed := load.finish()
	rep := check(t, e.brokers, "outbox.event.account", committed)
	t.Logf("%d cycles (WAL->poll->WAL): %v (%.0f duplicates per switch)", cycles, rep, float64(rep.duplicates)/(2*cycles))
	t.Logf("fallback took %v; return took %v", fallbacks, returns)
	if rep.lost != 0 || rep.orderViolations != 0 {
		t.Fatalf("lost %d, order violations %d", rep.lost, rep.orderViolations)
	}
	// Back on the WAL, the slot replays what polling published; those rows
	// are skipped, not sent again.
	if n := r.Stats.SkippedPolled.Load(); n == 0 {
		t.Fatal("no row replayed after a poll phase was skipped")
	} else {
		t.Logf("%d rows replayed by the WAL after polling were not sent again", n)
	}
	var switches int
	e.conn.QueryRow(ctx, "SELECT switches FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&switches)
	if switches < 2*cycles {
		t.Fatalf("state counted %d switches, want at least %d", switches, 2*cycles)
	}
}

// Two relays on one pipeline: one works, the other waits; when the first
// stops, the second takes over within seconds and nothing is lost.
func TestSecondInstanceWaitsAndTakesOver(t *testing.T) {
	for _, mode := range []relay.Mode{relay.ModePoll, relay.ModeAuto} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t)
			cfg := pollConfig(e)
			cfg.Mode = mode
			if mode == relay.ModeAuto {
				e.setup(cfg)
			}
			a := e.start(cfg)
			eventually(t, 10*time.Second, "the first relay working", func() bool { return a.Stats.Sessions.Load() > 0 })
			b := e.start(cfg)
			var ids []string
			for i := 0; i < 20; i++ {
				ids = append(ids, e.insert(row{"order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)})...)
			}
			awaitIDs(t, e.brokers, "outbox.event.order", ids, 10*time.Second)
			if n := b.Stats.Sessions.Load(); n != 0 {
				t.Fatalf("the second relay ran %d sessions while the first held the pipeline", n)
			}
			if err := a.stop(); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			var took atomic.Int64
			for i := 20; i < 40; i++ {
				ids = append(ids, e.insert(row{"order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)})...)
			}
			eventually(t, 15*time.Second, "the second relay taking over", func() bool {
				took.Store(int64(time.Since(stopped)))
				return b.Stats.Sessions.Load() > 0
			})
			read := awaitIDs(t, e.brokers, "outbox.event.order", ids, 15*time.Second)
			t.Logf("took over in %v; %d events, %d records", time.Duration(took.Load()).Round(time.Millisecond), len(ids), read)
		})
	}
}

// A role that lacks a grant the relay needs gets a clear error, and the
// session that failed leaves no replication connection holding the slot.
func TestMissingGrantReleasesSlot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION;
GRANT SELECT, UPDATE ON outbox TO app; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app`); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	e.setup(cfg)
	cfg.Replication.DatabaseURL = e.appURL("app")
	r := e.start(cfg)
	var err error
	select {
	case <-r.done():
		err = r.errExit()
	case <-time.After(20 * time.Second):
		t.Fatal("the relay did not stop")
	}
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("stopped with %v, want a permission error", err)
	}
	time.Sleep(500 * time.Millisecond)
	if s := e.slot("pgoutbox"); s.Active {
		t.Fatalf("the slot is still held by pid %d after the relay stopped", s.ActivePID)
	}
}

// --mode wal never polls and --mode poll never replicates: where they
// cannot work, they stop at start and say why.
func TestForcedModesSayWhyTheyCannotRun(t *testing.T) {
	t.Run("wal on wal_level=replica", func(t *testing.T) {
		e := newEnv(t, pgcluster.Options{WALLevel: "replica"})
		code, out := runOnce(t, 20*time.Second, nil, "run", "--mode", "wal", "--database-url", e.url, "--kafka-brokers", strings.Join(e.brokers, ","))
		if code != 1 || !strings.Contains(out, "wal_level = logical") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		if strings.Contains(out, "polling") {
			t.Fatalf("--mode wal polled:\n%s", out)
		}
	})
	t.Run("poll without the polling columns", func(t *testing.T) {
		e := newEnv(t)
		if _, err := e.conn.Exec(context.Background(), "ALTER TABLE outbox DROP COLUMN published_at"); err != nil {
			t.Fatal(err)
		}
		code, out := runOnce(t, 20*time.Second, nil, "run", "--mode", "poll", "--database-url", e.url, "--kafka-brokers", strings.Join(e.brokers, ","))
		if code != 1 || !strings.Contains(out, "polling columns") || !strings.Contains(out, "public.outbox lacks published_at\n") || !strings.Contains(out, "pgoutbox migrate") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		var slots int
		e.conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots").Scan(&slots)
		if slots != 0 {
			t.Fatal("--mode poll created a replication slot")
		}
	})
}

// A first start in auto mode creates the slot and, before streaming from
// it, polls what committed before it existed: rows written before any slot
// are published too (a WAL-only relay would never see them).
func TestAutoFirstStartPublishesRowsFromBeforeTheSlot(t *testing.T) {
	e := newEnv(t)
	var before []string
	for i := 0; i < 10; i++ {
		before = append(before, e.insert(row{"order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"before":%d}`, i)})...)
	}
	cfg := e.config()
	r := e.start(cfg) // no e.setup: the relay creates the slot itself
	awaitIDs(t, e.brokers, "outbox.event.order", before, 15*time.Second)
	eventually(t, 15*time.Second, "streaming from the new slot", func() bool { return r.Mode() == relay.ModeWAL })
	after := e.insert(row{"order", "o-1", "Placed", `{"after":true}`})
	awaitIDs(t, e.brokers, "outbox.event.order", after, 10*time.Second)
	var mode string
	e.conn.QueryRow(context.Background(), "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode)
	if mode != "wal" {
		t.Fatalf("state mode %q after the handoff, want wal", mode)
	}
}

// The handoff to a new slot survives a restart: the relay stops while it
// is still polling the rows from before the slot, and the next start
// resumes that polling instead of streaming past those rows.
func TestHandoffResumesAfterRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg, r, before := e.slowHandoff()
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	var unpublished int
	e.conn.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&unpublished)
	if unpublished == 0 {
		t.Fatal("the handoff finished before the stop; the test needs it interrupted")
	}
	t.Logf("stopped with %d rows from before the slot unpublished", unpublished)

	cfg.Poll.BatchSize = 500
	r2 := e.start(cfg)
	awaitIDs(t, e.brokers, "outbox.event.order", before, 30*time.Second)
	eventually(t, 15*time.Second, "streaming after the handoff", func() bool { return r2.Mode() == relay.ModeWAL })
	var pending bool
	e.conn.QueryRow(ctx, "SELECT handoff_pending FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&pending)
	if pending {
		t.Fatal("the handoff is still marked pending after it finished")
	}
}

// slowHandoff inserts 3,000 rows and starts a relay that creates the slot
// and polls them one at a time; it returns once the handoff is under way.
func (e *env) slowHandoff() (relay.Config, *running, []string) {
	e.t.Helper()
	var before []string
	rows, err := e.conn.Query(context.Background(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'order', 'o-' || (g % 7), 'Placed', jsonb_build_object('n', g) FROM generate_series(1, 3000) g RETURNING id::text`)
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		before = append(before, id)
	}
	rows.Close()
	cfg := e.config()
	cfg.Poll.BatchSize = 1 // a slow handoff, to act in the middle of it
	cfg.PollInterval = time.Millisecond
	r := e.start(cfg)
	eventually(e.t, 15*time.Second, "the handoff under way", func() bool { return r.Stats.Published.Load() > 50 })
	return cfg, r, before
}

// A handoff whose slot is replaced again while it polls (by the other
// relay of a pair, in nemesis seed 8) goes on to the new slot's bounds:
// what committed between the two slots is polled, not streamed past. The
// relay used to end the handoff on the bounds it had read first and then
// stream the new slot: in seed 8 the 809 events committed between the two
// slots never reached Kafka.
func TestHandoffFollowsTheSlotReplacedAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, r, before := e.slowHandoff()
	// What another relay's setup does when it finds the slot lost: pend
	// the handoff again, create a slot, save the bounds read after it.
	between := e.insertN("order", 20)
	for _, q := range []string{
		"SELECT pg_drop_replication_slot('pgoutbox')",
		"UPDATE pgoutbox_state SET handoff_pending = true, handoff_xmax = NULL, handoff_seq = NULL WHERE pipeline = 'pgoutbox'",
		"SELECT pg_create_logical_replication_slot('pgoutbox', 'pgoutput')",
		`UPDATE pgoutbox_state SET handoff_xmax = pg_snapshot_xmax(pg_current_snapshot()), handoff_seq = (SELECT max(seq) FROM outbox)
WHERE pipeline = 'pgoutbox'`,
	} {
		if _, err := e.conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if r.Mode() != relay.ModePoll {
		t.Fatal("the handoff ended before the slot was replaced again; the test needs it under way")
	}
	after := e.insert(row{"order", "o-1", "Placed", `{"after":true}`})
	awaitIDs(t, e.brokers, "outbox.event.order", slices.Concat(before, between, after), 60*time.Second)
	eventually(t, 15*time.Second, "streaming after the handoff", func() bool { return r.Mode() == relay.ModeWAL })
}

// A relay whose handoff another relay finished streams when it takes the
// pipeline back; it does not poll again with the handoff it had begun.
// Nemesis seed 8 (at-least-once, two relays): relay 1 created a slot and
// polled the rows from before it, lost the lease; relay 0 resumed that
// handoff, finished it and streamed; when relay 0 was killed, relay 1 took
// over and polled from the floor with its old handoff, sending again the
// 92 events relay 0 had streamed in its last second. The first relay
// learns it lost the pipeline (a lease wait), or does not: its connections
// died while it was paused, and it takes the pipeline back after a
// failure and a backoff without ever finding it held (nemesis seed 35).
func TestTakeoverAfterAnotherRelayFinishedTheHandoff(t *testing.T) {
	for _, tt := range []struct {
		name string
		// lose makes relay a, holder first, lose the pipeline to another
		// relay and leaves it paused (SIGSTOP).
		lose func(t *testing.T, e *env, a *proc, first string)
	}{
		{"the lease lost", func(t *testing.T, e *env, a *proc, first string) {
			// Its lease lapses (as when it is cut off from the database
			// for longer than --lease-ttl); the other takes it over.
			e.awaitHolderChange(t, first, func() {
				e.conn.Exec(context.Background(), "UPDATE pgoutbox_lease SET expires_at = now() WHERE pipeline = 'pgoutbox' AND holder = $1", first)
			})
			// Paused while it waits, so that it cannot take the pipeline
			// back between two sessions of the other before that one is
			// killed.
			eventually(t, 10*time.Second, "the first relay waiting", func() bool {
				return len(a.logged("another relay took over this pipeline; this one stopped publishing and waits")) > 0
			})
			a.pause(t)
		}},
		{"the connections lost while paused", func(t *testing.T, e *env, a *proc, first string) {
			// Every session but the test's: the other relay, waiting,
			// tries again.
			a.pause(t)
			e.awaitHolderChange(t, first, func() {
				e.conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND datname = current_database() AND backend_type = 'client backend'`)
			})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) { takeoverAfterHandoff(t, tt.lose) })
	}
}

func takeoverAfterHandoff(t *testing.T, lose func(t *testing.T, e *env, a *proc, first string)) {
	e := newEnv(t)
	ctx := context.Background()
	var before []string
	rows, err := e.conn.Query(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'order', 'o-' || (g % 7), 'Placed', jsonb_build_object('n', g) FROM generate_series(1, 2000) g RETURNING id::text`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		before = append(before, id)
	}
	rows.Close()
	common := []string{"--mode", "auto", "--lease-ttl", "3s", "--lease-renew", "200ms"}
	// A polls the rows from before the slot it creates one at a time: its
	// handoff is under way when it loses the pipeline.
	a := e.runProcess(t, append(common, "--batch-size", "1", "--poll-interval", "1ms")...)
	eventually(t, 15*time.Second, "the first relay's handoff under way", func() bool {
		return e.stateMode() == "poll" && len(e.unpublished(before...)) < len(before)
	})
	first := e.leaseHolder()
	b := e.runProcess(t, append(common, "--batch-size", "100", "--poll-interval", "10ms")...)
	lose(t, e, a, first)
	if n := len(e.unpublished(before...)); n == 0 {
		t.Fatal("the first relay finished the handoff before it lost the pipeline; the test needs it under way")
	}
	awaitIDs(t, e.brokers, "outbox.event.order", before, 30*time.Second)
	eventually(t, 15*time.Second, "the second relay streaming after the handoff", func() bool {
		return e.stateMode() == "wal" && e.slot("pgoutbox").Active
	})
	if len(b.logged("resuming an unfinished handoff")) == 0 {
		t.Fatalf("the second relay did not resume the first one's handoff:\n%s", b.out.String())
	}
	streamed := e.insertN("order", 50)
	awaitIDs(t, e.brokers, "outbox.event.order", streamed, 15*time.Second)
	switches := func() int {
		var n int
		e.conn.QueryRow(ctx, "SELECT switches FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&n)
		return n
	}
	was := switches()
	b.signal(t, syscall.SIGKILL)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the first relay holding the lease again", func() bool { return e.leaseHolder() == first })
	after := e.insertN("order", 50)
	awaitIDs(t, e.brokers, "outbox.event.order", after, 15*time.Second)
	eventually(t, 15*time.Second, "the first relay streaming", func() bool { return e.slot("pgoutbox").Active })
	if n := switches(); n != was || e.stateMode() != "wal" {
		t.Fatalf("the first relay switched modes %d times after taking the pipeline back (state: %s), want none: it polled with the handoff the other relay had finished:\n%s",
			n-was, e.stateMode(), a.out.String())
	}
}

// leaseHolder is who holds the pipeline's lease.
func (e *env) leaseHolder() string {
	var h string
	e.conn.QueryRow(context.Background(), "SELECT holder FROM pgoutbox_lease WHERE pipeline = 'pgoutbox'").Scan(&h)
	return h
}

// awaitHolderChange runs do until another relay than first holds the
// lease.
func (e *env) awaitHolderChange(t *testing.T, first string, do func()) {
	t.Helper()
	eventually(t, 15*time.Second, "another relay holding the lease", func() bool {
		do()
		return e.leaseHolder() != first
	})
}

// pause stops p (SIGSTOP) until the test continues it or ends.
func (p *proc) pause(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Signal(syscall.SIGCONT) }) // before its stop
}
