package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/vanish"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/store"
)

// Mode is how the relay reads the outbox (store.Mode, as the state table
// keeps it).
type Mode = store.Mode

const (
	// ModeAuto streams the WAL when it can and polls when it cannot.
	ModeAuto = store.ModeAuto
	// ModeWAL only streams the WAL.
	ModeWAL = store.ModeWAL
	// ModePoll only polls the table.
	ModePoll = store.ModePoll
)

// ParseMode parses auto, wal or poll.
func ParseMode(s string) (Mode, error) {
	return store.ParseMode(s)
}

var (
	// errLocked: another relay holds the pipeline; this one waits.
	errLocked = errors.New("pipeline is held by another relay")
	// errBackToWAL ends a poll session in auto mode when the WAL can be
	// streamed again.
	errBackToWAL = errors.New("replication is available again")
	// errHandoffDone ends the poll session of a handoff: everything that
	// committed before the new slot's consistent point is published.
	errHandoffDone = errors.New("everything committed before the new slot is published")
)

// handoffError ends a WAL session that just created a slot: before
// streaming from the slot's consistent point, polling publishes every
// transaction below xmax, which covers all that committed before that point.
type handoffError struct {
	xmax     uint64
	maxSeq   int64 // rows up to this seq are covered too (rows copied from another cluster)
	slotLSN  pglogrepl.LSN
	replaced bool
}

func (h *handoffError) Error() string {
	if h.slotLSN == 0 {
		// An existing slot, with a handoff pending from a change of
		// cluster or an interrupted start.
		return fmt.Sprintf("a handoff is pending: polling publishes what committed before streaming the slot (transactions below %d)", h.xmax)
	}
	if h.replaced {
		return fmt.Sprintf("slot replaced at %s after it was lost: polling publishes what committed before it (transactions below %d)", h.slotLSN, h.xmax)
	}
	return fmt.Sprintf("slot created at %s: polling publishes what committed before it (transactions below %d)", h.slotLSN, h.xmax)
}

