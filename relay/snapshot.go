package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
)

// SnapshotMode is what a pipeline's first start does with the rows already
// in its table, as Debezium's snapshot.mode.
type SnapshotMode string

const (
	// SnapshotNoData publishes only what commits after the pipeline
	// exists (the default; Debezium's no_data).
	SnapshotNoData SnapshotMode = "no_data"
	// SnapshotInitial publishes the rows already in the table first, then
	// what commits after (Debezium's initial).
	SnapshotInitial SnapshotMode = "initial"
	// SnapshotWhenNeeded is Debezium's when_needed as pgoutbox can keep
	// it: SnapshotInitial, as Debezium snapshots when it has no offsets
	// or its snapshot did not finish. Where Debezium finds its slot's
	// position gone and sends the whole table again, pgoutbox fills the
	// gap as it does after any lost slot: by polling from the published
	// floor (auto mode, with the polling columns), else it stops and says
	// so. A table sent again would put every event since the first start
	// a second time into the stream.
	SnapshotWhenNeeded SnapshotMode = "when_needed"
)

// ParseSnapshotMode parses no_data, initial or when_needed.
func ParseSnapshotMode(s string) (SnapshotMode, error) {
	switch m := SnapshotMode(s); m {
	case SnapshotNoData, SnapshotInitial, SnapshotWhenNeeded:
		return m, nil
	}
	return "", fmt.Errorf("snapshot mode %q: use no_data, initial or when_needed", s)
}

// ReadsTable tells whether the mode publishes the rows already in the
// table on a pipeline's first start.
func (m SnapshotMode) ReadsTable() bool { return m == SnapshotInitial || m == SnapshotWhenNeeded }

// Meaning says what the mode does, for the start line.
func (m SnapshotMode) Meaning() string {
	switch m {
	case SnapshotInitial:
		return "initial: the rows already in the tables on the pipeline's first start, then what commits"
	case SnapshotWhenNeeded:
		return "when_needed: initial on the pipeline's first start; a lost slot is filled by polling from the published floor, never by sending the tables again"
	}
	return "no_data: what commits from the pipeline's first start on"
}

// ErrSnapshotExactlyOnce means a snapshot would run under exactly-once
// delivery, which it cannot keep: it produces outside Kafka transactions,
// and one taken again after a crash sends its rows twice.
var ErrSnapshotExactlyOnce = errors.New("exactly-once delivery cannot publish the rows already in the table: the snapshot (--snapshot-mode initial or when_needed; " +
	"in a Debezium configuration also snapshot.mode unset) produces outside Kafka transactions. Start the pipeline once with --delivery at-least-once " +
	"until its snapshot is published, or with --snapshot-mode no_data; then run it with exactly-once")

