package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// Usage is a process's resource use so far.
type Usage struct {
	CPU     time.Duration // user + system
	PeakRSS int64         // bytes, VmHWM
}

// ReadUsage reads utime+stime from /proc/PID/stat and VmHWM from
// /proc/PID/status.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, errors.New("bench: malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return u, errors.New("bench: short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("bench: /proc stat: %w", err)
	}
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return u, fmt.Errorf("bench: VmHWM: %w", err)
			}
			u.PeakRSS = kb << 10
		}
	}
	return u, nil
}

// ReadThreadsCPU is the CPU time the live threads of process pid have run,
// the sum of /proc/PID/task/*/schedstat's first field (nanoseconds). It is
// finer than /proc/PID/stat's 10 ms ticks, which short runs need; the time
// of threads that exited is missing from it (the Go runtime keeps its
// threads), so take differences over a window, not totals.
func ReadThreadsCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	read := 0
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited since ReadDir
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: schedstat: %w", err)
		}
		sum += time.Duration(ns)
		read++
	}
	if read == 0 {
		return 0, fmt.Errorf("bench: no schedstat under %s", dir)
	}
	return sum, nil
}

// CPUTimes are the machine's CPU times from the first line of /proc/stat,
// in USER_HZ ticks: idle (idle and iowait: nothing ran) and the total.
type CPUTimes struct {
	Idle, Total uint64
}

// ReadCPUTimes reads the "cpu" line of /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	return parseCPUTimes(string(line))
}

// parseCPUTimes reads "cpu user nice system idle iowait irq softirq steal
// guest guest_nice". Guest time is already counted in user and nice.
func parseCPUTimes(line string) (CPUTimes, error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return CPUTimes{}, errors.New("bench: malformed /proc/stat")
	}
	var t CPUTimes
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("bench: /proc/stat: %w", err)
		}
		t.Total += v
		if i == 3 || i == 4 { // idle, iowait
			t.Idle += v
		}
	}
	return t, nil
}

// IdlePercent is the share of the machine's CPU time between t0 and t1
// during which nothing ran, 0 to 100; -1 when no time passed.
func IdlePercent(t0, t1 CPUTimes) float64 {
	total := float64(t1.Total) - float64(t0.Total)
	if total <= 0 {
		return -1
	}
	return min(100, max(0, 100*(float64(t1.Idle)-float64(t0.Idle))/total))
}

// Process is a child process: the relay under test or the devbroker.
type Process struct {
	name   string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

// startProcess starts bin with args, and env added to this process's
// environment. The process is killed if this one dies first (the
// parent-death signal is tied to the starting thread, so that thread stays
// locked until the child exits). stdout, when not nil, receives the child's
// standard output instead of Output (a lineWatcher passes it on).
func startProcess(name, bin string, args, env []string, stdout io.Writer) (*Process, error) {
	p := &Process{name: name, cmd: exec.Command(bin, args...), out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = p.out
	p.cmd.Stdout = p.out
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	if lw, ok := stdout.(*lineWatcher); ok {
		lw.tee = p.out
	}
	if stdout != nil {
		p.cmd.Stdout = stdout
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Output is what the process wrote so far, its last 4 KiB.
func (p *Process) Output() string {
	s := p.out.String()
	if len(s) > 4096 {
		s = "..." + s[len(s)-4096:]
	}
	return s
}

// Stop sends SIGTERM and waits up to timeout for the exit, then kills.
// It returns an error if the process did not exit cleanly.
func (p *Process) Stop(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.exitErr()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitErr()
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not exit within %s of SIGTERM; output:\n%s", p.name, timeout, p.Output())
	}
}

// goneErr explains an exit that came before the work was done: even a
// clean exit is an error then.
func (p *Process) goneErr() error {
	if err := p.exitErr(); err != nil {
		return err
	}
	return fmt.Errorf("%s exited early; output:\n%s", p.name, p.Output())
}

func (p *Process) exitErr() error {
	if p.err != nil {
		return fmt.Errorf("%s exited: %v; output:\n%s", p.name, p.err, p.Output())
	}
	return nil
}

// Devbroker is the devbroker command as a child process.
type Devbroker struct {
	*Process
	// Brokers is the address it serves the Kafka protocol on.
	Brokers []string
}

// StartDevbroker starts bin (the devbroker command) on a free loopback
// port, in memory, and waits for its ready line.
func StartDevbroker(ctx context.Context, bin string) (*Devbroker, error) {
	w := &lineWatcher{match: "ready on ", found: make(chan string, 1)}
	p, err := startProcess("devbroker", bin, []string{"--listen", "127.0.0.1:0", "--log-level", "error"}, nil, w)
	if err != nil {
		return nil, err
	}
	select {
	case addr := <-w.found:
		return &Devbroker{Process: p, Brokers: []string{addr}}, nil
	case <-p.exited:
		return nil, fmt.Errorf("devbroker exited before it was ready: %v\n%s", p.err, p.Output())
	case <-ctx.Done():
		_ = p.Stop(5 * time.Second)
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		_ = p.Stop(5 * time.Second)
		return nil, fmt.Errorf("devbroker printed no ready line within 30s:\n%s", p.Output())
	}
}

// Close stops the broker.
func (d *Devbroker) Close() error { return d.Stop(10 * time.Second) }

// lineWatcher reports what follows match on the first line containing it.
type lineWatcher struct {
	mu    sync.Mutex
	match string
	line  []byte
	done  bool
	found chan string
	tee   *syncBuffer
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.tee.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
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
		if _, rest, ok := strings.Cut(line, w.match); ok {
			w.done = true
			w.line = nil
			w.found <- strings.TrimSpace(rest)
			return len(p), nil
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
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
