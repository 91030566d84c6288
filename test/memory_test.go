package test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/bench"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
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
