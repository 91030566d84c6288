package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/store"
)

const (
	// aliveEvery is how often a session records alive_at and
	// last_publish_at in pgoutbox_state.
	aliveEvery = 5 * time.Second
	// retentionBatch rows are deleted per statement, each in its own short
	// transaction, at most retentionMaxBatches times per run.
	retentionBatch      = 1000
	retentionMaxBatches = 100
)

// upkeep is what every table's housekeeper is handed: the settings it
// keeps the house by, where it says what it did, and what it saves.
type upkeep struct {
	cfg Config
	log *slog.Logger
	// lastPublish is the last ack's time (Stats.LastPublish), saved as
	// last_publish_at.
	lastPublish *atomic.Int64
	// broker is the broker's health, saved for status.
	broker *brokerHealth
	hooks  hooks
}

// housekeeper keeps one outbox table's house, from one session of the
// table to the next: it records that the relay is alive and the broker's
// health in the table's state row, deletes published rows past their
// retention, and marks, in a table whose own column marks published rows,
// the rows the WAL published (marks.go). Only the session that holds the
// table uses it, so it needs no lock.
type housekeeper struct {
	up    *upkeep
	table outbox.Table
	own   store.Pipeline
	poll  poll.Config

	lastAlive     time.Time
	lastRetention time.Time
	noColumns     bool  // migration 004 has not run: alive_at and friends are missing
	noBroker      bool  // migration 009 has not run: kafka_problem is missing
	brokerSaved   int64 // the broker health's change count last saved
	brokerOnce    bool  // brokerSaved is set
	lastBroker    time.Time
	noRetention   bool // the table cannot be cleaned (no polling columns, odd time column)
	lastMark      time.Time
	markFailed    string // the last marking failure said, so that it is said once
	connClosed    bool   // the session's connection was found closed, and it was said
}

// connClosedMsg says a session's connection to PostgreSQL is gone while
// the session still runs.
const connClosedMsg = "the session's connection to PostgreSQL is closed; the session ends at its next statement, or once Kafka has answered for what it sent"

// tick runs inside a session, on the connection that holds the
// pipeline's lock, between the session's own statements: every few seconds
// it records that the relay is alive and when it last published, and every
// Operations.RetentionInterval it deletes published rows older than
// Operations.Retention. It logs its failures and never fails the session.
func (hk *housekeeper) tick(ctx context.Context, conn *pgx.Conn) {
	up := hk.up
	// Bounded like the session's own statements: a dead connection fails
	// here and then ends the session.
	ctx, cancel := context.WithTimeout(ctx, up.cfg.queryTimeout())
	defer cancel()
	now := time.Now()
	if conn.IsClosed() {
		// Nothing can be saved on it. The session ends at its next
		// statement, or, while it waits for Kafka to answer for what it
		// sent, once Kafka does: said once, not at every tick.
		if !hk.connClosed {
			hk.connClosed = true
			up.log.Warn(connClosedMsg, "table", hk.table.String())
		}
		return
	}
	hk.connClosed = false
	if !hk.noColumns && now.Sub(hk.lastAlive) >= aliveEvery {
		hk.lastAlive = now
		hk.saveAlive(ctx, conn)
	}
	if !hk.noColumns && !hk.noBroker && (now.Sub(hk.lastBroker) >= aliveEvery || !hk.brokerOnce ||
		hk.brokerSaved != up.broker.changeCount()) {
		hk.saveBrokerHealth(ctx, conn)
	}
	if up.cfg.Operations.Retention > 0 && !hk.noRetention && now.Sub(hk.lastRetention) >= up.cfg.Operations.RetentionInterval {
		hk.lastRetention = now
		if _, err := hk.retain(ctx, conn); err != nil && ctx.Err() == nil {
			up.log.Warn("retention failed", "err", err)
		}
	}
}

// saveAlive records alive_at and last_publish_at.
func (hk *housekeeper) saveAlive(ctx context.Context, conn *pgx.Conn) {
	var last *time.Time
	if ns := hk.up.lastPublish.Load(); ns != 0 {
		at := time.Unix(0, ns)
		last = &at
	}
	err := hk.own.SaveAlive(ctx, conn, last)
	if store.IsMissing(err) {
		hk.noColumns = true
		hk.up.log.Warn("pgoutbox_state lacks alive_at and last_publish_at: run pgoutbox migrate; status and retention in WAL mode need them")
	} else if err != nil && ctx.Err() == nil {
		hk.up.log.Warn("saving liveness failed", "err", err)
	}
}

