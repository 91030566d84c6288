package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pgoutbox/pgoutbox/proc"
)

// relay is one pgoutbox run process, started again after each kill or
// stop on the same flags and metrics address.
type relay struct {
	index   int
	bin     string
	args    []string
	metrics string // host:port of --metrics-addr
	h       *History
	log     *os.File

	mu      sync.Mutex
	p       *proc.Process
	expect  bool // an exit now is one the harness caused
	started time.Time
	// unexpected are exits the harness did not cause; fenced counts the
	// exits of a relay fenced by the other of a pair.
	unexpected []string
	fenced     int
	mode       Mode
	pair       bool // another relay runs the same pipeline
}

// fencedExit is what a relay fenced under exactly-once exits with, at
// whichever step the fence met it (a record, the position record, the
// commit).
const fencedExit = "fenced by a newer producer with the same transactional id"

func newRelay(index int, bin string, args []string, dir string, h *History) (*relay, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(fmt.Sprintf("%s/relay-%d.log", dir, index))
	if err != nil {
		return nil, fmt.Errorf("nemesis: relay log: %w", err)
	}
	r := &relay{index: index, bin: bin, h: h, log: f, metrics: fmt.Sprintf("127.0.0.1:%d", port)}
	// --pprof: a relay found stuck has its goroutines written out.
	r.args = append(append([]string{"run"}, args...), "--metrics-addr", r.metrics, "--log-format", "json", "--pprof")
	return r, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("nemesis: a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start starts the process; the harness restarts it when it exits on its
// own (as a service manager would), after recording the exit.
func (r *relay) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil {
		return nil
	}
	p, err := proc.StartLogged(fmt.Sprintf("relay %d", r.index), r.bin, r.args, nil, &logLines{r: r})
	if err != nil {
		return err
	}
	r.p, r.expect, r.started = p, false, time.Now()
	idx := r.index
	r.h.Add(Event{Type: EventProcess, Relay: &idx, Msg: "started", Detail: fmt.Sprintf("pid %d", p.PID())})
	go r.watch(p)
	return nil
}

// watch records the process's exit; an exit the harness did not cause is
// kept as a finding, and the process is started again a second later.
func (r *relay) watch(p *proc.Process) {
	<-p.Exited()
	r.mu.Lock()
	expected := r.expect
	if r.p == p {
		r.p = nil
	}
	detail := "exit 0"
	if err := p.Err(); err != nil {
		detail = firstLine(err.Error())
	}
	// With another relay on the pipeline, exactly-once fences a relay
	// that lost its connection to PostgreSQL (and so the pipeline's lock)
	// while it still produced: it stops, by design, and a service manager
	// starts it again as the new standby.
	fenced := !expected && r.pair && strings.Contains(p.Output(), fencedExit)
	if fenced {
		r.fenced++
	} else if !expected {
		r.unexpected = append(r.unexpected, detail+": "+exitReason(p.Output()))
	}
	r.mu.Unlock()
	idx := r.index
	msg := "exited"
	switch {
	case fenced:
		msg = "exited: fenced by the other relay"
	case !expected:
		msg = "exited on its own"
	}
	r.h.Add(Event{Type: EventProcess, Relay: &idx, Msg: msg, Detail: detail})
	if !expected {
		time.Sleep(time.Second)
		r.mu.Lock()
		again := r.p == nil && !r.expect
		r.mu.Unlock()
		if again {
			r.start()
		}
	}
}

// kill sends SIGKILL and waits for the exit.
func (r *relay) kill() {
	r.mu.Lock()
	p := r.p
	r.expect = true
	r.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	r.waitGone(p)
}

// term sends SIGTERM and waits up to timeout for the exit (then kills);
// it returns the exit's error. early tells a process that the signal
// ended: one that had not yet reached main, where the relay starts
// handling it (a restart moments before), so that it died as it would by
// SIGKILL, before it did anything.
func (r *relay) term(timeout time.Duration) (early bool, err error) {
	r.mu.Lock()
	p := r.p
	r.expect = true
	r.mu.Unlock()
	if p == nil {
		return false, nil
	}
	err = p.Stop(timeout)
	r.waitGone(p)
	if sig, ok := p.Signal(); err != nil && ok && sig == syscall.SIGTERM {
		return true, nil
	}
	return false, err
}

// waitGone waits until watch has seen p's exit.
func (r *relay) waitGone(p *proc.Process) {
	for {
		r.mu.Lock()
		gone := r.p != p || p == nil
		r.mu.Unlock()
		if gone {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pid is the running process's id (0: none).
func (r *relay) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil {
		return 0
	}
	return r.p.PID()
}

func (r *relay) running() bool { return r.pid() != 0 }

func (r *relay) exits() (unexpected []string, fenced int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.unexpected...), r.fenced
}

// scrape reads the relay's metrics endpoint: metric name (with labels) to
// value.
func (r *relay) scrape(ctx context.Context) (map[string]float64, error) {
	body, err := r.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// get reads path from the relay's metrics address.
func (r *relay) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metrics+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// dumpGoroutines writes the running process's goroutines (from --pprof on
// its metrics address) next to its log, for a relay found stuck.
func (r *relay) dumpGoroutines(ctx context.Context, dir, why string) error {
	if !r.running() {
		return nil
	}
	b, err := r.get(ctx, "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return err
	}
	return os.WriteFile(fmt.Sprintf("%s/relay-%d-goroutines-%s.txt", dir, r.index, why), b, 0o644)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// exitReason is the line a relay exits with ("pgoutbox: ..."), else its
// last line.
func exitReason(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "pgoutbox: ") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}

// logLines copies a relay's output to its log file and records the lines
// about its mode and sessions in the history.
type logLines struct {
	r    *relay
	line []byte
}

// relayMessages are the relay's log messages the history keeps, and the
// mode each one means the relay is in ("" for no change).
var relayMessages = map[string]Mode{
	"streaming":                             ModeWAL,
	"polling":                               ModePoll,
	"polling several tables":                ModePoll,
	"switching to polling":                  "",
	"switching to WAL":                      "",
	"polling before streaming the new slot": "",
	"reconnecting":                          "",
	"stream stopped":                        "",
	"slot created":                          "",
	"another relay holds this pipeline; waiting to take over":               "",
	"exactly-once delivery: kafka has everything up to":                     "",
	"exactly-once delivery: the last kafka transaction is marked published": "",
}

func (l *logLines) Write(p []byte) (int, error) {
	l.r.log.Write(p)
	l.line = append(l.line, p...)
	for {
		i := bytes.IndexByte(l.line, '\n')
		if i < 0 {
			break
		}
		l.parse(l.line[:i])
		l.line = l.line[i+1:]
	}
	return len(p), nil
}

func (l *logLines) parse(line []byte) {
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		return
	}
	msg, _ := m["msg"].(string)
	level, _ := m["level"].(string)
	mode, keep := relayMessages[msg]
	// The Kafka client's own lines ("kafka: ...") repeat for every
	// connection attempt while the broker is away; the relay's lines say
	// what matters.
	if !keep && (level != "WARN" && level != "ERROR" || strings.HasPrefix(msg, "kafka: ")) {
		return
	}
	var at time.Time
	if s, ok := m["time"].(string); ok {
		at, _ = time.Parse(time.RFC3339Nano, s)
	}
	var detail []string
	for _, k := range []string{"reason", "err", "start_lsn", "position", "event_id", "slot"} {
		if v, ok := m[k]; ok {
			detail = append(detail, fmt.Sprintf("%s=%v", k, v))
		}
	}
	idx := l.r.index
	if mode != "" {
		l.r.mu.Lock()
		l.r.mode = mode
		l.r.mu.Unlock()
	}
	l.r.h.Add(Event{Type: EventRelay, Time: at, Relay: &idx, Mode: mode, Msg: level + " " + msg, Detail: strings.Join(detail, " ")})
}

var _ io.Writer = (*logLines)(nil)
