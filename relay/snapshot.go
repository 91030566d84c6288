package relay

import (
	"context"
	"errors"
	"fmt"
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
)

// ParseSnapshotMode parses no_data or initial.
func ParseSnapshotMode(s string) (SnapshotMode, error) {
	switch m := SnapshotMode(s); m {
	case SnapshotNoData, SnapshotInitial:
		return m, nil
	}
	return "", fmt.Errorf("snapshot mode %q: use no_data or initial", s)
}

// walSnapshot publishes the rows already in the table on a pipeline's first
// start in WAL mode (SnapshotInitial), before its slot is streamed: it
// creates the slot over a replication connection that exports its snapshot,
// reads the table as that snapshot sees it (everything that committed
// before the slot's consistent point, nothing after) in insertion order,
// publishes those rows through the same path as every other row and waits
// for Kafka's acks. The slot then streams from its consistent point, so
// every row comes once, from one side of the boundary or the other, and an
// aggregate's rows of the snapshot go before its later ones.
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
func (p *pipeline) walSnapshot(ctx context.Context, h *hold, k Broker) error {
	conn := h.conn
	if p.cfg.Snapshot != SnapshotInitial {
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
	orders := make([]string, len(p.tables))
	unmarked := make([]string, len(p.tables))
	for i, t := range p.tables {
		order, unordered, err := poll.SnapshotOrder(ctx, conn, t.name, p.cfg.Poll.Order)
		if err != nil {
			return err
		}
		if unordered {
			p.log.Warn("rows without "+order+" are read first, in no particular order among themselves; name the table's own insertion order with --column-order", "table", t.name.String())
		}
		orders[i] = order
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
	pub := p.newPublisher(k, dl, ModeWAL)
	pub.eventIDs = k.EventIDs
	for i, t := range p.tables {
		// Order is kept per aggregate within a table: one table after the
		// other, each in its insertion order.
		if err := p.snapshotTable(ctx, h, sconn, pub, exp.Snapshot, t.name, orders[i], unmarked[i]); err != nil || ctx.Err() != nil {
			return err // stopped: the snapshot stays pending
		}
	}
	if err := p.own().EndSnapshot(ctx, conn, true); err != nil {
		return err
	}
	return nil
}

// snapshotTable publishes one table's rows as the exported snapshot sees
// them, those where unmarked holds (poll.Unmarked), in order, and waits for
// their acks.
func (p *pipeline) snapshotTable(ctx context.Context, h *hold, sconn *pgx.Conn, pub *publisher, snapshot string, t outbox.Table, order, unmarked string) error {
	rd, err := poll.OpenSnapshot(ctx, sconn, snapshot, t, order, unmarked, p.cfg.Poll.BatchSize)
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
		// As a polled batch: produced in order, every ack awaited before
		// the next is read, so memory holds one batch.
		recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ShutdownTimeout)
		led := pub.batch(ctx, recordCtx, rows)
		ok := awaitBatch(ctx, led.settled(), p.cfg, func() {
			_ = h.keep(ctx)
			p.housekeeping(ctx, h.conn, p.tables[0])
		})
		cancel()
		if !ok {
			return fmt.Errorf("%w: Kafka had not acknowledged a batch of the snapshot; it is taken again at the next start", ErrShutdownIncomplete)
		}
		if err := led.failed(); err != nil {
			return fmt.Errorf("snapshot of %s: %w", t, err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	if err := rd.Close(ctx); err != nil {
		return fmt.Errorf("snapshot of %s: %w", t, err)
	}
	p.log.Info("published the rows already in the table", "table", t.String(), "rows", rd.Read(), "order", order,
		"took", time.Since(started).Round(time.Millisecond))
	return nil
}

// pollSnapshot decides, as a poll session starts, whether its polling
// publishes the table's history too: on a pipeline's first start with
// SnapshotInitial, or while a snapshot is unfinished. Rows that were in the
// table before its polling columns have no txid and are otherwise never
// polled; they need an order value every row has (the table's own id with
// --column-order), or they could be neither ordered nor marked.
func (p *pipeline) pollSnapshot(ctx context.Context, conn *pgx.Conn, t *outboxTable, poller *poll.Poller) (bool, error) {
	if p.cfg.Snapshot != SnapshotInitial {
		return false, nil
	}
	st, err := t.own.Snapshot(ctx, conn)
	if err != nil || (st.Known && !st.Pending) {
		return false, err
	}
	n, err := poller.Unordered(ctx)
	if err != nil {
		return false, err
	}
	if n > 0 {
		return false, fmt.Errorf("%w: --snapshot-mode initial: %d rows of %s have no %s (they were there before the polling columns); "+
			"poll in the table's own insertion order with --column-order (its bigserial or identity id), or publish them in --mode wal",
			poll.ErrNoSnapshotOrder, n, t.name, t.poll.Order)
	}
	if err := t.own.PendSnapshot(ctx, conn, t.names); err != nil {
		return false, err
	}
	poller.SetHistory(true)
	p.log.Info("polling publishes the rows already in the table first", "table", t.name.String(), "order", t.poll.Order)
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