// lockedConn connects and takes the pipeline's lease (lease.go): one relay
// works on a pipeline, in either mode; the others wait (errLocked). A
// connection through a pooler is checked first (CheckPooler), and
// pgoutbox's own tables are brought up to date before the lease, which
// lives in them.
func (r *Relay) lockedConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := replication.Connect(ctx, r.cfg.Replication.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if r.parent != nil {
		// One table of several: the pipeline's lease is held for all of
		// them (pollTables), and its tables brought up to date.
		return conn, nil
	}
	fail := func(err error) (*pgx.Conn, error) {
		conn.Close(context.Background())
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
	defer cancel()
	pooled, err := replication.Pooled(qctx, conn)
	if err != nil {
		return fail(err)
	}
	if pooled {
		if err := replication.CheckPooler(qctx, conn); err != nil {
			return fail(err)
		}
		if !r.pooledLogged {
			r.log.Info("connected through a connection pooler: the lease alone keeps one relay per pipeline, and the WAL needs a replication connection straight to the server",
				"pipeline", r.cfg.Replication.Slot)
			r.pooledLogged = true
		}
	}
	r.pooled = pooled
	if !r.stateReady.Load() {
		// Before anything is created: a mapping that cannot work stops
		// here, not at the first row after the slot exists.
		if err := CheckMapping(ctx, conn, r.cfg); err != nil {
			// On a read-only server (a standby) the missing table is not
			// the problem to report: the server is. ensureState says so,
			// and creates nothing there.
			var ro string
			if errors.Is(err, replication.ErrNoTable) && conn.QueryRow(ctx, "SHOW transaction_read_only").Scan(&ro) == nil && ro == "on" {
				if serr := r.ensureState(ctx, conn); serr != nil {
					err = serr
				}
			}
			conn.Close(context.Background())
			return nil, err
		}
		if err := r.ensureState(ctx, conn); err != nil {
			return fail(err)
		}
		r.stateReady.Store(true)
	}
	if err := r.takeLease(ctx, conn, pooled); err != nil {
		return fail(err)
	}
	return conn, nil
}

// setMode records the mode and why in the state table, counting switches.
func (r *Relay) setMode(ctx context.Context, conn *pgx.Conn, mode Mode, reason store.Reason) error {
	if err := r.fenced(ctx, conn, func(q store.Querier) error {
		return r.own().SetMode(ctx, q, r.tableNames(), mode, reason)
	}); err != nil {
		return err
	}
	if err := r.own().ClearStopped(ctx, conn); err != nil && !store.IsMissing(err) {
		return fmt.Errorf("save state: %w", err)
	}
	r.mode.Store(string(mode))
	return nil
}

// pollSession publishes by polling until ctx ends, something fails, or (in
// auto mode) the WAL can take over again. With a handoff, it returns to the
// WAL once every transaction below the handoff's xmax has finished and its
// rows are published.
func (r *Relay) pollSession(ctx context.Context, k *sink.Kafka, handoff *handoffError, reason store.Reason, polled *polledRows) (err error) {
	conn, err := r.lockedConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	poller, err := poll.New(ctx, conn, r.cfg.Poll)
	if err != nil {
		return err
	}
	// Its marks carry the lease's token.
	r.fence(poller)
	if r.clusterID, err = r.clusterCheck().run(ctx, conn, true); err != nil { // cluster.go
		return err
	}
	history, err := r.pollSnapshot(ctx, conn, poller) // snapshot.go
	if err != nil {
		return err
	}
	if err := r.setMode(ctx, conn, ModePoll, reason); err != nil {
		return err
	}
	floor, err := r.readFloor(ctx, conn)
	if err != nil {
		return err
	}
	dl, err := openDeadLetters(ctx, r.cfg, r.Metrics, r.log)
	if err != nil {
		return err
	}
	defer dl.close()
	var txn *txnSession
	if k.Transactional() {
		if txn, err = r.openPollTransactions(ctx, k, poller, floor); err != nil { // exactlyonce.go
			return err
		}
		defer func() {
			if err != nil && ctx.Err() == nil {
				if ferr := r.closeTxn(context.WithoutCancel(ctx), txn); ferr != nil {
					err = ferr
				}
			}
		}()
	}
	r.Stats.Sessions.Add(1)
	defer r.Metrics.sessionUp(ModePoll)()
	// Positions drawn from here on are accounted for (vanish.go).
	vctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
	r.vanish = r.startVanish(vctx, conn, poller)
	cancel()
	defer func() { r.vanish = nil }()
	attrs := []any{"table", r.table.String(), "floor_xid", floor.XID}
	if floor.Foreign != nil {
		attrs = append(attrs, "old_cluster_floor_xid", floor.Foreign.XID, "old_cluster_floor_seq", floor.Foreign.Seq)
	}
	r.log.Info("polling", append(attrs, "interval", r.cfg.PollInterval, "batch", r.cfg.Poll.BatchSize,
		"deleted_rows_checked_from_seq", r.vanish.From())...)

	var (
		pub       = r.newPublisher(k, dl, ModePoll)
		nextProbe = time.Now().Add(r.probeInterval())
	)
	for ctx.Err() == nil {
		// Every round is bounded: a black-holed connection fails it
		// instead of hanging the relay.
		qctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
		err := r.pollRound(ctx, qctx, pub, txn, polled, poller, conn, floor, handoff, &nextProbe)
		if err == nil && history {
			var done bool
			done, err = r.pollSnapshotDone(qctx, conn, poller)
			history = !done
		}
		cancel()
		if errors.Is(err, errBackToWAL) || errors.Is(err, errHandoffDone) {
			// Every row this phase published committed before this
			// position; once the WAL passes it, none can come again.
			var lsn string
			if e := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); e == nil {
				polled.until, _ = pglogrepl.ParseLSN(lsn)
			} else {
				polled.seqs = nil // cannot tell when to stop skipping: skip nothing
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// startVanish starts the poll phase's deleted-row detector
// (internal/vanish); nil, after saying why, where the table's positions
// cannot be read.
func (r *Relay) startVanish(ctx context.Context, conn *pgx.Conn, poller *poll.Poller) *vanish.Detector {
	seq, err := poller.Sequence(ctx)
	if err != nil {
		if !r.vanishOffLogged {
			r.vanishOffLogged = true
			r.log.Warn("cannot tell whether rows are deleted before polling publishes them: seq draws from no sequence this role may read (grant SELECT on it)",
				"table", r.table.String(), "err", err)
		}
		return nil
	}
	d, err := vanish.Start(ctx, vanish.PollSource(poller, conn), vanish.StoreAccount(r.own(), conn), seq,
		vanish.Config{Table: r.table.String(), Mode: r.cfg.Mode, Log: r.log})
	if err != nil {
		r.log.Warn("cannot tell whether rows are deleted before polling publishes them", "table", r.table.String(), "err", err)
		return nil
	}
	return d
}

// pollRound is one poll: publish what it found, then check the handoff or
// probe the WAL, then wait if the batch was not full. ctx bounds the round's
// statements; sess is the session's, which only a stop ends.
func (r *Relay) pollRound(sess, ctx context.Context, pub *publisher, txn *txnSession, polled *polledRows, poller *poll.Poller, conn *pgx.Conn,
	floor outbox.Floor, handoff *handoffError, nextProbe *time.Time) error {
	if err := r.keepLease(ctx, conn); err != nil {
		return err
	}
	r.housekeeping(ctx, conn) // retention.go
	rows, err := poller.Poll(ctx, floor)
	if err != nil {
		return err
	}
	if len(rows) > 0 {
		r.vanish.WillPublish(ctx, rows)
		if err := r.publishBatch(sess, ctx, pub, txn, polled, poller, conn, rows); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil // Kafka took the round's time: the next round has its own
		}
	}
	if lost := r.vanish.Round(ctx, handoff != nil); lost > 0 {
		r.Metrics.lost(r.table.String(), lost)
	}
	if handoff != nil {
		done, err := r.handoffDone(ctx, conn, poller, floor, handoff)
		if err != nil {
			return err
		}
		if done && r.vanish.GapJudged() {
			// One table of several: pollTables ends the handoff once
			// every table is done.
			if r.parent == nil {
				if err := r.fenced(ctx, conn, func(q store.Querier) error { return r.own().EndHandoff(ctx, q) }); err != nil {
					return err
				}
			}
			return errHandoffDone
		}
	} else if r.cfg.Mode == ModeAuto && time.Now().After(*nextProbe) && r.vanish.GapJudged() {
		*nextProbe = time.Now().Add(r.probeInterval())
		if r.replicationReady(ctx, conn) {
			return errBackToWAL
		}
	}
	if len(rows) < r.cfg.Poll.BatchSize {
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.PollInterval):
		}
	}
	return nil
}

// publishBatch produces one poll's rows in order, waits until Kafka acked
// all of them, and only then marks them published. A batch is never half
// marked: a failure leaves every row of it for the next poll.
func (r *Relay) publishBatch(sess, ctx context.Context, pub *publisher, txn *txnSession, polled *polledRows, poller *poll.Poller, conn *pgx.Conn,
	rows []poll.Row) error {
	if !r.leaseHeld() {
		// Another relay may take the pipeline over any moment now.
		return errLeaseLapsed
	}
	// The batch finishes even when a stop arrives meanwhile; only a hard
	// stop after ShutdownTimeout abandons it (its rows stay unpublished).
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ShutdownTimeout)
	defer cancel()
	led := pub.batch(ctx, recordCtx, rows)
	if !r.awaitBatch(sess, conn, &led.wg) {
		return fmt.Errorf("%w: Kafka had not acknowledged a polled batch", ErrShutdownIncomplete)
	}
	if txn != nil {
		// Exactly-once: the batch is one Kafka transaction, committed
		// with the rows it carried as its position, or not at all.
		txn.failed = led.failed
		if err := led.failed(); err != nil {
			return txn.k.Classify(err)
		}
		pos := txn.wal // the WAL's position it carries (exactlyonce.go)
		pos.mode, pos.seqs = ModePoll, led.ackedSeqs()
		if err := txn.commit(recordCtx, r, recordCtx, pos); err != nil {
			return err
		}
		r.Metrics.txnEvents(len(pos.seqs))
	}
	// Exactly the acked rows are marked, after a failure too, so a retry
	// sends only the rest.
	seqs := led.ackedSeqs()
	for _, seq := range seqs {
		polled.seqs.add(seq)
		r.vanish.Seen(seq)
	}
	// The wait may have outlasted recordCtx: the mark has its own bound.
	mctx, cancelMark := context.WithTimeout(context.WithoutCancel(ctx), r.queryTimeout())
	defer cancelMark()
	if err := poller.MarkPublished(mctx, seqs); err != nil {
		return err
	}
	return led.failed()
}

