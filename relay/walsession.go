package relay

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/relay/internal/eos"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// walSession streams the slot on one replication connection, for every
// table of the pipeline, from its confirmed position until ctx ends or
// something fails. What it holds lives as long as its connection: the
// lease, the cluster it is on, the floor its state saver found; the rows
// the poll phase before it published (polled) it takes over from Run.
type walSession struct {
	p      *pipeline
	k      Broker
	gate   *gate
	now    *modeNow
	reason store.Reason
	polled *flow.Polled

	h *hold
	// hasSeq: every table has the polling columns.
	hasSeq bool
	// cluster is the system identifier of the cluster the session is on
	// (0: unknown), saved with each floor (cluster.go).
	cluster int64
	// floor is the transaction id below which every transaction is in
	// Kafka, as the state saver last found it (0: none yet; exactly-once
	// delivery lists the transactions above it).
	floor atomic.Uint64
	// streamed are the transactions the session published, until their
	// rows are marked in the tables that have a mark column of their own
	// (nil: none has).
	streamed *streamMarks
}

// run streams. It ends with a transition to polling when a slot it
// created or replaced needs a handoff first.
func (s *walSession) run(ctx context.Context) (transition, error) {
	p, cfg := s.p, s.p.cfg
	h, err := s.gate.enter(ctx)
	if err != nil {
		return transition{}, err
	}
	defer h.close()
	s.h = h
	conn := h.conn
	if h.pooled {
		// Before anything else: PgBouncer before 1.23 refuses replication
		// connections, and nothing here should be set up for a stream
		// that cannot start.
		if err := replication.TryReplication(ctx, conn, cfg.Replication.DatabaseURL); err != nil {
			return transition{}, replication.PoolerRefusedReplication(err)
		}
	}
	if s.hasSeq, err = hasPollingColumns(ctx, conn, p.tables); err != nil {
		return transition{}, err
	}
	if s.hasSeq {
		// Rows are marked by their txid, a polling column.
		s.streamed = newStreamMarks(p.tables)
	}
	// Auto mode with the polling columns can poll what positions from
	// another cluster leave unpublished; other modes stop there.
	canPoll := cfg.Mode == ModeAuto && s.hasSeq
	if s.cluster, err = p.clusterCheck(p.tables[0]).run(ctx, conn, canPoll); err != nil { // cluster.go
		return transition{}, err
	}
	// A snapshot that failed on a record (Kafka, the schema registry)
	// ended the last session before its housekeeping saved the problem.
	p.tables[0].hk.saveBrokerChange(ctx, conn)
	snap := &walSnapshot{p: p, h: h, k: s.k, cols: s.gate.columns()}
	if err := snap.run(ctx); err != nil { // snapshot.go
		return transition{}, err
	}
	if ctx.Err() != nil {
		return transition{}, nil
	}
	hand, err := s.setup(ctx, canPoll) // setup.go
	if err != nil {
		return transition{}, err
	}
	if hand != nil {
		return toHandoff(hand), nil
	}
	if err := s.polledBefore(ctx); err != nil {
		return transition{}, err
	}
	first := p.tables[0]
	if err := first.recordMode(ctx, h, ModeWAL, s.reason); err != nil {
		return transition{}, err
	}
	s.now.set(ModeWAL)
	first.hk.markWALStart(ctx, conn) // housekeeping.go
	first.hk.saveBrokerChange(ctx, conn)
	// Everything that can fail comes before the stream is open, so that no
	// early return leaves a replication connection holding the slot.
	dl, err := openDeadLetters(ctx, cfg, p.hooks, p.log)
	if err != nil {
		return transition{}, err
	}
	defer dl.close()
	d, err := s.openDelivery(ctx)
	if err != nil {
		return transition{}, err
	}
	if cfg.Delivery == ExactlyOnce {
		defer p.unended().Remember(s.h.conn, s.k.Txn)
	}
	stream, err := replication.Open(ctx, cfg.Replication, p.log)
	if err != nil {
		return transition{}, err
	}
	p.stats.Sessions.Add(1)
	defer p.sessionUp(ModeWAL)()
	p.log.Info("streaming", "slot", cfg.Replication.Slot, "tables", p.names(), "start_lsn", stream.Start().String())
	return transition{}, s.stream(ctx, stream, dl, d)
}