// saveBrokerHealth writes the broker's current problem, its name and
// since when to pgoutbox_state, or clears them, for status to read.
func (hk *housekeeper) saveBrokerHealth(ctx context.Context, conn *pgx.Conn) {
	b := hk.up.broker
	changes := b.changeCount()
	problem, since := b.problem()
	err := hk.own.SaveBrokerHealth(ctx, conn, b.name, problem, since)
	switch {
	case store.IsMissing(err):
		hk.noBroker = true
		hk.up.log.Warn("pgoutbox_state lacks kafka_problem: run pgoutbox migrate; status needs it to show the broker's problems")
	case err != nil:
		if ctx.Err() == nil {
			hk.up.log.Warn("saving the broker's health failed", "err", err)
		}
	default:
		hk.brokerSaved, hk.brokerOnce, hk.lastBroker = changes, true, time.Now()
	}
}

// saveBrokerChange saves the broker's health at a session's start when it
// changed since it was last saved: a session that failed on a record may
// have ended before its housekeeping ran.
func (hk *housekeeper) saveBrokerChange(ctx context.Context, conn *pgx.Conn) {
	if hk.noColumns || hk.noBroker || (hk.brokerOnce && hk.brokerSaved == hk.up.broker.changeCount()) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, hk.up.cfg.queryTimeout())
	defer cancel()
	hk.saveBrokerHealth(ctx, conn)
}

// markWALStart records wal_start_xid once, for a pipeline whose slot
// exists: transactions at or above the snapshot's xmax start after the
// slot's consistent point, so the stream carries their rows.
// Setup does the same as soon as it creates a slot (saveWALStart); this
// covers slots created before migration 004. It is the first table's.
func (hk *housekeeper) markWALStart(ctx context.Context, conn *pgx.Conn) {
	if hk.noColumns {
		return
	}
	if err := saveWALStart(ctx, conn, hk.up.cfg.Replication.Slot, false); err != nil && ctx.Err() == nil {
		hk.up.log.Warn("saving the WAL start failed", "err", err)
	}
}

// saveWALStart sets the pipeline's wal_start_xid to the current snapshot's
// xmax; the slot must exist. created says a slot was just created, which
// replaces any earlier value: a replaced slot's gap must not count as
// published by the WAL. Otherwise only a missing value is set.
func saveWALStart(ctx context.Context, conn *pgx.Conn, pipeline string, created bool) error {
	_, xmax, _, err := poll.Snapshot(ctx, conn)
	if err != nil {
		return err
	}
	return store.Pipeline{Name: pipeline}.SaveWALStart(ctx, conn, xmax, created)
}

// retain deletes rows older than Retention that are known to be published,
// in batches of retentionBatch by ctid, each its own short statement, so
// no lock is held for long. A row is known to be published when polling
// marked it (published_at set), or when its transaction is below the
// published floor and at or above wal_start_xid (WAL mode published it).
// Any other row stays, however old.
func (hk *housekeeper) retain(ctx context.Context, conn *pgx.Conn) (int64, error) {
	cfg, log := hk.up.cfg, hk.up.log
	if hk.poll.OwnMark() {
		// Published rows are marked by the team's own column; their own
		// job keeps the table.
		hk.noRetention = true
		log.Warn("retention is off: the table's own column marks published rows, and pgoutbox deletes none of them", "table", hk.table.String())
		return 0, nil
	}
	ok, err := poll.HasColumns(ctx, conn, hk.table)
	if err != nil {
		return 0, err
	}
	if !ok {
		hk.noRetention = true
		log.Warn("retention is off: the outbox table lacks the polling columns (seq, txid, published_at) that tell published rows apart", "table", hk.table.String())
		return 0, nil
	}
	// Without migration 004 the bounds are empty: WAL rows stay until the
	// floor is known.
	published, err := hk.own.Published(ctx, conn)
	if err != nil {
		return 0, err
	}
	total, err := inBatches(ctx, cfg.queryTimeout()/3, retentionBatch, func() (int64, error) {
		n, err := store.DeletePublished(ctx, conn, hk.table, cfg.timeColumn(), cfg.Operations.Retention, published, retentionBatch)
		hk.up.hooks.retentionDeleted(n)
		return n, err
	})
	if err != nil {
		if store.IsMissing(err) || isTypeError(err) {
			hk.noRetention = true
		}
		return total, fmt.Errorf("delete published rows: %w", err)
	}
	if total > 0 {
		log.Info("retention deleted published rows", "table", hk.table.String(), "rows", total, "older_than", cfg.Operations.Retention)
	}
	return total, nil
}

// inBatches runs one, a statement that handles up to batch rows and says
// how many it did, until one does fewer, at most retentionMaxBatches times
// and for budget (a third of the query timeout), so that housekeeping
// leaves the session's connection to the session soon. It returns the rows
// handled.
func inBatches(ctx context.Context, budget time.Duration, batch int64, one func() (int64, error)) (int64, error) {
	var total int64
	until := time.Now().Add(budget)
	for i := 0; i < retentionMaxBatches && ctx.Err() == nil && time.Now().Before(until); i++ {
		n, err := one()
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
	return total, nil
}

// isTypeError tells a time column that cannot be compared with a timestamp.
func isTypeError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42883" || pgErr.Code == "42804")
}
