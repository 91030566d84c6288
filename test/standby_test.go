package test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Two relay processes on one pipeline; the working one is killed with
// SIGKILL under load. The other takes over within seconds; nothing is lost,
// and what both published is bounded by what was in flight.
func TestTakeoverAfterSIGKILL(t *testing.T) {
	e := testenv.New(t)
	cfg := e.Config()
	e.Setup(cfg)
	load := e.StartLoad(t, 2)
	a := e.Run(t)
	testenv.Eventually(t, 15*time.Second, "the first relay streaming", func() bool { return e.Slot("pgoutbox").Active })
	b := e.Run(t)
	time.Sleep(1500 * time.Millisecond)
	pidBefore := e.Slot("pgoutbox").ActivePID
	a.Signal(t, syscall.SIGKILL)
	killed := time.Now()
	testenv.Eventually(t, 20*time.Second, "the second relay streaming", func() bool {
		s := e.Slot("pgoutbox")
		return s.Active && s.ActivePID != pidBefore
	})
	took := time.Since(killed)
	time.Sleep(time.Second)
	committed := load.Finish()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	t.Logf("took over in %v; %v", took.Round(10*time.Millisecond), rep)
	if rep.Lost != 0 || rep.OrderViolations != 0 {
		t.Fatalf("lost %d, order violations %d", rep.Lost, rep.OrderViolations)
	}
	if took > 15*time.Second {
		t.Fatalf("takeover took %v", took)
	}
	b.Signal(t, syscall.SIGTERM)
}

// A relay between two of its sessions keeps the pipeline: its connections,
// and the advisory lock with them, are gone for a moment, but it renewed
// its lease recently, and the relay waiting beside it does not take the
// pipeline over. The holder is paused while its connections are ended, for
// longer than the other relay's retry interval; without the rule (a gone
// lock holder that renewed within two renewal intervals is between
// sessions) the waiting relay took the pipeline at its next try.
func TestHolderKeepsThePipelineBetweenSessions(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	// A holder whose lock is gone keeps the pipeline for two renewal
	// intervals (8 s here): the pause, the other relay's try and the
	// reconnection's backoff fit in them with seconds to spare on a busy
	// machine.
	common := []string{"--mode", "wal", "--lease-renew", "4s", "--lease-ttl", "20s"}
	a := e.Run(t, common...)
	testenv.Eventually(t, 15*time.Second, "the first relay streaming", func() bool { return e.Slot("pgoutbox").Active })
	first := leaseHolder(e)
	b := e.Run(t, common...)
	testenv.Eventually(t, 15*time.Second, "the second relay waiting", func() bool {
		return len(b.Logged("another relay holds this pipeline; waiting to take over")) > 0
	})
	ctx := context.Background()
	// Just after a renewal: the pause and the reconnection's backoff stay
	// well within two renewal intervals of it.
	testenv.Eventually(t, 10*time.Second, "a renewal", func() bool {
		var age float64
		e.Conn.QueryRow(ctx, "SELECT extract(epoch FROM now() - renewed_at) FROM pgoutbox_lease WHERE pipeline = 'pgoutbox'").Scan(&age)
		return age < 0.1
	})
	a.Pause(t)
	var ended int
	if err := e.Conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE pid = (SELECT lock_pid FROM pgoutbox_lease WHERE pipeline = 'pgoutbox')
   OR pid = (SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'pgoutbox')`).Scan(&ended); err != nil || ended != 2 {
		t.Fatalf("ended %d of the first relay's connections (the lock's and the walsender), want 2: %v", ended, err)
	}
	// The other relay tries every 4s.
	time.Sleep(4200 * time.Millisecond)
	if h := leaseHolder(e); h != first {
		t.Fatalf("the second relay (%s) took the pipeline while the first was between sessions", h)
	}
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the first relay streaming again", func() bool { return e.Slot("pgoutbox").Active })
	ids := e.InsertN("order", 20)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 15*time.Second)
	if h := leaseHolder(e); h != first {
		t.Fatalf("the second relay (%s) holds the pipeline, want the first (%s)", h, first)
	}
	if n := len(b.Logged("another relay holds this pipeline; waiting to take over")); n == 0 {
		t.Fatal("the second relay never waited")
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
SELECT 'order', 'o-' || (g % 7), 'Placed', jsonb_build_object('n', g) FROM generate_series(1, 20000) g RETURNING id::text`)
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
	// handoff is under way when it loses the pipeline (2,000 rows went
	// out in half a second on a quiet machine, before the loss; 20,000
	// take several).
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
