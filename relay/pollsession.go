package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/eos"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/relay/internal/vanish"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// pollSession polls one outbox table on one connection until ctx ends,
// something fails, or (in auto mode) the WAL can take over again. With a
// handoff, it returns to the WAL once every transaction below the
// handoff's xmax has finished and its rows are published. What it holds
// lives as long as its connection: the poller, the floor it reads from,
// the cluster it is on, the deleted-row detector.
type pollSession struct {
	p      *pipeline
	t      *outboxTable
	k      Broker
	gate   *gate
	now    *modeNow
	reason store.Reason
	// handoff is the handoff the session finishes; nil for none.
	handoff *handoff
	// polled collects the rows it published, for the WAL session after
	// it.
	polled *flow.Polled
	// probeEvery is how often auto mode probes the WAL (machine.probeInterval).
	probeEvery time.Duration
	// group, for one table of several (pollgroup.go), is the lease the
	// group holds for all of them; the group ends the handoff. Nil: the
	// session takes its own through the gate.
	group *leaseKeeper

	h       *hold
	poller  *poll.Poller
	floor   outbox.Floor
	cluster int64
	// vanish counts rows deleted before the session published them; nil
	// where it cannot (internal/vanish).
	vanish    *vanish.Detector
	d         pollDelivery
	pub       *publisher
	history   bool
	nextProbe time.Time
}

// connect holds the pipeline for the session: through the gate, or, in a
// poll group, with the group's lease on a connection of its own.
func (s *pollSession) connect(ctx context.Context) (*hold, error) {
	if s.group == nil {
		return s.gate.enter(ctx)
	}
	conn, err := s.p.cfg.Replication.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return s.group.on(conn), nil
}

// run polls. It ends with a transition to the WAL when the probe finds it
// available or the handoff is done.
func (s *pollSession) run(ctx context.Context) (_ transition, err error) {
	p, t, cfg := s.p, s.t, s.p.cfg
	h, err := s.connect(ctx)
	if err != nil {
		return transition{}, err
	}
	defer h.close()
	s.h = h
	conn := h.conn
	if s.handoff != nil && s.group == nil {
		if current, err := handoffCurrent(ctx, conn, t.own, s.handoff); err != nil {
			return transition{}, err
		} else if !current {
			return handoffGone(), nil
		}
	}
	if s.poller, err = poll.New(ctx, conn, t.poll); err != nil {
		return transition{}, err
	}
	if !t.shapeFit.Load() {
		if err := s.poller.Shape().Check(ctx); err != nil {
			return transition{}, err
		}
		t.shapeFit.Store(true)
	}
	// Its marks carry the lease's token.
	h.fence(s.poller)
	mctx, cancel := context.WithTimeout(ctx, cfg.queryTimeout())
	err = t.unmarked.mark(mctx, s.poller)
	cancel()
	if err != nil {
		return transition{}, err
	}
	if s.cluster, err = p.clusterCheck(t).run(ctx, conn, true); err != nil { // cluster.go
		return transition{}, err
	}
	history := pollHistory{cfg: cfg, log: p.log, t: t, poller: s.poller}
	if s.history, err = history.start(ctx, conn); err != nil { // snapshot.go
		return transition{}, err
	}
	if err := t.recordMode(ctx, h, ModePoll, s.reason); err != nil {
		return transition{}, err
	}
	s.now.set(ModePoll)
	if s.floor, err = t.own.Floor(ctx, conn); err != nil {
		return transition{}, err
	}
	dl, err := openDeadLetters(ctx, cfg, p.hooks, p.log)
	if err != nil {
		return transition{}, err
	}
	defer dl.close()
	if s.d, err = s.openDelivery(ctx); err != nil { // delivery.go
		return transition{}, err
	}
	if cfg.Delivery == ExactlyOnce {
		defer p.unended().Remember(conn, s.k.Txn)
	}
	defer func() {
		if err != nil && ctx.Err() == nil {
			if ferr := s.d.End(context.WithoutCancel(ctx), err); ferr != nil {
				err = ferr
			}
		}
	}()
	p.stats.Sessions.Add(1)
	defer p.sessionUp(ModePoll)()
	// Positions drawn from here on are accounted for (internal/vanish).
	vctx, cancel := context.WithTimeout(ctx, cfg.queryTimeout())
	s.vanish = s.startVanish(vctx)
	cancel()
	attrs := []any{"table", t.name.String(), "floor_xid", s.floor.XID}
	if s.floor.Foreign != nil {
		attrs = append(attrs, "old_cluster_floor_xid", s.floor.Foreign.XID, "old_cluster_floor_seq", s.floor.Foreign.Seq)
	}
	p.log.Info("polling", append(attrs, "interval", cfg.PollInterval, "batch", t.poll.BatchSize,
		"deleted_rows_checked_from_seq", s.vanish.From())...)

	s.warnScans(ctx)
	s.pub = p.newPublisher(s.k, dl, ModePoll, s.gate.columns())
	s.pub.eventIDs = s.k.EventIDs
	s.nextProbe = time.Now().Add(s.probeEvery)
	for ctx.Err() == nil {
		// Every round is bounded: a black-holed connection fails it
		// instead of hanging the relay.
		qctx, cancel := context.WithTimeout(ctx, cfg.queryTimeout())
		next, err := s.round(ctx, qctx)
		if err == nil && next.to == "" && s.history {
			var done bool
			done, err = history.done(qctx, conn)
			s.history = !done
		}
		cancel()
		if next.to != "" {
			endPolled(ctx, conn, s.polled)
		}
		if ctx.Err() != nil {
			return transition{}, nil
		}
		if err != nil || next.to != "" {
			return next, err
		}
	}
	return transition{}, nil
}

