// Package relay is the pipeline: it reads outbox rows from the replication
// stream (or by polling), encodes and routes them, produces them to Kafka,
// and confirms a transaction's commit LSN to Postgres (or marks the polled
// rows published) only once Kafka acknowledged it and everything before
// it. It reconnects with backoff when Postgres or Kafka go away and shuts
// down at a transaction boundary.
//
// A piece of state belongs to the type that lives as long as it does:
//   - Relay (relay.go) supervises: it runs one session after the other,
//     switching modes as the mode machine (modes.go, a pure function)
//     says, until it stops.
//   - pipeline (pipeline.go) is built once and shared by every session:
//     the configuration, the outbox tables, encoder and router, the hooks
//     the relay reports to (hooks.go; Prometheus's in metrics.go),
//     readiness (readiness.go), refusals.
//   - A session lives as long as its connection and owns what does: the
//     lease, the cluster it is on, the floor, the deleted-row detector.
//     walsession.go streams the WAL (with statesaver.go beside it);
//     pollsession.go polls one table; pollgroup.go polls several.
//   - A session's delivery (delivery.go) is chosen once when it opens:
//     atleastonce.go (over internal/flow) or exactlyonce.go (over
//     internal/eos); the row path (publisher.go) is the same for both and
//     for both modes.
//
// docs/architecture.md follows one row through these files.
package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/store"
)

// ErrSlotLost means the slot this pipeline streamed from is gone. Rows
// committed since its last confirmed position are only in the table; the
// relay does not create a new slot silently over that gap.
var ErrSlotLost = errors.New("replication slot was lost")

// ErrShutdownIncomplete means a requested stop could not flush or confirm
// everything before ShutdownTimeout; what was not confirmed is sent again
// on the next start.
var ErrShutdownIncomplete = errors.New("shutdown incomplete")

// Relay moves outbox rows from one slot to Kafka. It only supervises:
// Run starts a session, and when it ends, the next one, in the mode the
// mode machine says, until it is stopped.
type Relay struct {
	p *pipeline
	// Metrics are the Prometheus metrics (metrics.go), one of the relay's
	// hooks.
	Metrics *Metrics
	// Readiness is whether the relay is connected to both ends and
	// publishing (readiness.go).
	Readiness *Readiness
	// Stats are updated as the relay runs.
	Stats *Stats
	// mode is the mode of the current (or last) session.
	mode modeNow
}

// New validates cfg and builds a relay.
func New(cfg Config, log *slog.Logger) (*Relay, error) {
	stats := new(Stats)
	ready := newReadiness(sinkName(cfg.Sink))
	m := NewMetrics(&stats.LastPublish, ready)
	p, err := newPipeline(cfg, log, append(hooks{m}, cfg.Hooks...), ready, stats)
	if err != nil {
		return nil, err
	}
	m.tables(p.tableList())
	return &Relay{p: p, Metrics: m, Readiness: ready, Stats: stats}, nil
}

// Handler serves the relay's /metrics, /healthz and /readyz (OpsHandler).
func (r *Relay) Handler() http.Handler { return OpsHandler(r.Metrics, r.Readiness) }

// Mode returns the mode the relay is in now: wal or poll.
func (r *Relay) Mode() Mode { return r.mode.get() }

// modeNow is the mode of the current session, which sessions set once
// they recorded it.
type modeNow struct{ v atomic.Value }

// set sets the mode; on a nil modeNow (a table of a poll group, whose
// group sets it) it does nothing.
func (m *modeNow) set(mode Mode) {
	if m != nil {
		m.v.Store(string(mode))
	}
}

func (m *modeNow) get() Mode {
	s, _ := m.v.Load().(string)
	return Mode(s)
}

// session is one session of the pipeline, on its own connection: it ends
// with a transition to another mode, or an error.
type session interface {
	run(ctx context.Context) (transition, error)
}

