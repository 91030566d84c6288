package test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// After a fallback from the WAL to polling (here: REPLICATION revoked, as
// when a failover leaves no slot), polling starts from the published
// floor, so it re-sends what the WAL published since that floor was saved.
// With the default heartbeat, after several seconds of streaming under
// load, that is at most about a second of events: the floor follows the
// confirmed position, not a timer of several seconds.
func TestFallbackResendsAboutASecond(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION;
GRANT SELECT, UPDATE ON outbox TO app; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO app; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app;
DO $$ DECLARE f regprocedure; BEGIN -- its arguments differ between versions
  FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'pg_logical_emit_message' LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO app', f);
  END LOOP; END $$`); err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	cfg.Replication.HeartbeatInterval = 0 // the default
	cfg.PollInterval = 50 * time.Millisecond
	e.Setup(cfg)
	cfg.Replication.DatabaseURL = e.AppURL("app")
	r := e.Start(cfg)
	testenv.Eventually(t, 10*time.Second, "streaming", func() bool { return r.Mode() == relay.ModeWAL && e.Slot("pgoutbox").Active })

	load := e.StartLoad(t, 3)
	started := time.Now()
	time.Sleep(7 * time.Second)
	streamed := load.Count()
	rate := float64(streamed) / time.Since(started).Seconds()
	if _, err := e.Conn.Exec(ctx, `ALTER ROLE app NOREPLICATION`); err != nil {
		t.Fatal(err)
	}
	e.Conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'pgoutbox' AND active`)
	testenv.Eventually(t, 20*time.Second, "the fallback to polling", func() bool { return r.Mode() == relay.ModePoll })
	time.Sleep(time.Second)
	committed := load.Finish()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	resent := float64(rep.Duplicates) / rate
	t.Logf("%v; %d events streamed in 7s (%.0f/s) before the fallback; re-sent after it: %d, %.2fs of events",
		rep, streamed, rate, rep.Duplicates, resent)
	if rep.Lost != 0 || rep.OrderViolations != 0 {
		t.Fatalf("lost %d, order violations %d", rep.Lost, rep.OrderViolations)
	}
	if resent > 2 {
		t.Fatalf("the fallback re-sent %d events, %.1fs worth: the floor trails the confirmed position by more than a second", rep.Duplicates, resent)
	}
}

// The slot replays from the confirmed position the server last recorded,
// which can be older than the floor the relay saved: the server learns the
// position a status interval later (here 30 s), and PostgreSQL 15 and 16
// write it to disk only now and then, so a crash of the server replays
// from older still (found by the nemesis, seed 1 at-least-once auto: a
// PostgreSQL restart re-sent 7,080 events of which 187 were in flight).
// Every transaction below the floor is in Kafka: at-least-once does not
// send those rows again; a trickle of events keeps the confirmed position,
// and the floor after it, moving, and what is above the floor may come
// twice.
func TestReplayBelowFloorNotSentAgain(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	e.Setup(e.Config())
	p := e.Run(t, "--status-interval", "30s")
	var ids []string
	for i := 0; i < 100; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%5), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
	var last int64
	if err := e.Conn.QueryRow(ctx, "SELECT max(txid::text::bigint) FROM outbox").Scan(&last); err != nil {
		t.Fatal(err)
	}
	end := e.CurrentLSN()
	trickle := e.Connect()
	testenv.Eventually(t, 15*time.Second, "the floor past the events", func() bool {
		if _, err := trickle.Exec(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-9', 'Placed', '{}')`); err != nil {
			t.Fatal(err)
		}
		var floor *int64
		if err := e.Conn.QueryRow(ctx, "SELECT floor_xid::text::bigint FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&floor); err != nil {
			t.Fatal(err)
		}
		return floor != nil && *floor > last
	})
	if s := e.Slot("pgoutbox"); s.ConfirmedLSN >= end {
		t.Fatalf("the server recorded %s, past the events (%s): nothing to replay", s.ConfirmedLSN, end)
	}
	p.Signal(t, syscall.SIGKILL)
	p2 := e.Run(t)
	seen := stopAndCount(t, e, p2)
	again := 0
	for _, id := range ids {
		if seen[id] != 1 {
			again++
		}
	}
	t.Logf("%d events below the floor, %d sent again; %d records in all", len(ids), again, len(seen))
	if again > 0 {
		t.Fatalf("%d of %d events below the saved floor were sent again after the restart", again, len(ids))
	}
}