// openDelivery opens the poll session's delivery, the configured one.
func (s *pollSession) openDelivery(ctx context.Context) (pollDelivery, error) {
	p := s.p
	if p.cfg.Delivery != ExactlyOnce {
		return atLeastOncePoll{}, nil
	}
	if err := p.unended().Learn(ctx, s.h.conn, s.k.Txn); err != nil {
		return nil, err
	}
	return eos.OpenPoll(ctx, newTxnSession(s.k, p.cfg, p.hooks, p.log), s.cluster, s.poller, s.floor)
}

// startVanish starts the session's deleted-row detector (internal/vanish);
// nil, after saying why, where the table's positions cannot be read.
func (s *pollSession) startVanish(ctx context.Context) *vanish.Detector {
	p, t, conn := s.p, s.t, s.h.conn
	census := s.poller.Census()
	seq, err := census.Sequence(ctx)
	if err != nil {
		if t.warnSeqOnce() {
			p.log.Warn("cannot tell whether rows are deleted before polling publishes them",
				"table", t.name.String(), "err", err)
		}
		return nil
	}
	d, err := vanish.Start(ctx, vanish.PollSource(census, conn), vanish.StoreAccount(t.own, conn), seq,
		vanish.Config{Table: t.name.String(), Mode: t.mode, Log: p.log})
	if err != nil {
		p.log.Warn("cannot tell whether rows are deleted before polling publishes them", "table", t.name.String(), "err", err)
		return nil
	}
	return d
}

// round is one poll: publish what it found, then check the handoff or
// probe the WAL, then wait if the batch was not full. ctx bounds the
// round's statements; sess is the session's, which only a stop ends.
func (s *pollSession) round(sess, ctx context.Context) (transition, error) {
	p, t := s.p, s.t
	if err := s.h.keep(ctx); err != nil {
		return transition{}, err
	}
	t.hk.tick(ctx, s.h.conn) // housekeeping.go
	rows, err := s.poller.Poll(ctx, s.floor)
	if err != nil {
		return transition{}, err
	}
	if len(rows) > 0 {
		s.vanish.WillPublish(ctx, rows)
		if err := s.publishBatch(sess, ctx, rows); err != nil {
			return transition{}, err
		}
		if ctx.Err() != nil {
			return transition{}, nil // Kafka took the round's time: the next round has its own
		}
	}
	if lost := s.vanish.Round(ctx, s.handoff != nil); lost > 0 {
		p.hooks.rowsLost(t.name.String(), lost)
	}
	if s.handoff != nil {
		done, err := s.handoffDone(ctx)
		if err != nil {
			return transition{}, err
		}
		if done && s.vanish.GapJudged() {
			// One table of several: the group ends the handoff once
			// every table is done.
			if s.group == nil {
				return endHandoff(ctx, s.h.fenced, t.own, s.handoff)
			}
			return handoffDone(), nil
		}
	} else if t.mode == ModeAuto && time.Now().After(s.nextProbe) && s.vanish.GapJudged() {
		s.nextProbe = time.Now().Add(s.probeEvery)
		if s.replicationReady(ctx) {
			return walAvailable(replicationAvailable), nil
		}
	}
	if len(rows) < t.poll.BatchSize {
		select {
		case <-ctx.Done():
		case <-time.After(p.cfg.PollInterval):
		}
	}
	return transition{}, nil
}

