package test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"

	"github.com/pgoutbox/pgoutbox/bench"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// peakRSS samples a process's peak RSS in MiB.
func peakRSS(t *testing.T, p *testenv.Proc) float64 {
	t.Helper()
	u, err := bench.ReadUsage(p.Cmd.Process.Pid)
	if err != nil {
		return 0
	}
	return float64(u.PeakRSS) / (1 << 20)
}

// Apache Kafka is killed with SIGKILL and stays down (2 minutes in make
// chaos) under continuous load: the relay process's memory stays bounded
// (reading pauses once its buffer is full), the slot does not pass the
// first unacknowledged commit, and when the broker returns with its data
// everything is delivered and the slot moves past what was committed
// during the outage.
func TestBrokerOutageBoundedMemory(t *testing.T) {
	outage := testenv.Chaos(5*time.Second, 2*time.Minute)
	e := testenv.New(t)
	broker := kafkatest.Start(t, kafkatest.Options{})
	e.Brokers = broker.Brokers
	cfg := e.Config()
	e.Setup(cfg)
	p := e.Run(t)
	load := e.StartLoad(t, 2)
	testenv.Eventually(t, 15*time.Second, "the relay streaming", func() bool { return e.Slot("pgoutbox").Active })
	time.Sleep(time.Second)

	broker.Kill()
	probe := testenv.NewCommitProbe(e)
	var peak float64
	for end := time.Now().Add(outage); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		peak = max(peak, peakRSS(t, p))
	}
	if commits := probe.Commits(); len(commits) > 0 {
		if got := e.Slot("pgoutbox").ConfirmedLSN; got >= commits[0] {
			t.Fatalf("confirmed_flush_lsn %s reached %s, committed while the broker was down", got, commits[0])
		}
	}
	if !e.Slot("pgoutbox").Active {
		t.Fatal("the replication connection dropped during the outage")
	}
	during := probe.Commits()
	broker.Start()
	time.Sleep(time.Second)
	committed := load.Finish()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	if len(during) > 0 {
		testenv.Eventually(t, 30*time.Second, "the slot past the outage's commits", func() bool {
			return e.Slot("pgoutbox").ConfirmedLSN >= during[len(during)-1]
		})
	}
	peak = max(peak, peakRSS(t, p))
	t.Logf("outage %s: %v; relay peak RSS %.0f MiB", outage, rep, peak)
	if rep.Lost != 0 || rep.OrderViolations != 0 {
		t.Fatalf("lost %d, order violations %d", rep.Lost, rep.OrderViolations)
	}
	if peak > 192 {
		t.Fatalf("relay peak RSS %.0f MiB during the outage; its buffers are bounded far below that", peak)
	}
}

// One transaction of a hundred thousand events (a million in make chaos):
// all delivered, with the relay's peak RSS reported and bounded.
func TestLargeTransaction(t *testing.T) {
	n := testenv.Chaos(100_000, 1_000_000)
	e := testenv.New(t)
	cfg := e.Config()
	e.Setup(cfg)
	start := time.Now()
	if _, err := e.Conn.Exec(context.Background(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'bulk', 'agg-' || (g % 1000), 'Imported', jsonb_build_object('n', g) FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	t.Logf("committed %d events in one transaction in %v", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	p := e.Run(t)
	c := kafkatest.NewConsumer(t, e.Brokers, "outbox.event.bulk")
	seen := make(map[string]struct{}, n)
	var peak float64
	deadline := time.Now().Add(testenv.Chaos(2*time.Minute, 10*time.Minute))
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events arrived", len(seen), n)
		}
		fs := c.PollRecords(testenv.TimeoutContext(t, time.Second), 50000)
		for it := fs.RecordIter(); !it.Done(); {
			seen[testenv.DecodeEvent(t, it.Next()).ID] = struct{}{}
		}
		peak = max(peak, peakRSS(t, p))
	}
	t.Logf("%d events delivered in %v; relay peak RSS %.0f MiB", n, time.Since(start).Round(time.Millisecond), peak)
	// The relay's memory target: 42 MiB measured with the default
	// --max-buffered-records (5,000), 59 MiB with 10,000.
	if peak > 64 {
		t.Fatalf("relay peak RSS %.0f MiB for one large transaction, over 64 MiB", peak)
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

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

// A required column is dropped from the outbox while the relay runs. Under
// the halt policy it stops with an error naming the column and confirms
// nothing past the change. Under the dead-letter policy (the default) the
// row written without the column is dead-lettered with that reason and
// the relay goes on (TestSchemaChangesUnderLoad); a nullable column added
// is harmless (TestOutboxColumnAddedWhileRunning).
func TestRequiredColumnDropped(t *testing.T) {
	for _, policy := range []string{relay.PoisonHalt, relay.PoisonDeadLetter} {
		t.Run(policy, func(t *testing.T) { requiredColumnDropped(t, policy) })
	}
}

func requiredColumnDropped(t *testing.T, policy string) {
	e := testenv.New(t)
	cfg := e.Config()
	cfg.OnPoison = policy
	e.Setup(cfg)
	r := e.Start(cfg)
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 10*time.Second)
	ctx := context.Background()
	probe := testenv.NewCommitProbe(e)
	if _, err := e.Conn.Exec(ctx, "ALTER TABLE outbox DROP COLUMN aggregatetype"); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := e.Conn.QueryRow(ctx, `INSERT INTO outbox (aggregateid, type, payload) VALUES ('o-2', 'Placed', '{}') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if policy == relay.PoisonDeadLetter {
		var reason string
		testenv.Eventually(t, 20*time.Second, "the row dead-lettered", func() bool {
			return e.Conn.QueryRow(ctx, "SELECT reason FROM pgoutbox_dead_letter WHERE event_id = $1", id).Scan(&reason) == nil
		})
		if !strings.Contains(reason, "lacks a required column: aggregatetype") {
			t.Errorf("dead-lettered for %q", reason)
		}
		select {
		case <-r.Done():
			t.Fatalf("the relay stopped: %v", r.Err())
		case <-time.After(500 * time.Millisecond):
		}
		return
	}
	var err error
	select {
	case <-r.Done():
		err = r.Err()
	case <-time.After(20 * time.Second):
		t.Fatal("the relay did not stop")
	}
	if !errors.Is(err, schema.ErrMissingColumn) {
		t.Fatalf("stopped with %v, want a missing column", err)
	}
	t.Logf("stopped with: %v", err)
	commits := probe.Commits()
	if got := e.Slot("pgoutbox").ConfirmedLSN; len(commits) > 1 && got >= commits[len(commits)-1] {
		t.Fatalf("confirmed %s, past the insert into the altered table (%s)", got, commits[len(commits)-1])
	}
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
	common := []string{"--mode", "wal", "--lease-renew", "2s", "--lease-ttl", "10s"}
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
	// The other relay tries every 2s.
	time.Sleep(2200 * time.Millisecond)
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