// polledBefore prepares an at-least-once WAL session that follows a poll
// phase: the stream replays from the slot's position, from before that
// phase, and this process knows only the rows it polled itself, none after
// a restart, and not those of another relay of the pipeline that polled
// before it. So the rows polling marked published since the floor are read
// from the table and skipped until the stream passes the WAL's end as it is
// now. That position is saved (polled_until) before the mode says WAL: a
// session that ends before its slot passes it (a kill, a lost connection)
// leaves the next one, in whichever process, to read them again.
// Exactly-once reads them the same way, from its position record
// (openDelivery).
func (s *walSession) polledBefore(ctx context.Context) error {
	p, first := s.p, s.p.tables[0]
	if p.cfg.Delivery == ExactlyOnce || !s.hasSeq || len(p.tables) > 1 {
		return nil
	}
	conn := s.h.conn
	prev, err := first.own.Mode(ctx, conn)
	if err != nil {
		return err
	}
	var saved pglogrepl.LSN // polled_until of an earlier session this stream replays past
	if prev != ModePoll {
		if saved, err = s.replaysPolled(ctx); err != nil || saved == 0 {
			return err
		}
	}
	seqs, until, err := polledSince(ctx, s.h, first, p.cfg.queryTimeout(), nil, p.log)
	if err != nil {
		return err
	}
	for seq := range seqs {
		s.polled.Add(seq)
	}
	if saved != 0 {
		// Every row polling published committed before the saved
		// position: nothing to save again.
		s.polled.EndAt(max(s.polled.Until(), saved))
		return nil
	}
	s.polled.EndAt(max(s.polled.Until(), until))
	return first.own.SavePolledUntil(ctx, conn, s.polled.Until().String())
}

// replaysPolled returns the saved polled_until when the slot's stream
// starts below it (0 otherwise): a WAL session after a poll phase ended
// before it confirmed every row that phase published, and this stream
// replays them.
func (s *walSession) replaysPolled(ctx context.Context) (pglogrepl.LSN, error) {
	saved, err := s.p.tables[0].own.PolledUntil(ctx, s.h.conn)
	if err != nil || saved == "" {
		return 0, err
	}
	until, err := pglogrepl.ParseLSN(saved)
	if err != nil {
		return 0, fmt.Errorf("read state: polled_until %q: %w", saved, err)
	}
	slot, err := replication.SlotStatus(ctx, s.h.conn, s.p.cfg.Replication.Slot)
	if err != nil || slot.ConfirmedLSN >= until {
		return 0, err
	}
	return until, nil
}

// openDelivery opens the WAL session's delivery, the configured one.
func (s *walSession) openDelivery(ctx context.Context) (walDelivery, error) {
	p, first := s.p, s.p.tables[0]
	if p.cfg.Delivery != ExactlyOnce {
		floor, err := first.own.Floor(ctx, s.h.conn)
		if err != nil {
			return nil, err
		}
		return &atLeastOnceWAL{polled: s.polled, order: first.poll.Order, stats: p.stats, floor: uint32(floor.XID), streamed: s.streamed,
			broker: p.ready.broker.name}, nil
	}
	if err := p.unended().Learn(ctx, s.h.conn, s.k.Txn); err != nil {
		return nil, err
	}
	o := eos.WALOpening{Cluster: s.cluster, Floor: &s.floor, HasSeq: s.hasSeq, Order: first.poll.Order, Skipped: p.stats.skipped(),
		ReadPolled: func(ctx context.Context, last []int64) (flow.Seqs, pglogrepl.LSN, error) {
			return polledSince(ctx, s.h, first, p.cfg.queryTimeout(), last, p.log)
		},
	}
	if s.streamed != nil {
		o.Streamed = s.streamed.add
	}
	return openExactlyOnceWAL(ctx, newTxnSession(s.k, p.cfg, p.hooks, p.log), p.cfg, o)
}