// publishBatch produces one poll's rows in order, waits until Kafka acked
// all of them, lets the delivery settle them, and only then marks them
// published. A batch is never half marked: a failure leaves every row of
// it for the next poll.
func (s *pollSession) publishBatch(sess, ctx context.Context, rows []poll.Row) error {
	cfg := s.p.cfg
	if !s.h.held() {
		// Another relay may take the pipeline over any moment now.
		return errLeaseLapsed
	}
	// The batch finishes even when a stop arrives meanwhile; only a hard
	// stop after ShutdownTimeout abandons it (its rows stay unpublished).
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	led := s.pub.batch(ctx, recordCtx, rows)
	if !awaitBatch(sess, led.Settled(), cfg, func() { s.tick(sess) }) {
		return fmt.Errorf("%w: Kafka had not acknowledged a polled batch", ErrShutdownIncomplete)
	}
	// Exactly-once commits the batch's Kafka transaction here, or fails
	// it whole (delivery.go).
	if err := s.d.Settle(recordCtx, led); err != nil {
		return err
	}
	// Exactly the acked rows are marked, after a failure too, so a retry
	// sends only the rest.
	seqs := led.AckedSeqs()
	for _, seq := range seqs {
		s.polled.Add(seq)
		s.vanish.Seen(seq)
	}
	// The wait may have outlasted recordCtx: the mark has its own bound.
	mctx, cancelMark := context.WithTimeout(context.WithoutCancel(ctx), cfg.queryTimeout())
	defer cancelMark()
	if err := s.poller.MarkPublished(mctx, seqs); err != nil {
		s.t.unmarked.keep(seqs)
		return err
	}
	return led.Failed()
}

// tick is what a session does while it waits for Kafka's acks: it still
// renews its lease, records that it is alive and runs retention. A lease
// lost meanwhile keeps the wait going: what is in flight is in flight,
// and its mark will be refused.
func (s *pollSession) tick(sess context.Context) {
	_ = s.h.keep(sess)
	s.t.hk.tick(sess, s.h.conn)
}

// awaitBatch waits until every record of a polled batch is acked or failed
// (settled). That can take as long as the broker is away: an idempotent
// producer never fails a batch that may have been written, whatever its
// context says, as that could turn its retry into a duplicate.
// Meanwhile tick runs every poll interval (at most every aliveEvery). A
// stop (sess ending) abandons the wait after ShutdownTimeout; it reports
// false then, and the unacked rows stay unpublished for the next start.
func awaitBatch(sess context.Context, settled <-chan struct{}, cfg Config, tick func()) bool {
	t := time.NewTicker(min(cfg.PollInterval, aliveEvery))
	defer t.Stop()
	var (
		stop    = sess.Done()
		abandon <-chan time.Time
	)
	for {
		select {
		case <-settled:
			return true
		case <-t.C:
			if abandon == nil {
				tick()
			}
		case <-stop:
			stop = nil
			abandon = time.After(cfg.ShutdownTimeout)
		case <-abandon:
			return false
		}
	}
}

