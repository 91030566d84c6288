package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Gap is the account of deleted rows that pgoutbox_state keeps between
// phases (migration 011), so that a poll phase can judge rows deleted while
// no poll phase ran. relay's vanish detector says what each field means.
type Gap struct {
	Seq, KnownSeq, Known, Deletes, Unseen, Reported int64
	// BatchFrom and BatchTo bound a batch added to Known and not confirmed
	// marked (0, -1: none).
	BatchFrom, BatchTo int64
	// SameStats: the database's statistics were not reset since the
	// account was saved.
	SameStats bool
	// Files names the relations that held the table's rows, and their
	// files, when the account was saved (migration 013; empty before).
	Files string
}

// LoadGap reads the pipeline's account; nil where there is none.
func (p Pipeline) LoadGap(ctx context.Context, q Querier) (*Gap, error) {
	var (
		g   Gap
		seq *int64
	)
	err := q.QueryRow(ctx, `SELECT gap_seq, coalesce(gap_known_seq, 0), coalesce(gap_known, 0), coalesce(gap_deletes, 0),
  coalesce(gap_unseen, 0), gap_reported, coalesce(gap_batch_from, 0), coalesce(gap_batch_to, -1),
  gap_stats_reset IS NOT DISTINCT FROM (SELECT stats_reset FROM pg_stat_database WHERE datname = current_database()),
  coalesce(gap_files, '')
FROM pgoutbox_state WHERE pipeline = $1`, p.Name).Scan(&seq, &g.KnownSeq, &g.Known, &g.Deletes, &g.Unseen, &g.Reported,
		&g.BatchFrom, &g.BatchTo, &g.SameStats, &g.Files)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && seq == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the deleted-row account: %w", err)
	}
	g.Seq = *seq
	return &g, nil
}

// SaveGap replaces the pipeline's account (Seq, KnownSeq, Known, Deletes,
// Unseen, Reported and Files; no batch in doubt), with the statistics'
// reset time.
func (p Pipeline) SaveGap(ctx context.Context, q Querier, g Gap) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET gap_seq = $2, gap_known_seq = $3, gap_known = $4,
  gap_deletes = $5, gap_unseen = $6, gap_reported = $7, gap_files = $8, gap_at = now(), gap_batch_from = NULL, gap_batch_to = NULL,
  gap_stats_reset = (SELECT stats_reset FROM pg_stat_database WHERE datname = current_database())
WHERE pipeline = $1`, p.Name, g.Seq, g.KnownSeq, g.Known, g.Deletes, g.Unseen, g.Reported, g.Files)
	if err != nil && !IsMissing(err) {
		return fmt.Errorf("save the deleted-row account: %w", err)
	}
	return err
}

// ForgetGap drops the pipeline's account.
func (p Pipeline) ForgetGap(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, `UPDATE pgoutbox_state SET gap_seq = NULL WHERE pipeline = $1`, p.Name); err != nil {
		return fmt.Errorf("drop the deleted-row account: %w", err)
	}
	return nil
}

// SaveGapProgress moves the account of the reading at knownSeq to seq and
// unseen, takes back taken rows added for a batch Kafka did not ack, and
// ends the batch's doubt.
func (p Pipeline) SaveGapProgress(ctx context.Context, q Querier, knownSeq, seq, unseen, taken int64) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET gap_seq = $3, gap_unseen = $4, gap_at = now(),
  gap_known = gap_known - $5, gap_batch_from = NULL, gap_batch_to = NULL
WHERE pipeline = $1 AND gap_known_seq = $2 AND gap_seq IS NOT NULL`, p.Name, knownSeq, seq, unseen, taken)
	return err
}

// AddGapBatch adds n rows about to be published, positions lo to hi, to the
// known rows of the account of the reading at knownSeq, and keeps their
// range as the batch in doubt.
func (p Pipeline) AddGapBatch(ctx context.Context, q Querier, knownSeq, n, lo, hi int64) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET gap_known = gap_known + $3,
  gap_batch_from = LEAST(gap_batch_from, $4), gap_batch_to = GREATEST(gap_batch_to, $5)
WHERE pipeline = $1 AND gap_known_seq = $2 AND gap_seq IS NOT NULL`, p.Name, knownSeq, n, lo, hi)
	return err
}