// awaitBatch waits until every record of a polled batch is acked or failed.
// That can take as long as the broker is away: an idempotent producer never
// fails a batch that may have been written, whatever its context says, as
// that could turn its retry into a duplicate. Meanwhile the relay still
// records that it is alive and runs retention. A stop (sess ending)
// abandons the wait after ShutdownTimeout; it reports false then, and the
// unacked rows stay unpublished for the next start.
func (r *Relay) awaitBatch(sess context.Context, conn *pgx.Conn, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	// Ends when the last callback has run: by an ack, a failure, or the
	// client's close after an abandoned wait.
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(min(r.cfg.PollInterval, aliveEvery))
	defer tick.Stop()
	var (
		stop    = sess.Done()
		abandon <-chan time.Time
	)
	for {
		select {
		case <-done:
			return true
		case <-tick.C:
			if abandon == nil {
				// A lease lost meanwhile keeps the wait going: what is in
				// flight is in flight, and its mark will be refused.
				_ = r.keepLease(sess, conn)
				r.housekeeping(sess, conn)
			}
		case <-stop:
			stop = nil
			abandon = time.After(r.cfg.ShutdownTimeout)
		case <-abandon:
			return false
		}
	}
}

// handoffDone tells whether every transaction below the handoff's xmax has
// finished and none of their rows, nor any row up to its seq bound, is left
// unpublished.
func (r *Relay) handoffDone(ctx context.Context, conn *pgx.Conn, poller *poll.Poller, floor outbox.Floor, h *handoffError) (bool, error) {
	xmin, _, _, err := poll.Snapshot(ctx, conn)
	if err != nil {
		return false, err
	}
	if xmin < h.xmax {
		return false, nil // a transaction that may have committed before the slot is still open
	}
	pending, err := poller.Pending(ctx, floor, h.xmax, h.maxSeq)
	if err != nil {
		return false, err
	}
	return !pending, nil
}

