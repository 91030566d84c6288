package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Snapshot is where a pipeline stands with publishing the rows that were in
// its table before it existed (--snapshot-mode initial).
type Snapshot struct {
	// Known: the pipeline has a state row; a pipeline without one has
	// never started.
	Known bool
	// Pending: the snapshot was started and has not finished.
	Pending bool
}

// Snapshot reads the pipeline's snapshot state.
func (p Pipeline) Snapshot(ctx context.Context, q Querier) (Snapshot, error) {
	var s Snapshot
	err := q.QueryRow(ctx, "SELECT true, snapshot_pending FROM pgoutbox_state WHERE pipeline = $1", p.Name).Scan(&s.Known, &s.Pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return Snapshot{}, nil
	}
	if err != nil {
		return s, fmt.Errorf("read snapshot state: %w", err)
	}
	return s, nil
}

// PendSnapshot records that the snapshot of table is under way, creating
// the pipeline's row for its first start. It is written before the slot
// exists and before any row is read: whatever happens next, the next start
// knows the snapshot is unfinished and does it again.
func (p Pipeline) PendSnapshot(ctx context.Context, q Querier, table string) error {
	if _, err := q.Exec(ctx, `
INSERT INTO pgoutbox_state (pipeline, outbox_table, snapshot_pending) VALUES ($1, $2, true)
ON CONFLICT (pipeline) DO UPDATE SET snapshot_pending = true, updated_at = now()`, p.Name, table); err != nil {
		return fmt.Errorf("save snapshot state: %w", err)
	}
	return nil
}

// EndSnapshot records that every row of the snapshot was acknowledged.
// A snapshot that covered everything before the slot also ends a handoff
// to that slot: nothing committed before it is left to poll.
func (p Pipeline) EndSnapshot(ctx context.Context, q Querier, coversSlot bool) error {
	sql := "UPDATE pgoutbox_state SET snapshot_pending = false, updated_at = now() WHERE pipeline = $1"
	if coversSlot {
		sql = `UPDATE pgoutbox_state SET snapshot_pending = false, handoff_pending = false, handoff_xmax = NULL,
  handoff_seq = NULL, updated_at = now() WHERE pipeline = $1`
	}
	if _, err := q.Exec(ctx, sql, p.Name); err != nil {
		return fmt.Errorf("save snapshot state: %w", err)
	}
	return nil
}
