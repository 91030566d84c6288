package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// SaveAlive records that a relay holds the pipeline now, and when it last
// published (nil: not since it started; the saved value never moves back).
// Before migration 004 the error is one IsMissing tells.
func (p Pipeline) SaveAlive(ctx context.Context, q Querier, lastPublish *time.Time) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET alive_at = now(),
  last_publish_at = GREATEST(last_publish_at, $2) WHERE pipeline = $1`, p.Name, lastPublish)
	return err
}

// SaveBrokerHealth records the problem on the side of the broker the
// relay publishes to (broker: "kafka", "nats-jetstream") and since when,
// or clears it when problem is empty. Before migrations 009 and 018 the
// error is one IsMissing tells.
func (p Pipeline) SaveBrokerHealth(ctx context.Context, q Querier, broker, problem string, since time.Time) error {
	var pr *string
	var s *time.Time
	if problem != "" {
		pr, s = &problem, &since
	}
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET kafka_problem = $2, kafka_problem_since = $3, broker = $4 WHERE pipeline = $1`,
		p.Name, pr, s, broker)
	return err
}

// SaveLost adds rows found deleted before polling published them (between
// seq from and to) to the pipeline's count. The range spans the reports
// that followed each other within an hour: one episode, reported in steps.
// Before migration 007 the error is one IsMissing tells, unwrapped.
func (p Pipeline) SaveLost(ctx context.Context, q Querier, lost, from, to int64) error {
	const set = `UPDATE pgoutbox_state SET lost_deleted = lost_deleted + $2,
  lost_deleted_from_seq = CASE WHEN lost_deleted_at > now() - interval '1 hour'
    THEN LEAST(lost_deleted_from_seq, $3) ELSE $3 END,
  lost_deleted_to_seq = CASE WHEN lost_deleted_at > now() - interval '1 hour'
    THEN GREATEST(lost_deleted_to_seq, $4) ELSE $4 END,
  lost_deleted_at = now(), updated_at = now()`
	// The same statement adds the rows to the deleted-row account's
	// reported ones (Gap.Reported).
	_, err := q.Exec(ctx, set+`, gap_reported = gap_reported + $2 WHERE pipeline = $1`, p.Name, lost, from, to)
	if IsMissing(err) {
		// A state table from before migration 011 (a role that may not
		// migrate it): the report is still shown.
		_, err = q.Exec(ctx, set+` WHERE pipeline = $1`, p.Name, lost, from, to)
	}
	if err != nil && !IsMissing(err) {
		return fmt.Errorf("save lost rows: %w", err)
	}
	return err
}

// Published bounds the rows WAL mode published: transactions at or above
// Start (wal_start_xid) and below Floor (floor_xid). Nil bounds cover none.
type Published struct {
	Start, Floor *string
}

// Published reads the bounds; before migration 004, or for a pipeline not
// saved yet, they are nil.
func (p Pipeline) Published(ctx context.Context, q Querier) (Published, error) {
	var b Published
	err := q.QueryRow(ctx, `SELECT floor_xid::text, wal_start_xid::text FROM pgoutbox_state WHERE pipeline = $1`,
		p.Name).Scan(&b.Floor, &b.Start)
	if err != nil && !IsMissing(err) && !errors.Is(err, pgx.ErrNoRows) {
		return Published{}, fmt.Errorf("read floor: %w", err)
	}
	if err != nil {
		return Published{}, nil
	}
	return b, nil
}

// DeletePublished deletes up to limit rows of table older than olderThan
// (by timeColumn) that are known to be published: marked by polling
// (published_at set on a row written since the polling columns: a row
// without txid is the table's history, whose published_at may be a
// team's own mark), or in b. Rows are picked by ctid in one short
// statement. It returns how many it deleted; the error is the server's.
func DeletePublished(ctx context.Context, q Querier, table outbox.Table, timeColumn string, olderThan time.Duration, b Published, limit int) (int64, error) {
	stmt := fmt.Sprintf(`DELETE FROM %[1]s WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM %[1]s
  WHERE %[2]s < now() - make_interval(secs => $1)
    AND ((%[3]s IS NOT NULL AND %[4]s IS NOT NULL) OR (%[4]s >= $2::text::xid8 AND %[4]s < $3::text::xid8))
  LIMIT %[5]d))`, table.Quoted(), pgx.Identifier{timeColumn}.Sanitize(),
		outbox.PublishedColumn, outbox.TxIDColumn, limit)
	tag, err := q.Exec(ctx, stmt, olderThan.Seconds(), b.Start, b.Floor)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// Unmarked is how polling tells the rows of a table it has yet to publish
// (poll.Config): an SQL condition over a published floor.
type Unmarked interface {
	Unpublished(outbox.FloorSQL) string
}

// Unpublished counts the rows of the polled table that polling has not
// marked (rows) and the pipeline's published floor does not cover (see
// outbox.Floor), and the age of the oldest by timeColumn. In WAL mode
// this includes rows published since the floor last advanced (a few
// seconds' worth while the relay is healthy).
func (p Pipeline) Unpublished(ctx context.Context, q Querier, table outbox.Table, rows Unmarked, timeColumn string) (int64, time.Duration, error) {
	var (
		count  int64
		oldest *float64
	)
	state := func(col string) string {
		return "(SELECT " + col + " FROM pgoutbox_state WHERE pipeline = $1)"
	}
	// A table without the time column (Debezium's documented one has
	// none) has unpublished rows of no known age.
	var hasTime bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $2 AND attnum > 0 AND NOT attisdropped)`,
		table.Quoted(), timeColumn).Scan(&hasTime); err != nil {
		return 0, 0, fmt.Errorf("count unpublished rows: %w", err)
	}
	ageSQL := "NULL::float8"
	if hasTime {
		ageSQL = "extract(epoch FROM now() - min(" + pgx.Identifier{timeColumn}.Sanitize() + "))::float8"
	}
	stmt := fmt.Sprintf(`SELECT count(*), %s FROM %s WHERE %s`,
		ageSQL, table.Quoted(), rows.Unpublished(outbox.FloorSQL{
			XID:        "coalesce(" + state("floor_xid") + ", '0'::xid8)",
			ForeignSeq: state("foreign_floor_seq"),
			ForeignXID: state("foreign_floor_xid"),
		}))
	if err := q.QueryRow(ctx, stmt, p.Name).Scan(&count, &oldest); err != nil {
		return 0, 0, fmt.Errorf("count unpublished rows: %w", err)
	}
	var age time.Duration
	if oldest != nil && *oldest > 0 {
		age = time.Duration(*oldest * float64(time.Second))
	}
	return count, age, nil
}

// SaveStopped records why the relay stopped on a problem retrying cannot
// fix; ClearStopped forgets it once a session starts. Before migration 014
// the error is one IsMissing tells.
func (p Pipeline) SaveStopped(ctx context.Context, q Querier, reason string) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET stopped_reason = $2, stopped_at = now() WHERE pipeline = $1`, p.Name, reason)
	return err
}

// ClearStopped: see SaveStopped.
func (p Pipeline) ClearStopped(ctx context.Context, q Querier) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET stopped_reason = NULL, stopped_at = NULL
WHERE pipeline = $1 AND stopped_reason IS NOT NULL`, p.Name)
	return err
}
