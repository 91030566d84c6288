package relay

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/store"
)

// kafkaCheckEvery is how often a broker is pinged when
// Operations.MonitorInterval is not set: status and /readyz show an unreachable Kafka within it.
const kafkaCheckEvery = 5 * time.Second

// monitor runs beside the sessions while Run runs: it pings a broker every
// Operations.MonitorInterval (kafkaCheckEvery when unset) into the
// broker's health, and, where the broker can say (Kafka), checks while
// records wait for their acks that the partitions written to take writes;
// with Operations.MonitorInterval set it also reads the slot's lag and the
// unpublished rows from Postgres on a connection of its own, for the
// hooks (HookSample), and updates readiness. Nothing of this is on the
// per-event path.
type monitor struct {
	p *pipeline
	k pinger
	// to are the hooks that take its samples.
	to []HookSample
}

// pinger asks whether a broker answers, and how many records wait for
// their acks.
type pinger interface {
	Ping(ctx context.Context) error
	Buffered() int64
}

// writableChecker asks whether the partitions written to take writes
// (sink.Kafka): franz-go retries a record a partition refuses
// (NOT_ENOUGH_REPLICAS) without a word, so only this check can say why
// records wait.
type writableChecker interface {
	Writable(ctx context.Context) error
}

func (mo monitor) run(ctx context.Context) {
	p := mo.p
	interval := p.cfg.Operations.MonitorInterval
	if interval <= 0 {
		interval = kafkaCheckEvery
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	h := p.ready
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		timeout := min(interval, 5*time.Second)
		kctx, cancel := context.WithTimeout(ctx, timeout)
		kerr := mo.k.Ping(kctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		h.broker.pinged(p.log, kerr)
		if kerr == nil {
			if checked, err := mo.writable(ctx, timeout); checked {
				h.broker.writable(p.log, err)
			}
		}

		if p.cfg.Operations.MonitorInterval > 0 {
			dctx, cancel := context.WithTimeout(ctx, timeout)
			var derr error
			if conn == nil || conn.IsClosed() {
				conn, derr = p.cfg.Replication.Connect(dctx)
				if derr != nil {
					conn, derr = nil, errors.New("cannot connect") // the driver's error may name the host and user
				}
			}
			if conn != nil {
				if derr = mo.sample(dctx, conn); derr != nil {
					conn.Close(context.Background())
					conn = nil
				}
			}
			cancel()
			if ctx.Err() != nil {
				return
			}
			h.checked(derr)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// writable checks the partitions written to while records wait for their
// acks: a *sink.UnwritableError, or nil. checked is false when the broker
// has no such check, or the check itself failed, which says nothing about
// them.
func (mo monitor) writable(ctx context.Context, timeout time.Duration) (checked bool, err error) {
	wc, ok := mo.k.(writableChecker)
	if !ok {
		return false, nil
	}
	if mo.k.Buffered() == 0 {
		return true, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = wc.Writable(wctx)
	var uw *sink.UnwritableError
	if err != nil && !errors.As(err, &uw) {
		return false, nil
	}
	return true, err
}

// sample reads the slot's lag, the unpublished rows and what the
// pipeline's state says (its mode, its dead letters) into the gauges.
func (mo monitor) sample(ctx context.Context, conn *pgx.Conn) error {
	var retained, lag int64
	slot, err := replication.SlotStatus(ctx, conn, mo.p.cfg.Replication.Slot)
	switch {
	case err == nil:
		retained, lag = slot.RetainedBytes, slot.LagBytes
	case !errors.Is(err, replication.ErrSlotMissing):
		return err
	}
	for _, h := range mo.to {
		h.OnSlotSample(retained, lag)
	}
	if err := mo.sampleState(ctx, conn); err != nil {
		return err
	}
	return mo.sampleTables(ctx, conn)
}

// sampleState reads the pipeline's state as pgoutbox status does: since
// when it polls instead of streaming, and its open dead letters. Before
// the first session saved the state there is nothing to report.
func (mo monitor) sampleState(ctx context.Context, conn *pgx.Conn) error {
	st, err := mo.p.own().Status(ctx, conn, 0)
	var (
		since          time.Time
		open, held     *int64
		zero, zeroHeld int64
	)
	switch {
	case errors.Is(err, store.ErrNoPipeline), store.IsMissing(err):
		open, held = &zero, &zeroHeld
	case err != nil:
		return err
	default:
		if st.PollingInsteadOfWAL() {
			since = st.ModeSince
		}
		open, held = st.DeadLetters, st.HeldAggregates
	}
	for _, h := range mo.to {
		h.OnStateSample(since, open, held)
	}
	return nil
}

// sampleTables reads each table's unpublished rows into the gauges, each
// above its own row's floor; a table whose row was never written (a
// pipeline streamed before its tables had rows) is counted above the
// pipeline's floor, which holds for every table.
func (mo monitor) sampleTables(ctx context.Context, conn *pgx.Conn) error {
	p := mo.p
	for _, t := range p.tables {
		own := t.own
		if known, _, err := own.Check(ctx, conn); err != nil {
			return err
		} else if !known {
			own = p.own()
		}
		count, oldest, err := own.Unpublished(ctx, conn, t.name, t.poll, p.cfg.timeColumn())
		if err != nil {
			if store.IsMissing(err) {
				continue // no polling columns or no state table: nothing to report
			}
			return err
		}
		for _, h := range mo.to {
			h.OnTableSample(t.name.String(), count, oldest)
		}
	}
	return nil
}

// start runs the monitor until the returned function is called, which
// waits for it to stop.
func (mo monitor) start(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		mo.run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