// Run relays until ctx ends, then stops reading at a transaction boundary,
// waits for Kafka to ack what is in flight, confirms it and returns nil.
// It returns an error only for what retrying cannot fix.
func (r *Relay) Run(ctx context.Context) error {
	p, cfg := r.p, r.p.cfg
	var use SinkUse
	if cfg.Delivery == ExactlyOnce {
		use = SinkUse{TransactionalID: cfg.transactionalID(), PositionTopic: cfg.Transactions.PositionTopic}
	}
	k, err := p.open(use)
	if err != nil {
		return err
	}
	defer k.Close()
	g := &gate{p: p}
	defer g.release()
	// Credentials or TLS settings that can never work stop the relay here
	// with the reason; a broker that is only unreachable is retried, and
	// records wait for it.
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = k.Ping(pctx)
	cancel()
	switch {
	case err != nil && permanent(err):
		return err
	case err != nil && ctx.Err() == nil:
		r.Readiness.broker.ping(err)
		p.log.Warn(cfg.Sink.Name()+" is not reachable yet; records wait for it", "err", err)
	}
	defer monitor{p: p, k: k.Sink, to: p.hooks.samples()}.start(ctx)() // monitor.go
	if !cfg.Snapshot.Streams() {
		return r.snapshotOnly(ctx, k, g) // snapshot.go
	}

	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 250 * time.Millisecond
	bo.MaxInterval = cfg.MaxBackoff
	bo.MaxElapsedTime = 0
	var (
		m = start(cfg.Mode) // modes.go
		// polled hands the rows a poll phase published to the WAL
		// session after it.
		polled flow.Polled
	)
	for {
		started := time.Now()
		t, err := r.session(m, k, g, &polled).run(ctx)
		refused, renew := p.refused.endSession()
		if ctx.Err() != nil {
			// Stopping: only a shutdown that could not finish is an error;
			// a session cut short by the stop itself is not.
			if errors.Is(err, ErrShutdownIncomplete) {
				return err
			}
			return nil
		}
		// A session that ended with records its client still holds (Kafka
		// did not acknowledge them in time) leaves them to the next one,
		// which reads the same rows again from what was confirmed; sent
		// later still, they would arrive after the next session's copies,
		// or after the records of another relay that took the pipeline
		// over. At-least-once replaces the client, which fails them;
		// exactly-once's abort of the session's transaction already did.
		stale := k.Txn == nil && k.Buffered() > 0
		if renew || stale {
			if err := k.Renew(); err != nil {
				return err
			}
		} else {
			// After a refusal, or any failed record: a broker that stops
			// producing after a failure (NATS JetStream's chain of ids)
			// starts afresh with the next session, which sends again what
			// was not acknowledged.
			k.Resume()
		}
		var s step
		m, s = m.next(ended{t: t, err: err, refused: refused, sessions: p.stats.Sessions.Load()}, cfg)
		s.say.emit(p.log)
		wait := s.wait
		switch s.do {
		case again:
			continue
		case stop:
			r.saveStopped(s.err)
			return s.err
		case retry:
			if time.Since(started) > time.Minute {
				bo.Reset()
			}
			wait = bo.NextBackOff()
			p.hooks.reconnect()
			p.log.Warn("reconnecting", "reason", err, "in", wait.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// session is the next session m asks for.
func (r *Relay) session(m machine, k Broker, g *gate, polled *flow.Polled) session {
	p := r.p
	switch {
	case m.mode == ModeWAL:
		return &walSession{p: p, k: k, gate: g, now: &r.mode, reason: m.reason, polled: polled}
	case len(p.tables) > 1:
		return &pollGroup{p: p, k: k, gate: g, now: &r.mode, reason: m.reason, handoff: m.handoff, polled: polled,
			probeEvery: m.probeInterval(p.cfg)}
	}
	return &pollSession{p: p, t: p.tables[0], k: k, gate: g, now: &r.mode, reason: m.reason, handoff: m.handoff,
		polled: polled, probeEvery: m.probeInterval(p.cfg)}
}

// saveStopped records why the relay stops, for status, as well as it can:
// the database may be what failed.
func (r *Relay) saveStopped(stop error) {
	p := r.p
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := p.cfg.Replication.Connect(ctx)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	if err := p.own().SaveStopped(ctx, conn, stop.Error()); err != nil && !store.IsMissing(err) {
		p.log.Warn("saving why the relay stopped failed", "err", err)
	}
}