// endHandoff records the end of handoff h, whose polling is done, and
// switches to the WAL; when the handoff's bounds changed meanwhile, it
// goes back to the WAL session's setup instead (handoffMoved).
func endHandoff(ctx context.Context, fenced func(context.Context, func(store.Querier) error) error, own store.Pipeline, h *handoff) (transition, error) {
	var ended bool
	if err := fenced(ctx, func(q store.Querier) (err error) {
		ended, err = own.EndHandoff(ctx, q, h.xmax, h.maxSeq)
		return err
	}); err != nil {
		return transition{}, err
	}
	if !ended {
		return handoffMoved(), nil
	}
	return handoffDone(), nil
}

// handoffCurrent tells whether h is still the pipeline's pending handoff,
// read once the session holds the pipeline: while it did not, another
// relay may have finished h or replaced the slot again.
func handoffCurrent(ctx context.Context, q store.Querier, own store.Pipeline, h *handoff) (bool, error) {
	st, err := own.Handoff(ctx, q)
	if err != nil {
		return false, err
	}
	return st.Pending && st.XMax != nil && *st.XMax == h.xmax && st.Seq != nil && *st.Seq == h.maxSeq, nil
}

// handoffDone tells whether every transaction below the handoff's xmax has
// finished and none of their rows, nor any row up to its seq bound, is left
// unpublished.
func (s *pollSession) handoffDone(ctx context.Context) (bool, error) {
	xmin, _, _, err := poll.Snapshot(ctx, s.h.conn)
	if err != nil {
		return false, err
	}
	if xmin < s.handoff.xmax {
		return false, nil // a transaction that may have committed before the slot is still open
	}
	pending, err := s.poller.Pending(ctx, s.floor, s.handoff.xmax, s.handoff.maxSeq)
	if err != nil {
		return false, err
	}
	return !pending, nil
}

// replicationReady is auto mode's probe while polling: could a WAL
// session start now? It checks, without changing anything, what the
// session's setup needs: the server's settings, a replication connection
// (tried, not judged from the role's attribute), the publication covering
// the tables or creatable, and the slot free, or missing and creatable. A
// probe that says no does not switch, so it logs no switch either.
func (s *pollSession) replicationReady(ctx context.Context) bool {
	err := s.walReady(ctx)
	if err != nil {
		s.p.log.Debug("the WAL is not available yet", "reason", err)
	}
	return err == nil
}

func (s *pollSession) walReady(ctx context.Context) error {
	cfg, conn := s.p.cfg, s.h.conn
	ready, err := replication.Inspect(ctx, conn)
	if err != nil {
		return err
	}
	slot, err := replication.SlotStatus(ctx, conn, cfg.Replication.Slot)
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, replication.ErrSlotMissing):
		return err
	case exists && slot.Active:
		return fmt.Errorf("%w: %s", replication.ErrSlotActive, cfg.Replication.Slot)
	case !exists && !cfg.CreateSlot:
		return fmt.Errorf("%w: %s", replication.ErrSlotMissing, cfg.Replication.Slot)
	}
	if err := ready.Err(exists); err != nil {
		return err
	}
	if err := replication.TryReplication(ctx, conn, cfg.Replication.DatabaseURL); err != nil {
		return err
	}
	return replication.PublicationReady(ctx, conn, cfg.Replication.Publication, s.p.tableList(), cfg.CreateSlot, cfg.Replication.Publishes())
}

// warnScans says, once per table while the process runs, that every poll
// reads the whole table: a table of a team's own, mapped by its status or
// order column, migrated without that mapping. Not while a snapshot reads
// the table's history, which is read whole by design.
func (s *pollSession) warnScans(ctx context.Context) {
	t := s.t
	if t.scanWarned.Load() || s.history {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, s.p.cfg.queryTimeout())
	defer cancel()
	rows, scans, err := s.poller.ScansWholeTable(qctx, s.floor)
	if err != nil || !scans {
		return // a check; the polls say what is wrong with the table
	}
	t.scanWarned.Store(true)
	s.p.log.Warn("every poll reads the whole outbox table: it has no index fit for the column mapping; run pgoutbox migrate with the same --table, --column-* and --status-* flags as run, which builds one concurrently",
		"table", t.name.String(), "rows", rows)
}
