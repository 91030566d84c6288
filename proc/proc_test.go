package proc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "child")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A stand-in for the devbroker: it names its flags, writes a line before
// the ready line, and exits 0 on SIGTERM.
const fakeBroker = `trap 'echo stopping >&2; exit 0' TERM
echo "flags: $*" >&2
echo "starting"
echo "devbroker ready on 127.0.0.1:4242"
while :; do sleep 0.05; done`

func TestStartDevbroker(t *testing.T) {
	d, err := StartDevbroker(context.Background(), script(t, fakeBroker), "", "--data-dir", "/x")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Brokers) != 1 || d.Brokers[0] != "127.0.0.1:4242" {
		t.Errorf("brokers %v, want the address of the ready line", d.Brokers)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	out := d.Output()
	for _, want := range []string{"flags: --listen 127.0.0.1:0 --data-dir /x", "starting", "ready on", "stopping"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestStartDevbrokerListen(t *testing.T) {
	d, err := StartDevbroker(context.Background(), script(t, fakeBroker), "127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Kill()
	// stderr is copied by a goroutine of its own: wait for it.
	waitOutput(t, d.Process, "flags: --listen 127.0.0.1:9999\n")
}

func TestStartDevbrokerExitsBeforeReady(t *testing.T) {
	_, err := StartDevbroker(context.Background(), script(t, `echo "listen: address already in use" >&2; exit 1`), "")
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("err %v, want the early exit with the output", err)
	}
}

func TestStartDevbrokerContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := StartDevbroker(ctx, script(t, `exec sleep 30`), "")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("returned after %s", d)
	}
}

// A child that ignores SIGTERM is killed once the timeout passes, and Stop
// says so.
func TestStopKillsAfterTimeout(t *testing.T) {
	p, err := Start("stubborn", script(t, `trap '' TERM; echo up; exec sleep 30`), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "up")
	err = p.Stop(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "stubborn did not exit within") {
		t.Fatalf("stop: %v", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("not exited after Stop")
	}
}

// Signal tells a process the signal ended from one that exited on its
// own, as the nemesis tells a SIGTERM before the relay handled signals.
func TestSignal(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         syscall.Signal
		signaled     bool
	}{
		{"ended by SIGTERM", `echo up; exec sleep 30`, syscall.SIGTERM, true},
		{"exits on SIGTERM", `trap 'kill $!; exit 0' TERM; echo up; sleep 30 & wait`, 0, false},
		{"exit status", `trap 'kill $!; exit 3' TERM; echo up; sleep 30 & wait`, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(tc.name, script(t, tc.script), nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			waitOutput(t, p, "up")
			_ = p.Stop(10 * time.Second)
			if sig, ok := p.Signal(); ok != tc.signaled || sig != tc.want {
				t.Errorf("Signal() = %v, %t; want %v, %t", sig, ok, tc.want, tc.signaled)
			}
		})
	}
}

func TestErrAndStdout(t *testing.T) {
	var w lockedBuffer
	p, err := Start("failing", script(t, `echo to-stdout; echo to-stderr >&2; echo "$FOO"; exit 3`), nil, []string{"FOO=bar"}, &w)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	err = p.Err()
	if err == nil || !strings.Contains(err.Error(), "failing exited: exit status 3") || !strings.Contains(err.Error(), "to-stderr") {
		t.Fatalf("err %v", err)
	}
	if got := w.String(); got != "to-stdout\nbar\n" {
		t.Errorf("stdout %q", got)
	}
	if strings.Contains(p.Output(), "to-stdout") {
		t.Errorf("output %q holds what went to the stdout writer", p.Output())
	}
	if err := p.Stop(time.Second); err == nil {
		t.Error("Stop after a failed exit returned nil")
	}
}

func TestOutputKeepsTheEnd(t *testing.T) {
	p, err := Start("chatty", script(t, `i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done`), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	out := p.Output()
	if !strings.HasPrefix(out, "...") || !strings.HasSuffix(out, "line 1999\n") || len(out) != maxOutput+3 {
		t.Errorf("output of %d bytes: %.40q ... %q", len(out), out, out[max(0, len(out)-20):])
	}
}

func waitOutput(t *testing.T, p *Process, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Output(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output within 10s: %q", want, p.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Await returns once ready says so, names the process when it exits
// first, and gives ready's last answer when time runs out.
func TestAwait(t *testing.T) {
	sleeper := script(t, "exec sleep 5")
	t.Run("ready", func(t *testing.T) {
		p, err := Start("sleeper", sleeper, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill()
		asked := 0
		err = p.Await(5*time.Second, time.Millisecond, func(context.Context) error {
			if asked++; asked < 3 {
				return errors.New("not yet")
			}
			return nil
		})
		if err != nil || asked != 3 {
			t.Fatalf("asked %d times: %v", asked, err)
		}
	})
	t.Run("exited", func(t *testing.T) {
		p, err := Start("quitter", script(t, "exit 3"), nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = p.Await(5*time.Second, time.Millisecond, func(context.Context) error { return errors.New("not yet") })
		if err == nil || !strings.Contains(err.Error(), "quitter exited") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		p, err := Start("sleeper", sleeper, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill()
		last := errors.New("connection refused")
		err = p.Await(50*time.Millisecond, 10*time.Millisecond, func(context.Context) error { return last })
		if !errors.Is(err, last) || !strings.Contains(err.Error(), "sleeper not ready within 50ms") {
			t.Fatalf("got %v", err)
		}
	})
}

// HTTPOK asks every URL and wants 200 from each.
func TestHTTPOK(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := HTTPOK(srv.URL+"/a", srv.URL+"/b")(ctx); err != nil {
		t.Fatal(err)
	}
	if err := HTTPOK(srv.URL+"/a", srv.URL+"/down")(ctx); err == nil || !strings.Contains(err.Error(), "/down: 503") {
		t.Fatalf("got %v", err)
	}
	srv.Close()
	if err := HTTPOK(srv.URL + "/a")(ctx); err == nil {
		t.Fatal("a closed server answered")
	}
}
