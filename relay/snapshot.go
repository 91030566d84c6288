package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
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
	// SnapshotAlways is Debezium's always: SnapshotInitial on the first
	// start, and at every later start of the process the rows in the
	// table once more before the slot streams. The slot is kept and
	// streams from where it was confirmed, so what committed while
	// pgoutbox was stopped goes out too, even where the rows are gone from
	// the table (Debezium streams from the WAL's end at the snapshot
	// instead and loses those): the rows still in the table go out twice,
	// none is lost.
	SnapshotAlways SnapshotMode = "always"
	// SnapshotInitialOnly is Debezium's initial_only: the rows in the
	// table once, then nothing is streamed; no slot is made. The relay
	// returns once they are acknowledged, and at once at a later start.
	SnapshotInitialOnly SnapshotMode = "initial_only"
	// SnapshotAlwaysOnly is Debezium's configuration_based with
	// snapshot.data true and start.stream false: the rows in the table
	// at every start, then nothing is streamed; no slot is made. The
	// relay returns once they are acknowledged.
	SnapshotAlwaysOnly SnapshotMode = "always_only"
)

// snapshotModes lists the modes, for errors.
const snapshotModes = "no_data, initial, when_needed, always, initial_only or always_only"

// ParseSnapshotMode parses no_data, initial, when_needed, always,
// initial_only or always_only.
func ParseSnapshotMode(s string) (SnapshotMode, error) {
	switch m := SnapshotMode(s); m {
	case SnapshotNoData, SnapshotInitial, SnapshotWhenNeeded, SnapshotAlways, SnapshotInitialOnly, SnapshotAlwaysOnly:
		return m, nil
	}
	return "", fmt.Errorf("snapshot mode %q: use %s", s, snapshotModes)
}

// ReadsTable tells whether the mode publishes the rows already in the
// table on a pipeline's first start.
func (m SnapshotMode) ReadsTable() bool { return m != SnapshotNoData && m != "" }

// EveryStart tells whether the mode publishes the rows in the table again
// at every start of the process, not only the pipeline's first.
func (m SnapshotMode) EveryStart() bool { return m == SnapshotAlways || m == SnapshotAlwaysOnly }

// Streams tells whether the mode streams what commits after its snapshot.
func (m SnapshotMode) Streams() bool { return m != SnapshotInitialOnly && m != SnapshotAlwaysOnly }

// Meaning says what the mode does, for the start line.
func (m SnapshotMode) Meaning() string {
	switch m {
	case SnapshotInitial:
		return "initial: the rows already in the tables on the pipeline's first start, then what commits"
	case SnapshotWhenNeeded:
		return "when_needed: initial on the pipeline's first start; a lost slot is filled by polling from the published floor, never by sending the tables again"
	case SnapshotAlways:
		return "always: the rows already in the tables at every start, then what commits since the slot's confirmed position"
	case SnapshotInitialOnly:
		return "initial_only: the rows already in the tables on the pipeline's first start, and nothing streamed"
	case SnapshotAlwaysOnly:
		return "always_only: the rows in the tables at every start, and nothing streamed"
	}
	return "no_data: what commits from the pipeline's first start on"
}

