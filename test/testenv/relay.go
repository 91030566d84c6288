package testenv

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/sink"
)

// Config is a relay configuration for e's database and broker: fast
// status updates and heartbeats so that positions can be observed
// quickly, topics created on first use, and a slot created if missing.
func (e *Env) Config() relay.Config {
	var cfg relay.Config
	cfg.CreateSlot = true
	cfg.Replication.DatabaseURL = e.URL
	cfg.Replication.StatusInterval = 100 * time.Millisecond
	cfg.Replication.HeartbeatInterval = 200 * time.Millisecond
	cfg.Sink = &broker.Kafka{Config: sink.Config{Brokers: e.Brokers, CreateTopics: true}}
	cfg.MaxBackoff = time.Second
	return cfg
}

// PollConfig is Config in poll mode, polling every 50 ms.
func PollConfig(e *Env) relay.Config {
	cfg := e.Config()
	cfg.Mode = relay.ModePoll
	cfg.PollInterval = 50 * time.Millisecond
	return cfg
}

// Setup creates the publication and slot, so that everything written from
// now on is in the slot's stream.
func (e *Env) Setup(cfg relay.Config) {
	e.T.Helper()
	cfg.Defaults()
	if _, err := relay.Setup(context.Background(), e.Conn, cfg.Replication, true, false); err != nil {
		e.T.Fatalf("setup: %v", err)
	}
}

// Running is a relay running in the test's process (Start).
type Running struct {
	*relay.Relay
	cancel  context.CancelFunc
	exit    chan struct{} // closed once Run has returned
	exitErr error         // what Run returned, once exit is closed
}

// Start runs a relay in the test's process, logging to the test's log,
// until the test ends or Stop is called.
func (e *Env) Start(cfg relay.Config) *Running {
	e.T.Helper()
	r, err := relay.New(cfg, Logger(e.T))
	if err != nil {
		e.T.Fatalf("relay: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &Running{Relay: r, cancel: cancel, exit: make(chan struct{})}
	go func() {
		run.exitErr = r.Run(ctx)
		close(run.exit)
	}()
	e.T.Cleanup(func() { run.Stop() })
	return run
}

// Done is closed once Run has returned; Err then says what it returned.
func (r *Running) Done() <-chan struct{} { return r.exit }

// Err waits for Run to return and returns what it returned.
func (r *Running) Err() error {
	<-r.exit
	return r.exitErr
}

// Stop asks the relay to shut down, waits up to a minute for Run to return
// and returns what it returned.
func (r *Running) Stop() error {
	r.cancel()
	select {
	case <-r.exit:
		return r.exitErr
	case <-time.After(60 * time.Second):
		return errors.New("relay did not stop within 60s")
	}
}

// Logger writes a relay's log to the test log, so that it shows with a
// failure and stays quiet otherwise; PGOUTBOX_TEST_LOG sends it to stderr,
// debug lines included.
func Logger(t *testing.T) *slog.Logger {
	if os.Getenv("PGOUTBOX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

// tWriter writes each of its writes as a line of the test log.
type tWriter struct{ t *testing.T }

var _ io.Writer = tWriter{}

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
