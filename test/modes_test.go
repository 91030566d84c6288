package test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// insertOpen begins a transaction on its own connection and inserts a row;
// the caller commits or rolls back.
func insertOpen(e *testenv.Env, r testenv.Row) (id string, commit, rollback func()) {
	e.T.Helper()
	ctx := context.Background()
	conn := e.Connect()
	tx, err := conn.Begin(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, $4) RETURNING id::text`,
		r.AggType, r.AggID, r.Type, r.Payload).Scan(&id); err != nil {
		e.T.Fatal(err)
	}
	return id, func() {
		if err := tx.Commit(ctx); err != nil {
			e.T.Fatal(err)
		}
	}, func() { tx.Rollback(ctx) }
}

// Transactions commit out of insertion order and one rolls back: polling
// publishes every committed row, later commits included, and nothing of the
// rolled-back transaction. The long transaction does not hold back the
// rows of one that committed while it was open.
func TestPollCommitOrderRollbackAndLongTransaction(t *testing.T) {
	e := testenv.New(t)
	e.Start(testenv.PollConfig(e))

	a, commitA, _ := insertOpen(e, testenv.NewRow("order", "a", "Placed", `{"tx":"A"}`))   // lowest seq, commits last
	c, _, rollbackC := insertOpen(e, testenv.NewRow("order", "c", "Placed", `{"tx":"C"}`)) // rolls back
	b := e.Insert(testenv.NewRow("order", "b", "Placed", `{"tx":"B"}`))[0]                 // highest seq, commits first
	first := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 1, 10*time.Second)
	if id := testenv.DecodeEvent(t, first[0]).ID; id != b {
		t.Fatalf("first published %s, want B %s (A and C are still open)", id, b)
	}
	time.Sleep(300 * time.Millisecond) // several polls while A is open
	commitA()
	rollbackC()
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", []string{a, b}, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	recs := testenv.Drain(t, e.Brokers, "outbox.event.order", 0)
	if len(recs) != 2 {
		t.Fatalf("%d records, want exactly B then A", len(recs))
	}
	for _, r := range recs {
		if testenv.DecodeEvent(t, r).ID == c {
			t.Fatal("a row of the rolled-back transaction was published")
		}
	}
	var unpublished int
	e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&unpublished)
	if unpublished != 0 {
		t.Fatalf("%d rows left unmarked", unpublished)
	}
}

// Many writers lock their aggregate (an UPDATE of its row) and then insert
// several events; unrelated transactions take transaction ids meanwhile, so
// xid order differs from commit order. Polling delivers each aggregate's
// events in commit order across thousands of events.
func TestPollOrderUnderContention(t *testing.T) {
	e := testenv.New(t)
	e.Start(testenv.PollConfig(e))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		conn := e.Connect()
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
	load := e.StartLoad(t, 4)
	time.Sleep(4 * time.Second)
	committed := load.Finish()
	close(stop)
	wg.Wait()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	t.Logf("%v", rep)
	if rep.Committed < 1000 {
		t.Fatalf("only %d events; the test needs thousands", rep.Committed)
	}
	// The same rows in transaction-id order, as an xid-ordered poller would
	// publish them: a writer takes its xid before it waits for the lock,
	// so xid order and commit order differ.
	var xidMisordered int
	if err := e.Conn.QueryRow(context.Background(), `SELECT count(*) FROM (
  SELECT (payload->>'seq')::int AS s,
         lag((payload->>'seq')::int) OVER (PARTITION BY aggregateid ORDER BY txid, seq) AS prev
  FROM outbox WHERE aggregatetype = 'account') x WHERE s < prev`).Scan(&xidMisordered); err != nil {
		t.Fatal(err)
	}
	t.Logf("in transaction-id order, %d events would have been out of commit order", xidMisordered)
	if rep.Lost != 0 || rep.OrderViolations != 0 || rep.Duplicates != 0 {
		t.Fatalf("lost %d, order violations %d, duplicates %d", rep.Lost, rep.OrderViolations, rep.Duplicates)
	}
}

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
		e.Conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'pgoutbox' AND active`)
		testenv.Eventually(t, 20*time.Second, "the fallback to polling", func() bool { return r.Mode() == relay.ModePoll })
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