// ErrSnapshotExactlyOnce means a snapshot would run under exactly-once
// delivery, which it cannot keep: it produces outside Kafka transactions,
// and one taken again after a crash sends its rows twice.
var ErrSnapshotExactlyOnce = errors.New("exactly-once delivery cannot publish the rows already in the table: the snapshot (--snapshot-mode initial, when_needed, always, initial_only or always_only; " +
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
// It runs in a WAL session that holds h, producing to k, binding with
// cols; it lives as long as its run.
type walSnapshot struct {
	p    *pipeline
	h    *hold
	k    Broker
	cols schema.Columns

	// Once the slot exported its snapshot: the connection that reads it,
	// the publisher, and the marks of its rows.
	sconn    *pgx.Conn
	pub      *publisher
	snapshot string
	marks    *snapshotMarker
}

// tableOrder is how the snapshot reads one table: in what order, and
// which rows (poll.Unmarked).
type tableOrder struct {
	order    poll.Order
	unmarked string
}

// run takes the snapshot, where one is due.
func (s *walSnapshot) run(ctx context.Context) error {
	p, conn := s.p, s.h.conn
	if !p.cfg.Snapshot.ReadsTable() {
		return nil
	}
	st, err := p.own().Snapshot(ctx, conn)
	if err != nil {
		return err
	}
	if st.Known && !st.Pending {
		return s.again(ctx)
	}
	cfg := p.cfg.Replication
	// What Setup checks first, so that auto mode polls where the WAL is
	// not available instead of failing here.
	slot, err := replication.SlotStatus(ctx, conn, cfg.Slot)
	slotExists := err == nil
	if err != nil && !errors.Is(err, replication.ErrSlotMissing) {
		return err
	}
	if slotExists && !st.Pending && p.cfg.Snapshot.EveryStart() {
		// Another reader's slot, which always snapshots anyway.
		return s.again(ctx)
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
	orders, err := s.prepare(ctx)
	if err != nil {
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
	if err := s.take(ctx, orders); err != nil || ctx.Err() != nil {
		return err
	}
	p.snapshotted = true
	return nil
}

// again takes the snapshot of SnapshotAlways at a start after the first,
// once per process (a session that reconnects streams on), the slot
// kept: the tables are read in a snapshot of their own (exportSnapshot)
// and published as on the first start; the slot then streams from where
// it was confirmed. Nothing is recorded pending: a start that finds a
// snapshot pending drops the slot, which here holds what committed since
// the last stop, and one cut short is taken again at the next start anyway.
func (s *walSnapshot) again(ctx context.Context) error {
	p := s.p
	if !p.cfg.Snapshot.EveryStart() || p.snapshotted {
		return nil
	}
	if p.cfg.Delivery == ExactlyOnce {
		return ErrSnapshotExactlyOnce
	}
	orders, err := s.orders(ctx)
	if err != nil {
		return err
	}
	exp, err := exportSnapshot(ctx, p.cfg.Replication)
	if err != nil {
		return err
	}
	defer exp.close()
	p.log.Info("snapshot mode always: publishing the rows in the tables again before the slot streams from where it was confirmed",
		"tables", p.names(), "slot", p.cfg.Replication.Slot, "wal_lsn", exp.lsn.String())
	if err := s.publishAll(ctx, orders, exp.snapshot, exp.lsn); err != nil || ctx.Err() != nil {
		return err
	}
	p.snapshotted = true
	return nil
}

// only is the run of a mode that does not stream: the rows in the tables,
// read in a snapshot of their own as Debezium reads them without a slot,
// and nothing after. Under SnapshotInitialOnly a pipeline whose snapshot
// is done publishes nothing; SnapshotAlwaysOnly publishes them at every
// start, as Debezium's snapshotter answers from its options alone.
func (s *walSnapshot) only(ctx context.Context) error {
	p, conn := s.p, s.h.conn
	mode := p.cfg.Snapshot
	st, err := p.own().Snapshot(ctx, conn)
	if err != nil {
		return err
	}
	if st.Known && !st.Pending && !mode.EveryStart() {
		p.log.Info("snapshot mode initial_only: the rows already in the tables were published at an earlier start; nothing is streamed", "tables", p.names())
		return nil
	}
	if p.cfg.Delivery == ExactlyOnce {
		return ErrSnapshotExactlyOnce
	}
	orders, err := s.orders(ctx)
	if err != nil {
		return err
	}
	if err := p.own().PendSnapshot(ctx, conn, p.names()); err != nil {
		return err
	}
	exp, err := exportSnapshot(ctx, p.cfg.Replication)
	if err != nil {
		return err
	}
	defer exp.close()
	if err := s.publishAll(ctx, orders, exp.snapshot, exp.lsn); err != nil || ctx.Err() != nil {
		return err // stopped: the snapshot stays pending
	}
	if err := p.own().EndSnapshot(ctx, conn, false); err != nil {
		return err
	}
	p.log.Info("snapshot mode "+string(mode)+": the rows already in the tables are published; nothing is streamed", "tables", p.names())
	return nil
}

// prepare makes sure the publication covers the tables, reads how each
// table is read, and records the snapshot pending.
func (s *walSnapshot) prepare(ctx context.Context) ([]tableOrder, error) {
	p, conn := s.p, s.h.conn
	ps, err := replication.EnsurePublicationFor(ctx, conn, p.cfg.Replication.Publication, p.tableList(), true, p.cfg.Replication.Publishes())
	if err != nil {
		return nil, err
	}
	p.logPublication(ps)
	orders, err := s.orders(ctx)
	if err != nil {
		return nil, err
	}
	return orders, p.own().PendSnapshot(ctx, conn, p.names())
}

// orders reads how each table is read, and says it.
func (s *walSnapshot) orders(ctx context.Context) ([]tableOrder, error) {
	p, conn := s.p, s.h.conn
	var err error
	orders := make([]tableOrder, len(p.tables))
	for i, t := range p.tables {
		if orders[i].order, err = poll.SnapshotOrder(ctx, conn, t.name, p.cfg.Poll.Order, p.cfg.snapshotTimeColumn()); err != nil {
			return nil, err
		}
		logSnapshotOrder(p.log, t.name, orders[i].order)
		if orders[i].unmarked, err = poll.Unmarked(ctx, conn, t.poll); err != nil {
			return nil, err
		}
	}
	return orders, nil
}

// take creates the slot with its exported snapshot, publishes every
// table's rows as it sees them, one table after the other, and records
// the snapshot done.
func (s *walSnapshot) take(ctx context.Context, orders []tableOrder) error {
	p, conn, cfg := s.p, s.h.conn, s.p.cfg.Replication
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
	p.log.Info("slot created; publishing the rows already in the tables", "tables", p.names(), "slot", cfg.Slot, "consistent_lsn", exp.LSN.String(), "failover", exp.Failover)
	if cfg.FailoverWhereSupported && !exp.Failover {
		p.log.Warn("slot created without failover: the server predates failover slots (PostgreSQL 17), so a promoted standby lacks it", "slot", cfg.Slot)
	}
	if err := s.publishAll(ctx, orders, exp.Snapshot, exp.LSN); err != nil || ctx.Err() != nil {
		return err
	}
	return p.own().EndSnapshot(ctx, conn, true)
}

// publishAll publishes every table's rows as the exported snapshot sees
// them, one table after the other, marked as read at lsn; a stop leaves it
// unfinished (nil, ctx done).
func (s *walSnapshot) publishAll(ctx context.Context, orders []tableOrder, snapshot string, lsn pglogrepl.LSN) error {
	p := s.p
	var err error
	if s.sconn, err = p.cfg.Replication.ConnectUser(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer s.sconn.Close(context.Background())
	dl, err := openDeadLetters(ctx, p.cfg, p.hooks, p.log)
	if err != nil {
		return err
	}
	defer dl.close()
	s.pub, s.snapshot, s.marks = p.newPublisher(s.k, dl, ModeWAL, s.cols), snapshot, newSnapshotMarker(lsn, time.Now())
	s.pub.eventIDs = s.k.EventIDs
	for i, t := range p.tables {
		// Order is kept per aggregate within a table: one table after the
		// other, each in its order.
		if err := s.table(ctx, t.name, orders[i]); err != nil || ctx.Err() != nil {
			return err // stopped: the snapshot stays pending
		}
	}
	return s.publish(ctx, p.tables[len(p.tables)-1].name, s.marks.finish())
}

// exported is a snapshot exported by a transaction of its own, for a
// snapshot taken without creating a slot, and the WAL's end as that
// transaction saw it.
type exported struct {
	conn     *pgx.Conn
	snapshot string
	lsn      pglogrepl.LSN
}

// exportSnapshot opens a repeatable-read transaction and exports its
// snapshot; it stays open, so that readers can import it, until close.
func exportSnapshot(ctx context.Context, db replication.Config) (*exported, error) {
	conn, err := db.ConnectUser(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	e := &exported{conn: conn}
	var lsn string
	if _, err = conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err == nil {
		err = conn.QueryRow(ctx, "SELECT pg_export_snapshot(), pg_current_wal_lsn()::text").Scan(&e.snapshot, &lsn)
	}
	if err == nil {
		e.lsn, err = pglogrepl.ParseLSN(lsn)
	}
	if err != nil {
		e.close()
		return nil, fmt.Errorf("export a snapshot: %w", err)
	}
	return e, nil
}

func (e *exported) close() { e.conn.Close(context.Background()) }

// table publishes one table's rows as the exported snapshot sees them,
// those where o.unmarked holds (poll.Unmarked), in order, and waits for
// their acks; the last row read waits for the next table's, or the end's
// (snapshotMarker).
func (s *walSnapshot) table(ctx context.Context, t outbox.Table, o tableOrder) error {
	rd, err := poll.OpenSnapshot(ctx, s.sconn, s.snapshot, t, o.order, o.unmarked, s.p.cfg.Poll.BatchSize)
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
		if err := s.publish(ctx, t, s.marks.take(rows)); err != nil || ctx.Err() != nil {
			return err
		}
	}
	s.marks.tableDone()
	if err := rd.Close(ctx); err != nil {
		return fmt.Errorf("snapshot of %s: %w", t, err)
	}
	s.p.log.Info("published the rows already in the table", "table", t.String(), "rows", rd.Read(), "order", o.order.String(),
		"took", time.Since(started).Round(time.Millisecond))
	return nil
}

// publish publishes rows of the snapshot as a polled batch: produced in
// order, every ack awaited before the next batch is read, so memory holds
// one batch. A stop leaves it unfinished (nil, ctx done).
func (s *walSnapshot) publish(ctx context.Context, t outbox.Table, rows []poll.Row) error {
	if len(rows) == 0 {
		return nil
	}
	cfg := s.p.cfg
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	led := s.pub.batch(ctx, recordCtx, rows)
	ok := awaitBatch(ctx, led.Settled(), cfg, func() {
		_ = s.h.keep(ctx)
		s.p.tables[0].hk.tick(ctx, s.h.conn)
	})
	if !ok {
		return fmt.Errorf("%w: Kafka had not acknowledged a batch of the snapshot; it is taken again at the next start", ErrShutdownIncomplete)
	}
	if err := led.Failed(); err != nil {
		return fmt.Errorf("snapshot of %s: %w", t, err)
	}
	return nil
}

// pollHistory is a poll session's snapshot: its polling publishes the
// table's history too, on a pipeline's first start with SnapshotInitial,
// or while a snapshot is unfinished (start), until no row of the history
// is left (done).
type pollHistory struct {
	cfg    Config
	log    *slog.Logger
	t      *outboxTable
	poller *poll.Poller
}

// start decides, as the poll session starts, whether its polling
// publishes the table's history too. Rows that were in the table before
// its polling columns have no txid and are otherwise never polled; they
// need an order value every row has (the table's own id with
// --column-order), or they could be neither ordered nor marked.
func (s pollHistory) start(ctx context.Context, conn *pgx.Conn) (bool, error) {
	cfg, t := s.cfg, s.t
	if !cfg.Snapshot.ReadsTable() {
		return false, nil
	}
	st, err := t.own.Snapshot(ctx, conn)
	if err != nil || (st.Known && !st.Pending) {
		return false, err
	}
	if cfg.Delivery == ExactlyOnce {
		return false, ErrSnapshotExactlyOnce
	}
	n, err := s.poller.Shape().Unordered(ctx)
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
			poll.ErrNoSnapshotOrder, cfg.Snapshot, n, t.name, t.poll.Order, how)
	}
	if err := t.own.PendSnapshot(ctx, conn, t.names); err != nil {
		return false, err
	}
	s.poller.SetHistory(true)
	s.log.Info("polling publishes the rows already in the table first", "table", t.name.String(), "order", t.poll.Order, "per_aggregate", "insertion order")
	return true, nil
}

// done ends the snapshot of a poll session once no row of the table's
// history is left unpublished.
func (s pollHistory) done(ctx context.Context, conn *pgx.Conn) (bool, error) {
	left, err := s.poller.HistoryLeft(ctx)
	if err != nil || left {
		return false, err
	}
	if err := s.t.own.EndSnapshot(ctx, conn, false); err != nil {
		return false, err
	}
	s.poller.SetHistory(false)
	s.log.Info("published the rows already in the table", "table", s.t.name.String())
	return true, nil
}

// logSnapshotOrder says, before a snapshot reads t, in what order the rows
// already in it go out and what that keeps of an aggregate's order: a
// warning where it is not the insertion order.
func logSnapshotOrder(log *slog.Logger, t outbox.Table, o poll.Order) {
	level := slog.LevelInfo
	if !o.Kept() {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "the rows already in the table go out first, then what commits after the slot, in commit order",
		"table", t.String(), "order", o.String(), "per_aggregate", o.Promise())
}

// snapshotOnly runs a mode that does not stream (SnapshotInitialOnly,
// SnapshotAlwaysOnly):
// its snapshot, where one is due, holding the pipeline's lease, and
// nothing after.
func (r *Relay) snapshotOnly(ctx context.Context, k Broker, g *gate) error {
	h, err := g.enter(ctx)
	if err != nil {
		return err
	}
	defer h.close()
	s := &walSnapshot{p: r.p, h: h, k: k, cols: g.columns()}
	return s.only(ctx)
}
