package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// Positions is what the pipeline saved about where it stands, and on which
// cluster: the cluster's system identifier, the published floor and the
// floor kept from another cluster, the confirmed position. Nil: not saved.
type Positions struct {
	Cluster              *int64
	FloorXID, ForeignXID *string
	FloorSeq, ForeignSeq *int64
	Confirmed            *string
}

// Positions reads the saved positions; nil when the pipeline has no state
// yet. A state table without the cluster columns is ErrNoState.
func (p Pipeline) Positions(ctx context.Context, q Querier) (*Positions, error) {
	var st Positions
	err := q.QueryRow(ctx, `SELECT system_identifier, floor_xid::text, floor_seq, foreign_floor_xid::text, foreign_floor_seq,
  confirmed_lsn::text FROM pgoutbox_state WHERE pipeline = $1`, p.Name).Scan(
		&st.Cluster, &st.FloorXID, &st.FloorSeq, &st.ForeignXID, &st.ForeignSeq, &st.Confirmed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case IsMissing(err):
		return nil, fmt.Errorf("%w: the state table is from an older pgoutbox", ErrNoState)
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	}
	return &st, nil
}

// ClusterChange is what the relay does on finding its positions were saved
// on another cluster.
type ClusterChange struct {
	// Cluster is this cluster's system identifier (nil: unknown).
	Cluster *int64
	// Note says what was seen and done, for status.
	Note string
	// Foreign is the floor kept for the rows copied from the other
	// cluster; nil: none.
	Foreign *outbox.ForeignFloor
}

// RecordClusterChange saves a change of cluster: the previous identifier,
// the note, the foreign floor; this cluster's floor and positions start
// empty and a handoff is made pending.
func (p Pipeline) RecordClusterChange(ctx context.Context, q Querier, c ClusterChange) error {
	var foreignXID, foreignSeq *string
	if c.Foreign != nil {
		x, s := strconv.FormatUint(c.Foreign.XID, 10), strconv.FormatInt(c.Foreign.Seq, 10)
		foreignXID, foreignSeq = &x, &s
	}
	if _, err := q.Exec(ctx, `UPDATE pgoutbox_state SET previous_system_identifier = system_identifier,
  system_identifier = $2, cluster_changed_at = now(), cluster_change = $3,
  foreign_floor_xid = $4::text::xid8, foreign_floor_seq = $5::text::bigint,
  floor_xid = NULL, floor_seq = NULL, confirmed_lsn = NULL, wal_start_xid = NULL,
  handoff_pending = true, handoff_xmax = NULL, handoff_seq = NULL, updated_at = now()
WHERE pipeline = $1`, p.Name, c.Cluster, c.Note, foreignXID, foreignSeq); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// Floor reads the pipeline's published floor; empty when none was saved.
func (p Pipeline) Floor(ctx context.Context, q Querier) (outbox.Floor, error) {
	var f outbox.Floor
	var floor, foreignXID *string
	var foreignSeq *int64
	err := q.QueryRow(ctx, `SELECT floor_xid::text, foreign_floor_xid::text, foreign_floor_seq
FROM pgoutbox_state WHERE pipeline = $1`, p.Name).Scan(&floor, &foreignXID, &foreignSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read floor: %w", err)
	}
	if floor != nil {
		f.XID = parseUint(*floor)
	}
	if foreignXID != nil && foreignSeq != nil {
		f.Foreign = &outbox.ForeignFloor{XID: parseUint(*foreignXID), Seq: *foreignSeq}
	}
	return f, nil
}

func parseUint(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
