package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testbin"
)

// Bin is the path of the pgoutbox binary, built once per test binary.
func Bin(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
}

// Proc is a pgoutbox process the test started; it is killed when the test
// ends, and its output is logged then if the test failed (or
// PGOUTBOX_TEST_OUTPUT is set).
type Proc struct {
	Cmd     *exec.Cmd     // its Process may be signalled (SIGSTOP, SIGCONT)
	Out     *Output       // stdout and stderr, readable while it runs
	exit    chan struct{} // closed once it has exited
	exitErr error         // what Wait returned, once exit is closed
}

// Done is closed once the process has exited; Err then says how.
func (p *Proc) Done() <-chan struct{} { return p.exit }

// Err waits for the process to exit and returns how it did (nil: exit 0).
func (p *Proc) Err() error {
	<-p.exit
	return p.exitErr
}

// Signal sends sig and waits up to a minute for the process to exit,
// returning how it did.
func (p *Proc) Signal(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exit:
		return p.exitErr
	case <-time.After(60 * time.Second):
		t.Fatalf("pgoutbox did not exit within 60s of %s", sig)
		return nil
	}
}

// Stop ends a relay with SIGTERM and requires a clean exit.
func (p *Proc) Stop(t *testing.T) {
	t.Helper()
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("pgoutbox exited with %v after SIGTERM:\n%s", err, p.Out.String())
	}
}

// Pause stops p (SIGSTOP) until the test continues it or ends.
func (p *Proc) Pause(t *testing.T) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cmd.Process.Signal(syscall.SIGCONT) }) // before its stop
}

// Logged returns p's log lines whose message is msg.
func (p *Proc) Logged(msg string) []LogLine {
	var out []LogLine
	for _, l := range p.Out.Lines(`"msg":"` + msg + `"`) {
		var ll LogLine
		if json.Unmarshal([]byte(l), &ll) == nil && ll.Msg == msg {
			ll.Raw = l
			out = append(out, ll)
		}
	}
	return out
}

// LogLine is one line of a relay's JSON log (--log-format json).
type LogLine struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
	Raw  string    // the whole line
}

// Output is a process's output, readable while it runs.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// String is everything written so far.
func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Write appends p; a process writes its output through it.
func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Lines returns the output lines that contain every one of parts.
func (b *Output) Lines(parts ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// StartBinary starts the binary with args as given (Run adds run's
// defaults).
func StartBinary(t *testing.T, args ...string) *Proc {
	t.Helper()
	return StartBinaryEnv(t, nil, args...)
}

// StartBinaryEnv is StartBinary with env (KEY=value) added to the
// environment.
func StartBinaryEnv(t *testing.T, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Cmd: exec.Command(Bin(t), args...), Out: &Output{}, exit: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = p.Out, p.Out
	if env != nil {
		p.Cmd.Env = append(os.Environ(), env...)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.exitErr = p.Cmd.Wait()
		close(p.exit)
	}()
	t.Cleanup(func() {
		p.Cmd.Process.Kill()
		<-p.exit
		if t.Failed() || os.Getenv("PGOUTBOX_TEST_OUTPUT") != "" {
			t.Logf("pgoutbox output:\n%s", p.Out.String())
		}
	})
	return p
}

// Run starts pgoutbox run against e's database and broker with RunArgs.
func (e *Env) Run(t *testing.T, extra ...string) *Proc {
	t.Helper()
	return StartBinary(t, e.RunArgs(e.URL, extra...)...)
}

// RunArgs is the command line of pgoutbox run against the database at url
// (e's, or e's through a pooler) and e's broker, with status updates every
// 100 ms, heartbeats every 200 ms and JSON logs; extra flags come after
// these and win over them.
func (e *Env) RunArgs(url string, extra ...string) []string {
	return append([]string{"run",
		"--database-url", url,
		"--kafka-brokers", strings.Join(e.Brokers, ","),
		"--status-interval", "100ms",
		"--heartbeat-interval", "200ms",
		"--log-format", "json",
	}, extra...)
}

// CLI runs a pgoutbox subcommand to its end and returns its stdout,
// stderr and whether it exited 0.
func CLI(t *testing.T, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.Command(Bin(t), args...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("pgoutbox %s: %v", args[0], err)
	}
	return string(out), errOut.String(), err == nil
}

// CLIOutput is CLI with stdout and stderr together, after a newline (to
// follow a failure's message), and whether it exited 0.
func CLIOutput(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	out, errOut, ok := CLI(t, args...)
	return "\n" + out + errOut, ok
}

// RunOnce runs the binary with env added to the environment to its end,
// or stops it with SIGTERM after d, and returns its exit code and
// everything it printed.
func RunOnce(t *testing.T, d time.Duration, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, Bin(t), args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	}
	return code, string(out)
}

// RunToExit runs the binary and waits up to a minute for it to exit (or
// fails the test), and returns everything it printed and how it exited.
func RunToExit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := Bin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("pgoutbox %s did not exit within a minute:\n%s", args[0], out)
	}
	return string(out), err
}

// Migrate runs pgoutbox migrate --table tables against e's database to
// its end and returns everything it printed.
func Migrate(t *testing.T, e *Env, tables string) (string, error) {
	t.Helper()
	out, err := exec.Command(Bin(t), "migrate", "--table", tables, "--database-url", e.URL).CombinedOutput()
	return string(out), err
}

// ExpectOutput checks a run's exit code (want -1: it was stopped while
// running, any code) and its output: every one of wants is in it, no
// secret is.
func ExpectOutput(t *testing.T, code, want int, out string, wants, secrets []string) {
	t.Helper()
	if want >= 0 && code != want {
		t.Errorf("exit code %d, want %d", code, want)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("output shows the secret %q", s)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// WriteFile writes text to a file called name in a directory of the
// test's, readable by its owner only, as users keep configuration files
// with secrets, and returns its path.
func WriteFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
