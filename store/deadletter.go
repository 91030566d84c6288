package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeadLetter is one entry of pgoutbox_dead_letter.
type DeadLetter struct {
	ID          int64      `json:"id"`
	Table       string     `json:"table"`
	EventID     string     `json:"event_id"`
	AggregateID string     `json:"aggregate_id"`
	LSN         string     `json:"lsn,omitempty"`
	Reason      string     `json:"reason"`
	CreatedAt   time.Time  `json:"created_at"`
	ReplayedAt  *time.Time `json:"replayed_at,omitempty"`
	Resolution  string     `json:"resolution,omitempty"`
}

// Resolutions of a dead letter that is no longer open.
const (
	ResolutionReplayed = "replayed"
	ResolutionSkipped  = "skipped"
)

// NewDeadLetter is a poison row to record.
type NewDeadLetter struct {
	Table       string
	EventID     string
	AggregateID string
	LSN         *string // nil: polled, no position
	TxID        string
	Reason      string
	Row         []byte // the row as JSON, column name to text value
}

// HeldAggregates returns the aggregates with an open dead letter. Without
// the dead-letter table it is ErrNoState.
func (p Pipeline) HeldAggregates(ctx context.Context, q Querier) ([]string, error) {
	rows, err := q.Query(ctx, "SELECT DISTINCT aggregate_id FROM pgoutbox_dead_letter WHERE pipeline = $1 AND replayed_at IS NULL", p.Name)
	var keys []string
	if err == nil {
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		if IsMissing(err) {
			return nil, fmt.Errorf("%w (pgoutbox_dead_letter): run pgoutbox migrate", ErrNoState)
		}
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return keys, nil
}

// IsHeld tells whether the aggregate has an open dead letter.
func (p Pipeline) IsHeld(ctx context.Context, q Querier, aggregate string) (bool, error) {
	var open bool
	err := q.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pgoutbox_dead_letter WHERE pipeline = $1 AND aggregate_id = $2 AND replayed_at IS NULL)",
		p.Name, aggregate).Scan(&open)
	if err != nil {
		return false, fmt.Errorf("read dead letters: %w", err)
	}
	return open, nil
}

// AddDeadLetter records a poison row once per event (migration 008): a
// session that failed after recording it meets the event again and must
// not record it twice. added says this call recorded it.
func (p Pipeline) AddDeadLetter(ctx context.Context, q Querier, d NewDeadLetter) (added bool, err error) {
	tag, err := q.Exec(ctx, `INSERT INTO pgoutbox_dead_letter
(pipeline, outbox_table, event_id, aggregate_id, lsn, txid, reason, row_data)
VALUES ($1, $2, $3, $4, $5::text::pg_lsn, $6, $7, $8) ON CONFLICT DO NOTHING`,
		p.Name, d.Table, d.EventID, d.AggregateID, d.LSN, d.TxID, d.Reason, d.Row)
	if err != nil {
		return false, fmt.Errorf("record dead letter: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// DeadLetters returns the pipeline's dead letters, oldest first; with all,
// those already replayed or skipped too.
func (p Pipeline) DeadLetters(ctx context.Context, q Querier, all bool) ([]DeadLetter, error) {
	rows, err := q.Query(ctx, `SELECT id, outbox_table, coalesce(event_id, ''), aggregate_id, coalesce(lsn::text, ''), reason, created_at, replayed_at, coalesce(resolution, '')
FROM pgoutbox_dead_letter WHERE pipeline = $1 AND ($2 OR replayed_at IS NULL) ORDER BY id`, p.Name, all)
	if err != nil {
		if IsMissing(err) {
			return nil, fmt.Errorf("%w (pgoutbox_dead_letter): run pgoutbox migrate", ErrNoState)
		}
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		err := row.Scan(&d.ID, &d.Table, &d.EventID, &d.AggregateID, &d.LSN, &d.Reason, &d.CreatedAt, &d.ReplayedAt, &d.Resolution)
		return d, err
	})
}

// SkipDeadLetter resolves an open dead letter without publishing it: an
// explicit decision, recorded as such, that releases its aggregate once no
// earlier entry of it is open.
func (p Pipeline) SkipDeadLetter(ctx context.Context, q Querier, id int64) error {
	tag, err := q.Exec(ctx, `UPDATE pgoutbox_dead_letter SET replayed_at = now(), resolution = $3
WHERE pipeline = $1 AND id = $2 AND replayed_at IS NULL`, p.Name, id, ResolutionSkipped)
	if err != nil {
		return fmt.Errorf("skip dead letter: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("no open dead letter %d in pipeline %s", id, p.Name)
	}
	return nil
}

// MarkReplayed records that dead letter id was published again.
func (p Pipeline) MarkReplayed(ctx context.Context, q Querier, id int64) error {
	if _, err := q.Exec(ctx, "UPDATE pgoutbox_dead_letter SET replayed_at = now(), resolution = $2 WHERE id = $1", id, ResolutionReplayed); err != nil {
		return fmt.Errorf("mark dead letter %d replayed: %w", id, err)
	}
	return nil
}

// DeadLetterRow returns the copy of the row kept with dead letter id, as
// JSON (column name to text value).
func (p Pipeline) DeadLetterRow(ctx context.Context, q Querier, id int64) ([]byte, error) {
	var raw []byte
	if err := q.QueryRow(ctx, "SELECT row_data FROM pgoutbox_dead_letter WHERE id = $1", id).Scan(&raw); err != nil {
		return nil, err
	}
	return raw, nil
}
