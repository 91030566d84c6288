package kafkatest

import (
	"bytes"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testbin"
)

const (
	devbrokerPkg = "github.com/pgoutbox/pgoutbox/cmd/devbroker"
	readyTimeout = 30 * time.Second
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
	addr    string   // host:port, "127.0.0.1:0" until the first start

	proc *process // nil when not running
}

// process is one run of the binary.
type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, readable after exited is closed
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
		addr:    "127.0.0.1:0", // the broker picks the port and names it in its ready line
	}
	t.Cleanup(func() {
		if d.proc != nil {
			_ = d.proc.cmd.Process.Kill()
			<-d.proc.exited
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
	// Something else may take the port in the moment it is free; that is
	// rare, so a short retry is enough.
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var addr string
		addr, err = d.launch()
		if err == nil {
			d.addr = addr
			d.Brokers = []string{addr}
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
	p := d.running("kill")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatalf("kafkatest: killing devbroker: %v", err)
	}
	<-p.exited
	d.proc = nil
}

// Stop sends SIGTERM and waits for a clean exit. The test fails if the
// broker does not exit 0 within 30 s.
func (d *Devbroker) Stop() {
	d.t.Helper()
	p := d.running("stop")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatalf("kafkatest: stopping devbroker: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		d.proc = nil
		d.t.Fatalf("kafkatest: devbroker did not exit within %v of SIGTERM; stderr:\n%s", stopTimeout, p.stderr)
	}
	d.proc = nil
	if p.err != nil {
		d.t.Fatalf("kafkatest: devbroker exited with %v after SIGTERM; stderr:\n%s", p.err, p.stderr)
	}
}

func (d *Devbroker) running(verb string) *process {
	d.t.Helper()
	if d.proc == nil {
		d.t.Fatalf("kafkatest: cannot %s devbroker on %s: not running", verb, d.addr)
	}
	return d.proc
}

// launch starts the binary and returns the address from its ready line.
func (d *Devbroker) launch() (string, error) {
	args := []string{"--listen", d.addr, "--log-level", "warn"}
	if d.dataDir != "" {
		args = append(args, "--data-dir", d.dataDir)
	}
	args = append(args, d.extra...)
	stdout := newReadyWriter()
	p := &process{
		cmd:    exec.Command(d.bin, args...),
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	p.cmd.Stdout = stdout
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = dieWithParent()

	started := make(chan error, 1)
	go func() {
		// The kernel sends the parent-death signal when the thread that
		// started the child exits, not the process; holding this thread
		// until the child is gone makes it mean "the test binary died".
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return "", fmt.Errorf("starting %s: %w", d.bin, err)
	}

	select {
	case addr := <-stdout.ready:
		d.proc = p
		return addr, nil
	case <-p.exited:
		return "", fmt.Errorf("devbroker %v exited before it was ready (%v); stderr:\n%s", args, p.err, p.stderr)
	case <-time.After(readyTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return "", fmt.Errorf("devbroker %v printed no ready line within %v; stderr:\n%s", args, readyTimeout, p.stderr)
	}
}

// readyWriter is the process's stdout: it reports the address of the first
// "ready on HOST:PORT" line.
type readyWriter struct {
	mu    sync.Mutex
	line  []byte // the incomplete last line
	found bool
	ready chan string
}

func newReadyWriter() *readyWriter { return &readyWriter{ready: make(chan string, 1)} }

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.found {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.line[:i])
		w.line = w.line[i+1:]
		if _, addr, ok := strings.Cut(line, "ready on "); ok {
			w.found = true
			w.line = nil
			w.ready <- strings.TrimSpace(addr)
			return len(p), nil
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the writer goroutine of exec.Cmd and
// a test reading it at the same time.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
