package proc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// readyTimeout bounds how long the devbroker may take to print its ready
// line.
const readyTimeout = 30 * time.Second

// Devbroker is the devbroker command (cmd/devbroker) as a child process.
type Devbroker struct {
	*Process
	// Brokers is the address it serves the Kafka protocol on.
	Brokers []string
}

// StartDevbroker starts bin, the devbroker command, listening on listen (""
// is a free loopback port) with args added (such as "--data-dir", dir), and
// waits until its "ready on HOST:PORT" line names the address it serves.
// A broker that exits first, prints no ready line within 30 s, or outlives
// ctx is killed, and the error carries its output.
func StartDevbroker(ctx context.Context, bin, listen string, args ...string) (*Devbroker, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	args = append([]string{"--listen", listen}, args...)
	w := &readyWriter{ready: make(chan string, 1)}
	p, err := start(nil, "devbroker", bin, args, nil, func(out *syncBuffer) io.Writer {
		w.tee = out
		return w
	}, false)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case addr := <-w.ready:
		return &Devbroker{Process: p, Brokers: []string{addr}}, nil
	case <-p.exited:
		return nil, fmt.Errorf("devbroker %v exited before it was ready (%v); output:\n%s", args, p.err, p.Output())
	case <-ctx.Done():
		p.Kill()
		return nil, ctx.Err()
	case <-timer.C:
		p.Kill()
		return nil, fmt.Errorf("devbroker %v printed no ready line within %v; output:\n%s", args, readyTimeout, p.Output())
	}
}

// Close stops the broker: SIGTERM, then SIGKILL after 10 s.
func (d *Devbroker) Close() error { return d.Stop(10 * time.Second) }

// readyWriter is the devbroker's standard output: it copies it to tee and
// reports the address of the first "ready on HOST:PORT" line.
type readyWriter struct {
	tee   io.Writer
	mu    sync.Mutex
	line  []byte // the incomplete last line
	found bool
	ready chan string
}

func (w *readyWriter) Write(p []byte) (int, error) {
	_, _ = w.tee.Write(p)
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