// walSnapshot publishes the rows already in the table on a pipeline's first
// start in WAL mode (SnapshotInitial), before its slot is streamed: it
// creates the slot over a replication connection that exports its snapshot,
// reads the table as that snapshot sees it (everything that committed
// before the slot's consistent point, nothing after) in the best order it
// offers (poll.Order, said in the log before), publishes those rows
// through the same path as every other row and waits for Kafka's acks.
// The slot then streams from its consistent point, so every row comes
// once, from one side of the boundary or the other, and an aggregate's
// rows of the snapshot go before its later ones.
//
// A slot that exists without a state row is another reader's, taken over
// where it stopped (Debezium's): it is streamed without a snapshot.
//
// The snapshot is recorded pending in the state table before the slot
// exists, and done only after the last ack. A start that finds it pending
// (a crash, a stop, Kafka down in the middle) drops the slot the
// unfinished snapshot made, which nothing has streamed from, and does it
// again: rows sent twice, none lost.
//
// It runs in a WAL session that holds h, producing to k.
func (p *pipeline) walSnapshot(ctx context.Context, h *hold, k Sink) error {
	conn := h.conn
	if !p.cfg.Snapshot.ReadsTable() {
		return nil
	}
	st, err := p.own().Snapshot(ctx, conn)
	if err != nil || (st.Known && !st.Pending) {
		return err
	}
	cfg := p.cfg.Replication
	// What Setup checks first, so that auto mode polls where the WAL is
	// not available instead of failing here.
	slot, err := replication.SlotStatus(ctx, conn, cfg.Slot)
	slotExists := err == nil
	if err != nil && !errors.Is(err, replication.ErrSlotMissing) {
		return err
	}
	if slotExists && !st.Pending {
		// A slot this pipeline never recorded: another reader's (Debezium's,
		// taken over where it stopped), which holds what committed since it
		// read the table, as Debezium with stored offsets does not snapshot.
		p.log.Info("the slot exists: streaming from where its reader stopped, without a snapshot", "slot", cfg.Slot)
		return nil
	}
	if p.cfg.Delivery == ExactlyOnce {
		return ErrSnapshotExactlyOnce
	}
	ready, err := replication.Inspect(ctx, conn)
	if err != nil {
		return err
	}
	if err := ready.Err(slotExists); err != nil {
		return err
	}
	if err := replication.TryReplication(ctx, conn, cfg.DatabaseURL); err != nil {
		return err
	}
	if !p.cfg.CreateSlot {
		return fmt.Errorf("%w: --snapshot-mode initial creates the slot with the snapshot it reads; it needs --create-slot", replication.ErrNotReady)
	}
	ps, err := replication.EnsurePublicationFor(ctx, conn, cfg.Publication, p.tableList(), true)
	if err != nil {
		return err
	}
	p.logPublication(ps.Created, ps.Fixed, ps.Problems)
	orders := make([]poll.Order, len(p.tables))
	unmarked := make([]string, len(p.tables))
	for i, t := range p.tables {
		if orders[i], err = poll.SnapshotOrder(ctx, conn, t.name, p.cfg.Poll.Order, p.cfg.snapshotTimeColumn()); err != nil {
			return err
		}
		p.logSnapshotOrder(t.name, orders[i])
		if unmarked[i], err = poll.Unmarked(ctx, conn, t.poll); err != nil {
			return err
		}
	}
	if err := p.own().PendSnapshot(ctx, conn, p.names()); err != nil {
		return err
	}
	if slotExists {
		// Made by the unfinished snapshot: nothing was streamed from it,
		// and the new snapshot covers everything it would have.
		if slot.Active {
			return fmt.Errorf("%w: %s", replication.ErrSlotActive, cfg.Slot)
		}
		p.log.Warn("the snapshot of the rows already in the table did not finish; dropping its slot and taking it again", "slot", cfg.Slot)
		if err := replication.DropSlot(ctx, conn, cfg.Slot); err != nil {
			return err
		}
	}

	exp, err := replication.CreateSlotExported(ctx, cfg)
	if err != nil {
		return err
	}
	// Open until every table's read has imported the snapshot.
	defer exp.Close()
	if err := p.own().SaveSetup(ctx, conn, p.names(), lsnArg(exp.LSN)); err != nil {
		return err
	}
	if err := saveWALStart(ctx, conn, cfg.Slot, true); err != nil { // housekeeping.go
		return err
	}
	p.log.Info("slot created; publishing the rows already in the tables", "tables", p.names(), "slot", cfg.Slot, "consistent_lsn", exp.LSN.String())
	sconn, err := replication.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer sconn.Close(context.Background())
	dl, err := openDeadLetters(ctx, p.cfg, p.obs, p.log)
	if err != nil {
		return err
	}
	defer dl.close()
	run := &snapshotRun{h: h, sconn: sconn, pub: p.newPublisher(k, dl, ModeWAL), snapshot: exp.Snapshot,
		marks: newSnapshotMarker(exp.LSN, time.Now())}
	for i, t := range p.tables {
		// Order is kept per aggregate within a table: one table after the
		// other, each in its order.
		if err := p.snapshotTable(ctx, run, t.name, orders[i], unmarked[i]); err != nil || ctx.Err() != nil {
			return err // stopped: the snapshot stays pending
		}
	}
	if err := p.publishSnapshot(ctx, run, p.tables[len(p.tables)-1].name, run.marks.finish()); err != nil || ctx.Err() != nil {
		return err
	}
	if err := p.own().EndSnapshot(ctx, conn, true); err != nil {
		return err
	}
	return nil
}

// snapshotRun is one snapshot's reading: the exported snapshot, the
// connection that reads it, the publisher, and the marks of its rows.
type snapshotRun struct {
	h        *hold
	sconn    *pgx.Conn
	pub      *publisher
	snapshot string
	marks    *snapshotMarker
}

// snapshotTable publishes one table's rows as the exported snapshot sees
// them, those where unmarked holds (poll.Unmarked), in order, and waits for
// their acks; the last row read waits for the next table's, or the end's
// (snapshotMarker).
func (p *pipeline) snapshotTable(ctx context.Context, run *snapshotRun, t outbox.Table, order poll.Order, unmarked string) error {
	rd, err := poll.OpenSnapshot(ctx, run.sconn, run.snapshot, t, order, unmarked, p.cfg.Poll.BatchSize)
	if err != nil {
		return err
	}
	defer rd.Close(context.Background())
	started := time.Now()
	for {
		rows, err := rd.Next(ctx)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		if err := p.publishSnapshot(ctx, run, t, run.marks.take(rows)); err != nil || ctx.Err() != nil {
			return err
		}
	}
	run.marks.tableDone()
	if err := rd.Close(ctx); err != nil {
		return fmt.Errorf("snapshot of %s: %w", t, err)
	}
	p.log.Info("published the rows already in the table", "table", t.String(), "rows", rd.Read(), "order", order.String(),
		"took", time.Since(started).Round(time.Millisecond))
	return nil
}