// Two relays on one pipeline: one works, the other waits; when the first
// stops, the second takes over within seconds and nothing is lost.
func TestSecondInstanceWaitsAndTakesOver(t *testing.T) {
	for _, mode := range []relay.Mode{relay.ModePoll, relay.ModeAuto} {
		t.Run(string(mode), func(t *testing.T) {
			e := testenv.New(t)
			cfg := testenv.PollConfig(e)
			cfg.Mode = mode
			if mode == relay.ModeAuto {
				e.Setup(cfg)
			}
			a := e.Start(cfg)
			testenv.Eventually(t, 10*time.Second, "the first relay working", func() bool { return a.Stats.Sessions.Load() > 0 })
			b := e.Start(cfg)
			var ids []string
			for i := 0; i < 20; i++ {
				ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
			}
			testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 10*time.Second)
			if n := b.Stats.Sessions.Load(); n != 0 {
				t.Fatalf("the second relay ran %d sessions while the first held the pipeline", n)
			}
			if err := a.Stop(); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			var took atomic.Int64
			for i := 20; i < 40; i++ {
				ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
			}
			testenv.Eventually(t, 15*time.Second, "the second relay taking over", func() bool {
				took.Store(int64(time.Since(stopped)))
				return b.Stats.Sessions.Load() > 0
			})
			read := testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
			t.Logf("took over in %v; %d events, %d records", time.Duration(took.Load()).Round(time.Millisecond), len(ids), read)
		})
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

// A first start in auto mode creates the slot and, before streaming from
// it, polls what committed before it existed: rows written before any slot
// are published too (a WAL-only relay would never see them).
func TestAutoFirstStartPublishesRowsFromBeforeTheSlot(t *testing.T) {
	e := testenv.New(t)
	var before []string
	for i := 0; i < 10; i++ {
		before = append(before, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"before":%d}`, i)))...)
	}
	cfg := e.Config()
	r := e.Start(cfg) // no e.setup: the relay creates the slot itself
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", before, 15*time.Second)
	testenv.Eventually(t, 15*time.Second, "streaming from the new slot", func() bool { return r.Mode() == relay.ModeWAL })
	after := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"after":true}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", after, 10*time.Second)
	var mode string
	e.Conn.QueryRow(context.Background(), "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode)
	if mode != "wal" {
		t.Fatalf("state mode %q after the handoff, want wal", mode)
	}
}

// The handoff to a new slot survives a restart: the relay stops while it
// is still polling the rows from before the slot, and the next start
// resumes that polling instead of streaming past those rows.
func TestHandoffResumesAfterRestart(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	cfg, r, before := slowHandoff(e)
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	var unpublished int
	e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&unpublished)
	if unpublished == 0 {
		t.Fatal("the handoff finished before the stop; the test needs it interrupted")
	}
	t.Logf("stopped with %d rows from before the slot unpublished", unpublished)

	cfg.Poll.BatchSize = 500
	r2 := e.Start(cfg)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", before, 30*time.Second)
	testenv.Eventually(t, 15*time.Second, "streaming after the handoff", func() bool { return r2.Mode() == relay.ModeWAL })
	var pending bool
	e.Conn.QueryRow(ctx, "SELECT handoff_pending FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&pending)
	if pending {
		t.Fatal("the handoff is still marked pending after it finished")
	}
}

// slowHandoff inserts 3,000 rows and starts a relay that creates the slot
// and polls them one at a time; it returns once the handoff is under way.
func slowHandoff(e *testenv.Env) (relay.Config, *testenv.Running, []string) {
	e.T.Helper()
	var before []string
	rows, err := e.Conn.Query(context.Background(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'order', 'o-' || (g % 7), 'Placed', jsonb_build_object('n', g) FROM generate_series(1, 3000) g RETURNING id::text`)
	if err != nil {
		e.T.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		before = append(before, id)
	}
	rows.Close()
	cfg := e.Config()
	cfg.Poll.BatchSize = 1 // a slow handoff, to act in the middle of it
	cfg.PollInterval = time.Millisecond
	r := e.Start(cfg)
	testenv.Eventually(e.T, 15*time.Second, "the handoff under way", func() bool { return r.Stats.Published.Load() > 50 })
	return cfg, r, before
}

// A handoff whose slot is replaced again while it polls (by the other
// relay of a pair, in nemesis seed 8) goes on to the new slot's bounds:
// what committed between the two slots is polled, not streamed past. The
// relay used to end the handoff on the bounds it had read first and then
// stream the new slot: in seed 8 the 809 events committed between the two
// slots never reached Kafka.
func TestHandoffFollowsTheSlotReplacedAgain(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	_, r, before := slowHandoff(e)
	// What another relay's setup does when it finds the slot lost: pend
	// the handoff again, create a slot, save the bounds read after it.
	between := e.InsertN("order", 20)
	for _, q := range []string{
		"SELECT pg_drop_replication_slot('pgoutbox')",
		"UPDATE pgoutbox_state SET handoff_pending = true, handoff_xmax = NULL, handoff_seq = NULL WHERE pipeline = 'pgoutbox'",
		"SELECT pg_create_logical_replication_slot('pgoutbox', 'pgoutput')",
		`UPDATE pgoutbox_state SET handoff_xmax = pg_snapshot_xmax(pg_current_snapshot()), handoff_seq = (SELECT max(seq) FROM outbox)
WHERE pipeline = 'pgoutbox'`,
	} {
		if _, err := e.Conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if r.Mode() != relay.ModePoll {
		t.Fatal("the handoff ended before the slot was replaced again; the test needs it under way")
	}
	after := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"after":true}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", slices.Concat(before, between, after), 60*time.Second)
	testenv.Eventually(t, 15*time.Second, "streaming after the handoff", func() bool { return r.Mode() == relay.ModeWAL })
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
		lose func(t *testing.T, e *testenv.Env, a *testenv.Proc, first string)
	}{
		{"the lease lost", func(t *testing.T, e *testenv.Env, a *testenv.Proc, first string) {
			// Its lease lapses (as when it is cut off from the database
			// for longer than --lease-ttl); the other takes it over.
			awaitHolderChange(t, e, first, func() {
				e.Conn.Exec(context.Background(), "UPDATE pgoutbox_lease SET expires_at = now() WHERE pipeline = 'pgoutbox' AND holder = $1", first)
			})
			// Paused while it waits, so that it cannot take the pipeline
			// back between two sessions of the other before that one is
			// killed.
			testenv.Eventually(t, 10*time.Second, "the first relay waiting", func() bool {
				return len(a.Logged("another relay took over this pipeline; this one stopped publishing and waits")) > 0
			})
			a.Pause(t)
		}},
		{"the connections lost while paused", func(t *testing.T, e *testenv.Env, a *testenv.Proc, first string) {
			// Every session but the test's: the other relay, waiting,
			// tries again.
			a.Pause(t)
			awaitHolderChange(t, e, first, func() {
				e.Conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND datname = current_database() AND backend_type = 'client backend'`)
			})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) { takeoverAfterHandoff(t, tt.lose) })
	}
}

func takeoverAfterHandoff(t *testing.T, lose func(t *testing.T, e *testenv.Env, a *testenv.Proc, first string)) {
	e := testenv.New(t)
	ctx := context.Background()
	var before []string
	rows, err := e.Conn.Query(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
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
	a := e.Run(t, append(common, "--batch-size", "1", "--poll-interval", "1ms")...)
	testenv.Eventually(t, 15*time.Second, "the first relay's handoff under way", func() bool {
		return testenv.StateMode(e) == "poll" && len(testenv.Unpublished(e, before...)) < len(before)
	})
	first := leaseHolder(e)
	b := e.Run(t, append(common, "--batch-size", "100", "--poll-interval", "10ms")...)
	lose(t, e, a, first)
	if n := len(testenv.Unpublished(e, before...)); n == 0 {
		t.Fatal("the first relay finished the handoff before it lost the pipeline; the test needs it under way")
	}
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", before, 30*time.Second)
	testenv.Eventually(t, 15*time.Second, "the second relay streaming after the handoff", func() bool {
		return testenv.StateMode(e) == "wal" && e.Slot("pgoutbox").Active
	})
	if len(b.Logged("resuming an unfinished handoff")) == 0 {
		t.Fatalf("the second relay did not resume the first one's handoff:\n%s", b.Out.String())
	}
	streamed := e.InsertN("order", 50)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", streamed, 15*time.Second)
	switches := func() int {
		var n int
		e.Conn.QueryRow(ctx, "SELECT switches FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&n)
		return n
	}
	was := switches()
	b.Signal(t, syscall.SIGKILL)
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the first relay holding the lease again", func() bool { return leaseHolder(e) == first })
	after := e.InsertN("order", 50)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", after, 15*time.Second)
	testenv.Eventually(t, 15*time.Second, "the first relay streaming", func() bool { return e.Slot("pgoutbox").Active })
	if n := switches(); n != was || testenv.StateMode(e) != "wal" {
		t.Fatalf("the first relay switched modes %d times after taking the pipeline back (state: %s), want none: it polled with the handoff the other relay had finished:\n%s",
			n-was, testenv.StateMode(e), a.Out.String())
	}
}

// leaseHolder is who holds the pipeline's lease.
func leaseHolder(e *testenv.Env) string {
	var h string
	e.Conn.QueryRow(context.Background(), "SELECT holder FROM pgoutbox_lease WHERE pipeline = 'pgoutbox'").Scan(&h)
	return h
}

// awaitHolderChange runs do until another relay than first holds the
// lease.
func awaitHolderChange(t *testing.T, e *testenv.Env, first string, do func()) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, "another relay holding the lease", func() bool {
		do()
		return leaseHolder(e) != first
	})
}