// While Kafka is down, the relay's replication connection is cut: the
// session ends with its records unacknowledged in the producer's buffer,
// and the next one reads the same rows again from the slot. When Kafka
// returns, each event arrives once: the failed session's records are
// dropped, not sent after the next session's copies (found by the nemesis,
// seed 101 at-least-once auto: a relay whose session failed during a broker
// outage delivered its 1,361 records after the relay that took over had
// sent them).
func TestFailedSessionDuringBrokerOutageSendsOnce(t *testing.T) {
	e := testenv.New(t)
	broker := kafkatest.Start(t, kafkatest.Options{})
	e.Brokers = broker.Brokers
	e.Setup(e.Config())
	p := e.Run(t, "--shutdown-timeout", "2s")
	testenv.Eventually(t, 15*time.Second, "streaming", func() bool { return e.Slot("pgoutbox").Active })
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", e.Insert(testenv.NewRow("order", "o-0", "Placed", `{}`)), 15*time.Second)

	broker.Kill()
	var ids []string
	for i := 0; i < 100; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%5), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	end := e.CurrentLSN()
	// The session read them (and produced them into its buffer) once the
	// walsender sent them.
	sentPast := func() bool {
		var ok bool
		e.Conn.QueryRow(context.Background(), `SELECT coalesce(bool_or(sent_lsn >= $1::text::pg_lsn), false) FROM pg_stat_replication`, end.String()).Scan(&ok)
		return ok
	}
	testenv.Eventually(t, 15*time.Second, "the rows sent to the relay", sentPast)
	time.Sleep(500 * time.Millisecond)
	pid := e.Slot("pgoutbox").ActivePID
	e.Conn.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid)
	testenv.Eventually(t, 30*time.Second, "a new session, sent the rows again", func() bool {
		s := e.Slot("pgoutbox")
		return s.Active && s.ActivePID != pid && sentPast()
	})
	time.Sleep(500 * time.Millisecond)

	broker.Start()
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 30*time.Second)
	seen := stopAndCount(t, e, p)
	again := 0
	for _, id := range ids {
		if seen[id] > 1 {
			again++
		}
	}
	t.Logf("%d events produced by the failed session, %d delivered more than once", len(ids), again)
	if again > 0 {
		t.Fatalf("%d of %d events came twice: the failed session's records were sent after the next session's", again, len(ids))
	}
}

// A relay polls (REPLICATION revoked) and is killed; the next one polls
// too, then returns to the WAL, whose slot replays from where the WAL left
// off, before both poll phases. None of the rows polling published is sent
// again: neither those of the killed relay, which this process did not poll,
// nor its own. Found by the nemesis: seed 2 at-least-once auto with two
// relays (one polled for 7 s and was killed; the other, back on the WAL,
// re-sent the 1,474 rows it had polled) and seed 8 (a handoff polled by
// three processes in turn; the last re-sent 9,623 rows the others had
// polled).
func TestReturnToWALAfterAnotherProcessPolled(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	p, args := pollingWithoutReplication(t, e)
	polled := func(n int, from int) []string {
		var ids []string
		for i := from; i < from+n; i++ {
			ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%5), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
		}
		testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
		testenv.Eventually(t, 10*time.Second, "the polled rows marked", func() bool { return len(testenv.Unpublished(e, ids...)) == 0 })
		return ids
	}
	ids := polled(200, 0)
	p.Signal(t, syscall.SIGKILL)
	p2 := e.Run(t, args...)
	ids = append(ids, polled(100, 200)...)
	if _, err := e.Conn.Exec(ctx, `ALTER ROLE app REPLICATION`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "back on the WAL", func() bool { return testenv.StateMode(e) == "wal" && e.Slot("pgoutbox").Active })
	seen := stopAndCount(t, e, p2)
	again := map[bool]int{}
	for i, id := range ids {
		if seen[id] != 1 {
			again[i < 200]++
		}
	}
	t.Logf("200 events polled by the killed relay, %d sent again; 100 polled by the next one before it went back to the WAL, %d sent again", again[true], again[false])
	if again[true]+again[false] > 0 {
		t.Fatalf("rows polling published were sent again when the WAL replayed them: %d of the killed relay's, %d of its own", again[true], again[false])
	}
}

