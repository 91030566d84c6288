package test

import (
	"errors"
	"math/rand/v2"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// The relay is killed with SIGKILL at random moments under continuous load
// and restarted each time: every committed event arrives, per-aggregate
// order holds for first deliveries, duplicates are counted and reported.
func TestSIGKILLMidStream(t *testing.T) {
	e := testenv.New(t)
	cfg := e.Config()
	e.Setup(cfg)
	load := e.StartLoad(t, 3)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	kills := testenv.Chaos(6, 50)
	for i := 0; i < kills; i++ {
		p := e.Run(t)
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		p.Signal(t, syscall.SIGKILL)
	}
	p := e.Run(t)
	time.Sleep(500 * time.Millisecond)
	committed := load.Finish()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	t.Logf("%d kills: %v", kills, rep)
	if rep.Lost != 0 || rep.OrderViolations != 0 {
		t.Fatalf("lost %d events, %d order violations", rep.Lost, rep.OrderViolations)
	}
	if rep.Committed < 200 {
		t.Fatalf("only %d events committed; the load was too light to mean anything", rep.Committed)
	}
}

// SIGTERM under load: the relay stops reading at a transaction boundary,
// waits for Kafka's acks, confirms, and exits 0. A restart then sends
// nothing twice.
func TestSIGTERMUnderLoadLeavesNoDuplicates(t *testing.T) {
	e := testenv.New(t)
	cfg := e.Config()
	e.Setup(cfg)
	load := e.StartLoad(t, 3)
	p := e.Run(t)
	// The stop under test is the stream's: a SIGTERM during setup, which
	// a busy machine can make last past any fixed wait, proves another.
	testenv.Eventually(t, 30*time.Second, "streaming", func() bool { return len(p.Logged("streaming")) > 0 })
	time.Sleep(1000 * time.Millisecond)
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		var exit *exec.ExitError
		errors.As(err, &exit)
		t.Fatalf("pgoutbox exited with %v after SIGTERM, want 0", err)
	}
	if !strings.Contains(p.Out.String(), `"msg":"stream stopped"`) {
		t.Errorf("no shutdown line in the log:\n%s", p.Out.String())
	}
	time.Sleep(300 * time.Millisecond)
	p2 := e.Run(t)
	time.Sleep(500 * time.Millisecond)
	committed := load.Finish()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	if err := p2.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("second exit: %v", err)
	}
	t.Logf("%v", rep)
	if rep.Lost != 0 || rep.Duplicates != 0 || rep.OrderViolations != 0 {
		t.Fatalf("after a clean stop: lost %d, duplicates %d, order violations %d", rep.Lost, rep.Duplicates, rep.OrderViolations)
	}
}
