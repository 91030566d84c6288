package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/store"
)

// ErrClusterChanged means the pipeline's state was saved on another
// cluster (a dump and restore, an upgrade) and this mode cannot poll what
// that leaves unpublished.
var ErrClusterChanged = errors.New("the pipeline's state was saved on another cluster")

// clusterCheck compares the cluster a table's positions were saved on
// with the session's (run). It is handed the table, its state row, how
// polling reads it, and the pipeline it names in what it logs.
type clusterCheck struct {
	own      store.Pipeline
	table    outbox.Table
	poll     poll.Config
	pipeline string
	log      *slog.Logger
}

// clusterChange is what judgeCluster found: the saved positions belong to
// another cluster.
type clusterChange struct {
	saved, current int64 // system identifiers; 0 when unknown
	why            string
	// foreign is the floor kept for the rows copied from there; nil: every
	// unpublished row is published again.
	foreign *outbox.ForeignFloor
	// noSeq says why foreign is nil although a floor was saved.
	noSeq string
}

// run compares the cluster the table's positions were saved on
// with this one: by system identifier, and, for state saved before it was
// recorded, by the floor against this cluster's next transaction id and the
// confirmed position against its WAL end. A physical standby promoted after
// a failover is the same cluster (same identifier, and it has every state
// row it replayed). On a change, with record, the saved floor is kept only
// for the rows copied from the other cluster (outbox.ForeignFloor),
// this cluster's floor starts empty, and a handoff is made pending, so that
// polling publishes everything the floor does not cover before a slot is
// streamed; the change is logged and recorded for status. Without record
// (a mode that cannot poll) a change is ErrClusterChanged, every time, until
// a relay that can poll has run or the operator accepted the gap.
//
// It returns the cluster's system identifier (0: unknown), which the
// session saves with each floor and compares exactly-once positions with.
func (c clusterCheck) run(ctx context.Context, conn *pgx.Conn, record bool) (int64, error) {
	var current int64
	if err := conn.QueryRow(ctx, "SELECT system_identifier FROM pg_control_system()").Scan(&current); err != nil {
		// Some services hide it; the checks below still catch a floor
		// or position from elsewhere.
		c.log.Debug("cannot read the cluster's system identifier", "err", err)
		current = 0
	}
	st, err := c.own.Positions(ctx, conn)
	if err != nil || st == nil {
		return current, err
	}
	var xmaxText string
	var walEnd *string
	if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text,
  CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END`).Scan(&xmaxText, &walEnd); err != nil {
		return current, fmt.Errorf("read cluster position: %w", err)
	}
	xmax, _ := strconv.ParseUint(xmaxText, 10, 64)
	change := judgeCluster(st, current, xmax, walEnd)
	if change == nil {
		return current, nil
	}
	if !record {
		return current, fmt.Errorf("%w: %s; rows written here before its slot may be unpublished. Run with --mode auto (with the polling columns) to publish them by polling, or accept the gap with: pgoutbox slot create --force",
			ErrClusterChanged, change.why)
	}
	return current, c.recordChange(ctx, conn, st, change)
}

// judgeCluster returns the change, or nil when st belongs to this cluster:
// current is its system identifier (0: unknown), xmax its next
// transaction id, walEnd its WAL end (nil on a standby).
func judgeCluster(st *store.Positions, current int64, xmax uint64, walEnd *string) *clusterChange {
	c := &clusterChange{current: current}
	if st.Cluster != nil {
		c.saved = *st.Cluster
	}
	switch {
	case st.Cluster != nil && current != 0 && *st.Cluster != current:
		c.why = fmt.Sprintf("state saved on cluster %d, this is cluster %d", *st.Cluster, current)
	case st.FloorXID != nil && parseUint(*st.FloorXID) > xmax:
		c.why = fmt.Sprintf("the saved floor (transaction %s) is above this cluster's next transaction id %d", *st.FloorXID, xmax)
	case st.Confirmed != nil && walEnd != nil && lsnAfter(*st.Confirmed, *walEnd):
		c.why = fmt.Sprintf("the saved confirmed position %s is beyond this cluster's WAL end %s", *st.Confirmed, *walEnd)
	default:
		return nil
	}
	return c
}

// recordChange keeps the floor saved on the other cluster for the rows
// copied from it, empties this cluster's floor, makes a handoff pending,
// and logs what it did.
func (cc clusterCheck) recordChange(ctx context.Context, conn *pgx.Conn, st *store.Positions, c *clusterChange) error {
	c.foreign, c.noSeq = foreignFloor(st)
	if c.foreign != nil {
		// Rows written here are told from copied ones by their seq, which
		// holds only if the sequence moved with the rows.
		pos, err := poll.ReadFloorCandidate(ctx, conn, cc.poll)
		if err != nil {
			return err
		}
		if pos.Seq < c.foreign.Seq {
			c.noSeq = fmt.Sprintf("the outbox sequence (%d) is below its value when the floor was saved (%d): it was not carried over", pos.Seq, c.foreign.Seq)
			c.foreign = nil
		}
	}
	floor := outbox.Floor{Foreign: c.foreign}
	toSend, skipped, err := cc.countFloor(ctx, conn, floor)
	if err != nil {
		return err
	}
	action := fmt.Sprintf("polling publishes the %d unpublished rows the old floor does not cover before streaming; %d rows below it are taken as published there", toSend, skipped)
	if c.foreign == nil {
		action = fmt.Sprintf("polling publishes every unpublished row (%d) before streaming", toSend)
		if c.noSeq != "" {
			action += ", because " + c.noSeq
		}
	}
	note := c.why + "; " + action
	var id *int64
	if c.current != 0 {
		id = &c.current
	}
	if err := cc.own.RecordClusterChange(ctx, conn, store.ClusterChange{Cluster: id, Note: note, Foreign: c.foreign}); err != nil {
		return err
	}
	attrs := []any{"pipeline", cc.pipeline, "saved_on", c.saved, "cluster", c.current,
		"why", c.why, "rows_to_publish", toSend, "rows_taken_as_published", skipped}
	if c.foreign != nil {
		attrs = append(attrs, "old_floor_xid", c.foreign.XID, "old_floor_seq", c.foreign.Seq)
	}
	cc.log.Warn("a new cluster: positions saved on another cluster are not trusted; "+action, attrs...)
	return nil
}

// foreignFloor is the floor saved on the other cluster that st holds, kept
// for the rows copied from there; nil, with why, when it holds none that
// can be trusted.
func foreignFloor(st *store.Positions) (foreign *outbox.ForeignFloor, noSeq string) {
	switch {
	case st.FloorXID != nil && st.FloorSeq != nil:
		return &outbox.ForeignFloor{XID: parseUint(*st.FloorXID), Seq: *st.FloorSeq}, ""
	case st.FloorXID != nil:
		return nil, "the floor was saved by an older pgoutbox, without the sequence's value"
	case st.ForeignXID != nil && st.ForeignSeq != nil:
		// Moved again before this cluster had a floor of its own.
		return &outbox.ForeignFloor{XID: parseUint(*st.ForeignXID), Seq: *st.ForeignSeq}, ""
	}
	return nil, ""
}

// countFloor counts the unpublished rows floor does not cover (what polling
// publishes) and those it covers.
func (cc clusterCheck) countFloor(ctx context.Context, conn *pgx.Conn, floor outbox.Floor) (toSend, covered int64, err error) {
	ok, err := cc.poll.HasColumns(ctx, conn)
	if err != nil || !ok {
		return 0, 0, err
	}
	var seq, xid *string
	if floor.Foreign != nil {
		s, x := strconv.FormatInt(floor.Foreign.Seq, 10), strconv.FormatUint(floor.Foreign.XID, 10)
		seq, xid = &s, &x
	}
	pc := cc.poll
	pc.Defaults()
	order, txid := pgx.Identifier{pc.Order}.Sanitize(), pgx.Identifier{outbox.TxIDColumn}.Sanitize()
	// Unmarked rows: those that a floor of 0 leaves to polling.
	unmarked := pc.Unpublished(outbox.FloorSQL{XID: "'0'::xid8", ForeignSeq: "NULL::bigint", ForeignXID: "'0'::xid8"})
	err = conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE $1::text::bigint IS NULL OR %[2]s > $1::text::bigint OR %[3]s IS NULL OR %[3]s >= $2::text::xid8),
  count(*) FILTER (WHERE %[2]s <= $1::text::bigint AND %[3]s < $2::text::xid8)
FROM %[1]s WHERE %[4]s`, cc.table.Quoted(), order, txid, unmarked),
		seq, xid).Scan(&toSend, &covered)
	if err != nil {
		return 0, 0, fmt.Errorf("count unpublished rows: %w", err)
	}
	return toSend, covered, nil
}

func parseUint(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// lsnAfter tells whether LSN a is beyond b; unparsable is not.
func lsnAfter(a, b string) bool {
	la, err1 := pglogrepl.ParseLSN(a)
	lb, err2 := pglogrepl.ParseLSN(b)
	return err1 == nil && err2 == nil && la > lb
}
