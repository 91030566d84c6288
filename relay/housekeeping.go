package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// housekeeper is what housekeeping remembers of a table between calls,
// from one session of the table to the next. Only the session that holds
// the table uses it, so it needs no lock.
type housekeeper struct {
	lastAlive     time.Time
	lastRetention time.Time
	noColumns     bool  // migration 004 has not run: alive_at and friends are missing
	noKafka       bool  // migration 009 has not run: kafka_problem is missing
	kafkaSaved    int64 // the Kafka health's change count last saved
	kafkaOnce     bool  // kafkaSaved is set
	lastKafka     time.Time
	noRetention   bool // the table cannot be cleaned (no polling columns, odd time column)
	lastMark      time.Time
	markFailed    string // the last marking failure said, so that it is said once
	connClosed    bool   // the session's connection was found closed, and it was said
}

// connClosedMsg says a session's connection to PostgreSQL is gone while
// the session still runs.
const connClosedMsg = "the session's connection to PostgreSQL is closed; the session ends at its next statement, or once Kafka has answered for what it sent"

// housekeeping runs inside a session, on the connection that holds the
// pipeline's lock, between the session's own statements: every few seconds
// it records that the relay is alive and when it last published, and every
// RetentionInterval it deletes published rows older than Retention. It logs
// its failures and never fails the session.
func (p *pipeline) housekeeping(ctx context.Context, conn *pgx.Conn, t *outboxTable) {
	// Bounded like the session's own statements: a dead connection fails
	// here and then ends the session.
	ctx, cancel := context.WithTimeout(ctx, p.cfg.queryTimeout())
	defer cancel()
	hk, now := t.hk, time.Now()
	if conn.IsClosed() {
		// Nothing can be saved on it. The session ends at its next
		// statement, or, while it waits for Kafka to answer for what it
		// sent, once Kafka does: said once, not at every tick.
		if !hk.connClosed {
			hk.connClosed = true
			p.log.Warn(connClosedMsg, "table", t.name.String())
		}
		return
	}
	hk.connClosed = false
	if !hk.noColumns && now.Sub(hk.lastAlive) >= aliveEvery {
		hk.lastAlive = now
		var last *time.Time
		if ns := p.stats.LastPublish.Load(); ns != 0 {
			at := time.Unix(0, ns)
			last = &at
		}
		err := t.own.SaveAlive(ctx, conn, last)
		if store.IsMissing(err) {
			hk.noColumns = true
			p.log.Warn("pgoutbox_state lacks alive_at and last_publish_at: run pgoutbox migrate; status and retention in WAL mode need them")
		} else if err != nil && ctx.Err() == nil {
			p.log.Warn("saving liveness failed", "err", err)
		}
	}
	if !hk.noColumns && !hk.noKafka && (now.Sub(hk.lastKafka) >= aliveEvery || !hk.kafkaOnce ||
		hk.kafkaSaved != p.health.kafkaChanges()) {
		p.saveKafkaHealth(ctx, conn, t)
	}
	if p.cfg.Retention > 0 && !hk.noRetention && now.Sub(hk.lastRetention) >= p.cfg.RetentionInterval {
		hk.lastRetention = now
		if _, err := p.retain(ctx, conn, t); err != nil && ctx.Err() == nil {
			p.log.Warn("retention failed", "err", err)
		}
	}
}

// saveKafkaHealth writes the current Kafka problem and since when to
// pgoutbox_state, or clears them, for status to read.
func (p *pipeline) saveKafkaHealth(ctx context.Context, conn *pgx.Conn, t *outboxTable) {
	hk := t.hk
	problem, since, changes := p.health.kafkaProblem()
	err := t.own.SaveKafkaHealth(ctx, conn, problem, since)
	switch {
	case store.IsMissing(err):
		hk.noKafka = true
		p.log.Warn("pgoutbox_state lacks kafka_problem: run pgoutbox migrate; status needs it to show Kafka problems")
	case err != nil:
		if ctx.Err() == nil {
			p.log.Warn("saving the Kafka health failed", "err", err)
		}
	default:
		hk.kafkaSaved, hk.kafkaOnce, hk.lastKafka = changes, true, time.Now()
	}
}

// saveKafkaChange saves the Kafka health at a session's start when it
// changed since it was last saved: a session that failed on a record may
// have ended before its housekeeping ran.
func (p *pipeline) saveKafkaChange(ctx context.Context, conn *pgx.Conn, t *outboxTable) {
	hk := t.hk
	if hk.noColumns || hk.noKafka || (hk.kafkaOnce && hk.kafkaSaved == p.health.kafkaChanges()) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.queryTimeout())
	defer cancel()
	p.saveKafkaHealth(ctx, conn, t)
}

// markWALStart records wal_start_xid once, for a pipeline whose slot
// exists: transactions at or above the snapshot's xmax start after the
// slot's consistent point, so the stream carries their rows.
// Setup does the same as soon as it creates a slot (saveWALStart); this
// covers slots created before migration 004.
func (p *pipeline) markWALStart(ctx context.Context, conn *pgx.Conn) {
	if p.tables[0].hk.noColumns {
		return
	}
	if err := saveWALStart(ctx, conn, p.cfg.Replication.Slot, false); err != nil && ctx.Err() == nil {
		p.log.Warn("saving the WAL start failed", "err", err)
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
func (p *pipeline) retain(ctx context.Context, conn *pgx.Conn, t *outboxTable) (int64, error) {
	cfg := p.cfg
	if t.poll.OwnMark() {
		// Published rows are marked by the team's own column; their own
		// job keeps the table.
		t.hk.noRetention = true
		p.log.Warn("retention is off: the table's own column marks published rows, and pgoutbox deletes none of them", "table", t.name.String())
		return 0, nil
	}
	ok, err := poll.HasColumns(ctx, conn, t.name)
	if err != nil {
		return 0, err
	}
	if !ok {
		t.hk.noRetention = true
		p.log.Warn("retention is off: the outbox table lacks the polling columns (seq, txid, published_at) that tell published rows apart", "table", t.name.String())
		return 0, nil
	}
	// Without migration 004 the bounds are empty: WAL rows stay until the
	// floor is known.
	published, err := t.own.Published(ctx, conn)
	if err != nil {
		return 0, err
	}
	total, err := p.inBatches(ctx, retentionBatch, func() (int64, error) {
		n, err := store.DeletePublished(ctx, conn, t.name, cfg.timeColumn(), cfg.Retention, published, retentionBatch)
		p.obs.retainedDeleted(n)
		return n, err
	})
	if err != nil {
		if store.IsMissing(err) || isTypeError(err) {
			t.hk.noRetention = true
		}
		return total, fmt.Errorf("delete published rows: %w", err)
	}
	if total > 0 {
		p.log.Info("retention deleted published rows", "table", t.name.String(), "rows", total, "older_than", cfg.Retention)
	}
	return total, nil
}

// inBatches runs one, a statement that handles up to batch rows and says
// how many it did, until one does fewer, at most retentionMaxBatches times
// and for a third of the query timeout, so that housekeeping leaves the
// session's connection to the session soon. It returns the rows handled.
func (p *pipeline) inBatches(ctx context.Context, batch int64, one func() (int64, error)) (int64, error) {
	var total int64
	budget := time.Now().Add(p.cfg.queryTimeout() / 3)
	for i := 0; i < retentionMaxBatches && ctx.Err() == nil && time.Now().Before(budget); i++ {
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