// publishSnapshot publishes rows of the snapshot as a polled batch:
// produced in order, every ack awaited before the next batch is read, so
// memory holds one batch. A stop leaves it unfinished (nil, ctx done).
func (p *pipeline) publishSnapshot(ctx context.Context, run *snapshotRun, t outbox.Table, rows []poll.Row) error {
	if len(rows) == 0 {
		return nil
	}
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ShutdownTimeout)
	defer cancel()
	led := run.pub.batch(ctx, recordCtx, rows)
	ok := awaitBatch(ctx, led.settled(), p.cfg, func() {
		_ = run.h.keep(ctx)
		p.housekeeping(ctx, run.h.conn, p.tables[0])
	})
	if !ok {
		return fmt.Errorf("%w: Kafka had not acknowledged a batch of the snapshot; it is taken again at the next start", ErrShutdownIncomplete)
	}
	if err := led.failed(); err != nil {
		return fmt.Errorf("snapshot of %s: %w", t, err)
	}
	return nil
}

// pollSnapshot decides, as a poll session starts, whether its polling
// publishes the table's history too: on a pipeline's first start with
// SnapshotInitial, or while a snapshot is unfinished. Rows that were in the
// table before its polling columns have no txid and are otherwise never
// polled; they need an order value every row has (the table's own id with
// --column-order), or they could be neither ordered nor marked.
func (p *pipeline) pollSnapshot(ctx context.Context, conn *pgx.Conn, t *outboxTable, poller *poll.Poller) (bool, error) {
	if !p.cfg.Snapshot.ReadsTable() {
		return false, nil
	}
	st, err := t.own.Snapshot(ctx, conn)
	if err != nil || (st.Known && !st.Pending) {
		return false, err
	}
	if p.cfg.Delivery == ExactlyOnce {
		return false, ErrSnapshotExactlyOnce
	}
	n, err := poller.Unordered(ctx)
	if err != nil {
		return false, err
	}
	if n > 0 {
		// Polling marks and orders rows by their order value: rows without
		// one could be neither. The WAL's snapshot reads them in one
		// consistent read instead, in the best order the table offers.
		own, err := poll.SnapshotOrder(ctx, conn, t.name, "", "")
		if err != nil {
			return false, err
		}
		how := fmt.Sprintf("poll in the table's own insertion order with --column-order %s, or publish them from the WAL", own.Column)
		if own.Column == "" {
			how = fmt.Sprintf("%s has no identity or serial column to poll them in; publish them from the WAL", t.name)
		}
		return false, fmt.Errorf("%w: --snapshot-mode %s: %d rows of %s have no %s (they were there before the polling columns); "+
			"%s (wal_level=logical, --mode wal or auto), whose snapshot reads them in the best order the table offers (docs/outbox-table.md)",
			poll.ErrNoSnapshotOrder, p.cfg.Snapshot, n, t.name, t.poll.Order, how)
	}
	if err := t.own.PendSnapshot(ctx, conn, t.names); err != nil {
		return false, err
	}
	poller.SetHistory(true)
	p.log.Info("polling publishes the rows already in the table first", "table", t.name.String(), "order", t.poll.Order, "per_aggregate", "insertion order")
	return true, nil
}

// pollSnapshotDone ends the snapshot of a poll session once no row of the
// table's history is left unpublished.
func (p *pipeline) pollSnapshotDone(ctx context.Context, conn *pgx.Conn, t *outboxTable, poller *poll.Poller) (bool, error) {
	left, err := poller.HistoryLeft(ctx)
	if err != nil || left {
		return false, err
	}
	if err := t.own.EndSnapshot(ctx, conn, false); err != nil {
		return false, err
	}
	poller.SetHistory(false)
	p.log.Info("published the rows already in the table", "table", t.name.String())
	return true, nil
}

// logSnapshotOrder says, before a snapshot reads t, in what order the rows
// already in it go out and what that keeps of an aggregate's order: a
// warning where it is not the insertion order.
func (p *pipeline) logSnapshotOrder(t outbox.Table, o poll.Order) {
	level := slog.LevelInfo
	if !o.Kept() {
		level = slog.LevelWarn
	}
	p.log.Log(context.Background(), level, "the rows already in the table go out first, then what commits after the slot, in commit order",
		"table", t.String(), "order", o.String(), "per_aggregate", o.Promise())
}
