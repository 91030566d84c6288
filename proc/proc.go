// Package proc runs child processes that die with the process that started
// them: the devbroker that bench and the tests start, and the relay that the
// bench measures. It imports no testing, so the shipped binary may link it.
package proc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// maxOutput is how much of a child's output Output keeps showing.
const maxOutput = 4096

// Process is a running child process.
type Process struct {
	name   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

// Start starts bin with args, and env added to this process's environment
// (nil: inherited as is). What the child writes is kept for Output; stdout,
// when not nil, receives its standard output instead. name names it in
// errors.
//
// On Linux the child is killed if this process dies first. The kernel sends
// the parent-death signal when the thread that started the child exits, not
// the process, so that thread stays locked until the child exits.
func Start(name, bin string, args, env []string, stdout io.Writer) (*Process, error) {
	return start(nil, name, bin, args, env, func(*syncBuffer) io.Writer { return stdout }, false)
}

// StartAs is Start with the child running as the user and groups of cred,
// for servers that refuse to run as root (PgBouncer for the tests); nil
// runs it as this process.
func StartAs(cred *syscall.Credential, name, bin string, args, env []string) (*Process, error) {
	return start(cred, name, bin, args, env, func(*syncBuffer) io.Writer { return nil }, false)
}

// StartLogged is Start with both of the child's streams copied to w as it
// writes them, as well as kept for Output: for a caller that reads the
// child's log while it runs.
func StartLogged(name, bin string, args, env []string, w io.Writer) (*Process, error) {
	return start(nil, name, bin, args, env, func(out *syncBuffer) io.Writer { return io.MultiWriter(out, w) }, true)
}

// start is StartAs with the standard output chosen once the output buffer
// exists, so that a writer may also copy into it; with both, the standard
// error goes there too.
func start(cred *syscall.Credential, name, bin string, args, env []string, stdout func(*syncBuffer) io.Writer, both bool) (*Process, error) {
	p := &Process{name: name, cmd: exec.Command(bin, args...), out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = p.out
	p.cmd.Stdout = p.out
	if w := stdout(p.out); w != nil {
		p.cmd.Stdout = w
		if both {
			p.cmd.Stderr = w
		}
	}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.SysProcAttr = dieWithParent(cred)
	started := make(chan error, 1)
	go func() {
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
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return p, nil
}

// Await asks ready, every interval, whether the process serves, until it
// says so (nil), the process exits, or within has passed; a question is
// bounded by what is left of within. The error names the process and, on a
// timeout, ready's last answer.
func (p *Process) Await(within, interval time.Duration, ready func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %v", p.name, p.Err())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %w", p.name, within, err)
		case <-tick.C:
		}
	}
}

// HTTPOK is a question for Await: a GET of each of urls answered 200 OK.
func HTTPOK(urls ...string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for _, u := range urls {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", u, resp.Status)
			}
		}
		return nil
	}
}

// Name is the name given to Start.
func (p *Process) Name() string { return p.name }

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Output is what the process wrote so far, its last 4 KiB.
func (p *Process) Output() string {
	s := p.out.String()
	if len(s) > maxOutput {
		s = "..." + s[len(s)-maxOutput:]
	}
	return s
}

// Err is, once Exited is closed, nil after a clean exit and otherwise the
// exit status with the output.
func (p *Process) Err() error {
	if p.err != nil {
		return fmt.Errorf("%s exited: %v; output:\n%s", p.name, p.err, p.Output())
	}
	return nil
}

// Signal is, once Exited is closed, the signal that ended the process, if
// one did (rather than an exit of its own).
func (p *Process) Signal() (syscall.Signal, bool) {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}

// Stop sends SIGTERM and waits up to timeout for the exit, then kills. It
// returns an error if the process did not exit cleanly.
func (p *Process) Stop(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.Err()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.Err()
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not exit within %s of SIGTERM; output:\n%s", p.name, timeout, p.Output())
	}
}

// Kill sends SIGKILL and waits for the exit: the child flushes nothing.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// syncBuffer is a bytes.Buffer safe for exec.Cmd's copying goroutines and a
// reader at the same time.
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