// A relay polls (REPLICATION revoked), returns to the WAL and is killed
// before its slot's confirmed position passed the rows it polled; the
// next process's stream replays them from the slot, and none is sent
// again: the first WAL session saved where the polled rows end
// (polled_until), and the next one, though the mode it reads is WAL,
// reads them from the table. Found by the nemesis: seed 33 at-least-once
// auto (a relay back on the WAL for 7 s, cut off from Kafka and
// PostgreSQL, then killed; the next process re-sent the 4,652 rows the
// poll phase before had published).
func TestKilledBackOnTheWALAfterPolling(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	// No status update for 30 s: the slot's confirmed position stays
	// where it was when the session began.
	p, args := pollingWithoutReplication(t, e, "--status-interval", "30s")
	var ids []string
	for i := 0; i < 200; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%5), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
	testenv.Eventually(t, 10*time.Second, "the polled rows marked", func() bool { return len(testenv.Unpublished(e, ids...)) == 0 })
	end := e.CurrentLSN()
	if _, err := e.Conn.Exec(ctx, `ALTER ROLE app REPLICATION`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "back on the WAL", func() bool { return testenv.StateMode(e) == "wal" && e.Slot("pgoutbox").Active })
	// The session has read the polled rows again from the slot (and
	// skipped them); the server has not been told.
	testenv.Eventually(t, 15*time.Second, "the polled rows replayed", func() bool {
		var ok bool
		e.Conn.QueryRow(ctx, `SELECT coalesce(bool_or(sent_lsn >= $1::text::pg_lsn), false) FROM pg_stat_replication`, end.String()).Scan(&ok)
		return ok
	})
	if s := e.Slot("pgoutbox"); s.ConfirmedLSN >= end {
		t.Fatalf("the slot was confirmed past the polled rows (%s, rows end at %s): nothing to replay", s.ConfirmedLSN, end)
	}
	p.Signal(t, syscall.SIGKILL)
	p2 := e.Run(t, args...)
	testenv.Eventually(t, 15*time.Second, "streaming again", func() bool { return e.Slot("pgoutbox").Active })
	seen := stopAndCount(t, e, p2)
	again := 0
	for _, id := range ids {
		if seen[id] != 1 {
			again++
		}
	}
	t.Logf("200 events polled, then replayed by a WAL session that was killed; %d sent again by the next process", again)
	if again > 0 {
		t.Fatalf("%d of the %d rows polling published were sent again by the WAL session after the kill", again, len(ids))
	}
}

// pollingWithoutReplication sets the pipeline up and starts a relay in auto
// mode as role app, which may replicate, with extra arguments; once it
// streams, it takes REPLICATION from app and ends the relay's replication
// connection, and returns once the relay polls, with the relay's
// arguments for the processes after it.
func pollingWithoutReplication(t *testing.T, e *testenv.Env, extra ...string) (*testenv.Proc, []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION; `+testenv.AppGrants); err != nil {
		t.Fatal(err)
	}
	e.Setup(e.Config())
	args := append([]string{"--database-url", e.AppURL("app"), "--mode", "auto", "--probe-interval", "300ms", "--poll-interval", "50ms"}, extra...)
	p := e.Run(t, args...)
	testenv.Eventually(t, 15*time.Second, "streaming", func() bool { return e.Slot("pgoutbox").Active })
	if _, err := e.Conn.Exec(ctx, `ALTER ROLE app NOREPLICATION`); err != nil {
		t.Fatal(err)
	}
	e.Conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'pgoutbox' AND active`)
	testenv.Eventually(t, 15*time.Second, "polling", func() bool { return testenv.StateMode(e) == "poll" })
	return p, args
}

// stopAndCount inserts one more event and waits for it, so that what came
// before it has arrived, stops p with SIGTERM and counts the records of
// each event of outbox.event.order.
func stopAndCount(t *testing.T, e *testenv.Env, p *testenv.Proc) map[string]int {
	t.Helper()
	after := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"after":true}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", after, 15*time.Second)
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return deliveries(t, e.Brokers, "outbox.event.order")
}

// deliveries counts the records of each event id in topic, up to its end.
func deliveries(t *testing.T, brokers []string, topic string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, r := range testenv.Drain(t, brokers, topic, 0) {
		seen[testenv.DecodeEvent(t, r).ID]++
	}
	return seen
}
