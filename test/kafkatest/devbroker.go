package kafkatest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

const (
	devbrokerPkg = "github.com/pgoutbox/pgoutbox/cmd/devbroker"
	stopTimeout  = 30 * time.Second
)

// Devbroker is the devbroker command running as a separate process, for
// tests that kill the broker and check what survives. Its methods fail the
// test they were started for, so call them from that test's goroutine.
type Devbroker struct {
	// Brokers is the seed address, the same across restarts.
	Brokers []string

	t       testing.TB
	bin     string
	dataDir string
	extra   []string // more flags, such as --max-message-bytes
	addr    string   // host:port, "" until the first start

	proc *proc.Devbroker // nil when not running
}

// StartDevbroker builds the devbroker command (once per test binary), starts
// it on a free port, with its data in dataDir ("" keeps it in memory), and
// waits until it is ready. The process is killed when the test ends, and
// also if the test binary dies first. Extra flags go to every start, for
// instance "--max-message-bytes", "100000".
func StartDevbroker(t testing.TB, dataDir string, extra ...string) *Devbroker {
	t.Helper()
	d := &Devbroker{
		t:       t,
		bin:     testbin.Build(t, devbrokerPkg),
		dataDir: dataDir,
		extra:   extra,
	}
	t.Cleanup(func() {
		if d.proc != nil {
			d.proc.Kill()
			d.proc = nil
		}
	})
	d.Start()
	return d
}

// Start starts the broker again, on the same port with the same data
// directory. The test fails if it is running.
func (d *Devbroker) Start() {
	d.t.Helper()
	if d.proc != nil {
		d.t.Fatalf("kafkatest: devbroker on %s is already running", d.addr)
	}
	args := []string{"--log-level", "warn"}
	if d.dataDir != "" {
		args = append(args, "--data-dir", d.dataDir)
	}
	args = append(args, d.extra...)
	// Something else may take the port in the moment it is free; that is
	// rare, so a short retry is enough. The first start picks a port
	// outside the range the kernel gives outgoing connections (package
	// freeport), a new one at each try, so that no client's connection
	// holds it when the broker is started again.
	first := d.addr == ""
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if first {
			port, perr := freeport.Port()
			if perr != nil {
				d.t.Fatalf("kafkatest: %v", perr)
			}
			d.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
		var p *proc.Devbroker
		p, err = proc.StartDevbroker(context.Background(), d.bin, d.addr, args...)
		if err == nil {
			d.proc = p
			d.addr = p.Brokers[0]
			d.Brokers = p.Brokers
			return
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.t.Fatalf("kafkatest: %v", err)
}

// Kill sends SIGKILL and waits for the process to exit: nothing is flushed,
// only what the broker wrote before acknowledging survives.
func (d *Devbroker) Kill() {
	d.t.Helper()
	d.running("kill").Kill()
	d.proc = nil
}

// Stop sends SIGTERM and waits for a clean exit. The test fails if the
// broker does not exit 0 within 30 s.
func (d *Devbroker) Stop() {
	d.t.Helper()
	p := d.running("stop")
	d.proc = nil
	if err := p.Stop(stopTimeout); err != nil {
		d.t.Fatalf("kafkatest: stopping devbroker: %v", err)
	}
}

func (d *Devbroker) running(verb string) *proc.Devbroker {
	d.t.Helper()
	if d.proc == nil {
		d.t.Fatalf("kafkatest: cannot %s devbroker on %s: not running", verb, d.addr)
	}
	return d.proc
}