// maxProbeWait caps how far failed returns to the WAL lengthen the probe
// interval.
const maxProbeWait = 10 * time.Minute

// probeInterval is how long polling waits before probing the WAL.
func (r *Relay) probeInterval() time.Duration { return max(r.cfg.ProbeInterval, r.probeWait) }

// replicationReady is auto mode's probe while polling: could a WAL
// session start now? It checks, without changing anything, what the
// session's setup needs: the server's settings, a replication connection
// (tried, not judged from the role's attribute), the publication covering
// the table or creatable, and the slot free, or missing and creatable. A
// probe that says no does not switch, so it logs no switch either.
func (r *Relay) replicationReady(ctx context.Context, conn *pgx.Conn) bool {
	err := r.walReady(ctx, conn)
	if err != nil {
		r.log.Debug("the WAL is not available yet", "reason", err)
	}
	return err == nil
}

// pipelineTables are every outbox table of the pipeline, also from the
// relay of one of its tables.
func (r *Relay) pipelineTables() []outbox.Table {
	if r.parent != nil {
		return r.parent.tables
	}
	return r.tables
}

func (r *Relay) walReady(ctx context.Context, conn *pgx.Conn) error {
	ready, err := replication.Inspect(ctx, conn)
	if err != nil {
		return err
	}
	slot, err := replication.SlotStatus(ctx, conn, r.cfg.Replication.Slot)
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, replication.ErrSlotMissing):
		return err
	case exists && slot.Active:
		return fmt.Errorf("%w: %s", replication.ErrSlotActive, r.cfg.Replication.Slot)
	case !exists && !r.cfg.CreateSlot:
		return fmt.Errorf("%w: %s", replication.ErrSlotMissing, r.cfg.Replication.Slot)
	}
	if err := ready.Err(exists); err != nil {
		return err
	}
	if err := replication.TryReplication(ctx, conn, r.cfg.Replication.DatabaseURL); err != nil {
		return err
	}
	return replication.PublicationReady(ctx, conn, r.cfg.Replication.Publication, r.pipelineTables(), r.cfg.CreateSlot)
}

// maxPolledSeqs bounds what a poll phase remembers for the WAL session after
// it: beyond it, the WAL simply sends the rest again.
const maxPolledSeqs = 1 << 20

// polledRows are the rows a poll phase published, handed to the WAL
// session after it, which skips them until its stream passes until.
type polledRows struct {
	seqs  polledSeqs
	until pglogrepl.LSN
	// byTable are, in a pipeline of several tables, each table's rows by
	// its name (schema.table); seqs is then unused.
	byTable map[string]polledSeqs
}

// of returns the set the WAL row c would be in.
func (p *polledRows) of(c *outbox.Change) polledSeqs {
	if p.byTable == nil {
		return p.seqs
	}
	return p.byTable[outbox.Table{Schema: c.Relation.Schema, Name: c.Relation.Name}.String()]
}

// pending tells whether any polled row may still come from the WAL.
func (p *polledRows) pending() bool { return len(p.seqs) > 0 || len(p.byTable) > 0 }

// forget stops the skipping: the stream is past what polling published.
func (p *polledRows) forget() { p.seqs, p.byTable = nil, nil }

// polledSeqs are the rows a poll phase published (Kafka acked them). When
// the relay returns to the WAL, the slot replays those transactions; the
// WAL session skips these rows instead of publishing them twice. Skipping
// an acknowledged row loses nothing and keeps order: it was delivered
// before everything the WAL publishes after it.
type polledSeqs map[int64]struct{}

func (p *polledSeqs) add(seq int64) {
	if *p == nil {
		*p = make(polledSeqs)
	}
	if len(*p) < maxPolledSeqs {
		(*p)[seq] = struct{}{}
	}
}

// take reports whether seq was published by polling, and forgets it.
func (p polledSeqs) take(seq int64) bool {
	if _, ok := p[seq]; ok {
		delete(p, seq)
		return true
	}
	return false
}