// stream runs the open stream: the reader, the publisher and the state
// saver, until ctx ends or one of them fails; then it flushes, confirms
// what Kafka acknowledged and closes the stream.
func (s *walSession) stream(ctx context.Context, stream *replication.Stream, dl *deadLetters, d walDelivery) error {
	p, cfg, conn := s.p, s.p.cfg, s.h.conn
	// Shutdown is soft first: stop reading at the next transaction
	// boundary and drain. The hard context ends whatever is left after
	// ShutdownTimeout.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	var hardTimer atomic.Pointer[time.Timer]
	stopWatch := context.AfterFunc(ctx, func() {
		stream.Stop()
		hardTimer.Store(time.AfterFunc(cfg.ShutdownTimeout, cancelHard))
	})
	defer func() {
		stopWatch()
		if t := hardTimer.Load(); t != nil {
			t.Stop()
		}
	}()

	changes := make(chan *replication.Batch, 4) // up to 4*MaxBatch changes
	readDone := make(chan struct{})
	g, gctx := errgroup.WithContext(hard)
	// An UPDATE under UpdateFatal ends the stream there; what was read
	// before it is published first, as Debezium's task publishes it before
	// it fails.
	var stoppedAt error
	g.Go(func() error {
		defer close(readDone)
		defer close(changes)
		err := stream.Run(gctx, changes)
		if upd := (*UpdateStopError)(nil); errors.As(err, &upd) {
			stoppedAt = err
			return nil
		}
		return err
	})
	pub := p.newPublisher(s.k, dl, ModeWAL, s.gate.columns()).streaming(d.begin(stream, hard), hard)
	pub.eventIDs = s.k.EventIDs
	g.Go(func() error { return d.publish(gctx, pub, changes) })
	saver := &stateSaver{p: p, h: s.h, stream: stream, hasSeq: s.hasSeq, cluster: s.cluster, floor: &s.floor, streamed: s.streamed}
	g.Go(func() error { return saver.run(gctx, readDone) })
	runErr := g.Wait()
	if runErr == nil {
		runErr = stoppedAt
	}

	// Whatever was produced gets its ack before the last confirm, so a
	// clean stop leaves nothing to send twice.
	flushCtx, cancel := context.WithTimeout(hard, cfg.ShutdownTimeout)
	flushErr := s.k.Flush(flushCtx)
	cancel()
	if runErr != nil {
		if err := d.End(hard, runErr); err != nil {
			runErr = err
		}
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	closeErr := stream.Close(closeCtx)
	if c := stream.Confirmed(); closeErr == nil && c > stream.Start() {
		// The last status update can be lost with the connection, after a
		// clean stop as after a failed record: the next session, in this
		// process or another, would send again what was acknowledged.
		// Check it, and make it good.
		ensureCtx, cancelEnsure := context.WithTimeout(context.Background(), 3*time.Second)
		if advanced, err := replication.EnsureConfirmed(ensureCtx, conn, cfg.Replication.Slot, c); err != nil {
			p.log.Warn("could not check the slot's confirmed position", "lsn", c.String(), "err", err)
		} else if advanced {
			p.log.Info("the slot missed the last status update; advanced it", "lsn", c.String())
		}
		cancelEnsure()
	}
	if err := saver.writeState(closeCtx, stream.Confirmed()); err != nil && runErr == nil {
		p.log.Warn("saving state failed", "err", err)
	}
	cancel()
	// What Kafka acknowledged is marked now, not at the next session: the
	// team's own poller, started after this stop, must not send it again.
	markCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.streamed.mark(markCtx, conn, true) // marks.go
	cancel()
	acked, waiting, failed := d.position()
	attrs := []any{"confirmed_lsn", acked.String(), "unconfirmed_transactions", waiting}
	if failed != nil {
		attrs = append(attrs, "delivery_err", failed)
	}
	if flushErr != nil {
		p.log.Warn("stream stopped", append(attrs, "flush_err", flushErr)...)
	} else {
		p.log.Info("stream stopped", attrs...)
	}

	if ctx.Err() != nil && (runErr == nil || errors.Is(runErr, context.Canceled)) {
		// A requested shutdown: report only what kept it from finishing.
		if flushErr != nil {
			return fmt.Errorf("%w: kafka did not ack everything in time: %w", ErrShutdownIncomplete, flushErr)
		}
		if closeErr != nil {
			return fmt.Errorf("%w: final confirm: %w", ErrShutdownIncomplete, closeErr)
		}
		return nil
	}
	if runErr == nil {
		runErr = errors.New("replication stream ended")
	}
	var ue *replication.UnrecognisedError
	if errors.As(runErr, &ue) {
		runErr = p.unrecognised(ue)
	}
	return runErr
}
