package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
)

// Ensure brings pgoutbox's own tables (state, dead letters) to this
// binary's version, so that run alone works where migrate never ran. The
// outbox table is not touched. It returns the versions it migrated from
// and to; to is 0 when nothing was to do. A role that may not create
// tables, or a read-only server, is ErrNoState with what to run or grant.
func Ensure(ctx context.Context, conn *pgx.Conn) (from, to int32, err error) {
	latest, err := migrations.Latest()
	if err != nil {
		return 0, 0, err
	}
	err = conn.QueryRow(ctx, "SELECT version FROM "+migrations.VersionTable).Scan(&from)
	switch {
	case err == nil && from >= latest:
		return from, 0, nil
	case err == nil, IsMissing(err):
	case isInsufficientPrivilege(err):
		// A least-privilege role that cannot read the version: Check,
		// on the state table itself, decides.
		return 0, 0, nil
	default:
		return 0, 0, fmt.Errorf("read %s: %w", migrations.VersionTable, err)
	}
	to, err = migrations.Migrate(ctx, conn, migrations.Options{StateOnly: true})
	if err != nil {
		if isInsufficientPrivilege(err) {
			var role, quoted string
			_ = conn.QueryRow(ctx, "SELECT current_user, quote_ident(current_user)").Scan(&role, &quoted)
			return from, 0, fmt.Errorf("%w, and role %q may not create them. "+
				"Run pgoutbox migrate once as a role that may (the database owner), then GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state, pgoutbox_dead_letter TO %s "+
				"and GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO %s; or GRANT CREATE ON SCHEMA public TO %s", ErrNoState, role, quoted, quoted, quoted)
		}
		if isReadOnly(err) {
			return from, 0, fmt.Errorf("%w, and the server is read-only (a standby, or default_transaction_read_only): "+
				"point --database-url at the primary, or list every host with target_session_attrs=read-write", ErrNoState)
		}
		return from, 0, fmt.Errorf("create pgoutbox's own tables: %w", err)
	}
	return from, to, nil
}

// Check tells whether the state table exists and is of this version, and
// reads whether the pipeline is known and the position it last confirmed
// (nil when none was saved). A missing or older table is ErrNoState.
func (p Pipeline) Check(ctx context.Context, q Querier) (known bool, confirmed *string, err error) {
	var hasState bool
	if err := q.QueryRow(ctx, "SELECT to_regclass('pgoutbox_state') IS NOT NULL").Scan(&hasState); err != nil {
		return false, nil, fmt.Errorf("look up state table: %w", err)
	}
	if !hasState {
		return false, nil, fmt.Errorf("%w: run pgoutbox migrate", ErrNoState)
	}
	// The newest migration's column, looked up in the catalog that every
	// role may read: an older schema is named, not met halfway.
	var current bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = 'pgoutbox_state'::regclass AND attname = 'snapshot_pending' AND NOT attisdropped)`).Scan(&current); err != nil {
		return false, nil, fmt.Errorf("look up state table: %w", err)
	}
	if !current {
		return false, nil, fmt.Errorf("%w: the state table is from an older pgoutbox; run pgoutbox migrate", ErrNoState)
	}
	err = q.QueryRow(ctx, "SELECT true, confirmed_lsn::text FROM pgoutbox_state WHERE pipeline = $1", p.Name).Scan(&known, &confirmed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, nil, fmt.Errorf("read state: %w", err)
	}
	return known, confirmed, nil
}

// PendHandoff records a pending handoff before a slot is created: whatever
// happens next, the next start knows the rows before the slot still need
// polling.
func (p Pipeline) PendHandoff(ctx context.Context, q Querier, table string) error {
	if _, err := q.Exec(ctx, `
INSERT INTO pgoutbox_state (pipeline, outbox_table, handoff_pending) VALUES ($1, $2, true)
ON CONFLICT (pipeline) DO UPDATE SET handoff_pending = true, handoff_xmax = NULL, handoff_seq = NULL, updated_at = now()`,
		p.Name, table); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// SaveSetup records the pipeline's table and, when confirmed is not nil, the
// slot's position; a new pipeline starts in WAL mode.
func (p Pipeline) SaveSetup(ctx context.Context, q Querier, table string, confirmed *string) error {
	_, err := q.Exec(ctx, `
INSERT INTO pgoutbox_state (pipeline, outbox_table, mode, confirmed_lsn)
VALUES ($1, $2, 'wal', $3::text::pg_lsn)
ON CONFLICT (pipeline) DO UPDATE SET outbox_table = EXCLUDED.outbox_table,
  confirmed_lsn = coalesce(EXCLUDED.confirmed_lsn, pgoutbox_state.confirmed_lsn), updated_at = now()`,
		p.Name, table, confirmed)
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// Forget removes the pipeline's state, so that a new slot of the same name
// is not taken for a lost one. Without a state table there is nothing to
// forget.
func (p Pipeline) Forget(ctx context.Context, q Querier) error {
	var hasState bool
	if err := q.QueryRow(ctx, "SELECT to_regclass('pgoutbox_state') IS NOT NULL").Scan(&hasState); err != nil {
		return fmt.Errorf("look up state table: %w", err)
	}
	if !hasState {
		return nil
	}
	if _, err := q.Exec(ctx, "DELETE FROM pgoutbox_state WHERE pipeline = $1", p.Name); err != nil {
		return fmt.Errorf("forget pipeline %s: %w", p.Name, err)
	}
	return nil
}

// CountSlotLoss counts one more lost slot.
func (p Pipeline) CountSlotLoss(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, "UPDATE pgoutbox_state SET slot_losses = slot_losses + 1 WHERE pipeline = $1", p.Name); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// Handoff is a handoff's state: Pending until polling published what
// committed before the slot; XMax and Seq bound it once read (nil before).
type Handoff struct {
	Pending bool
	XMax    *uint64
	Seq     *int64
}

// Handoff reads the pipeline's handoff state.
func (p Pipeline) Handoff(ctx context.Context, q Querier) (Handoff, error) {
	var h Handoff
	var xmax *string
	if err := q.QueryRow(ctx, "SELECT handoff_pending, handoff_xmax::text, handoff_seq FROM pgoutbox_state WHERE pipeline = $1",
		p.Name).Scan(&h.Pending, &xmax, &h.Seq); err != nil {
		return h, fmt.Errorf("read state: %w", err)
	}
	if xmax != nil {
		x, _ := strconv.ParseUint(*xmax, 10, 64)
		h.XMax = &x
	}
	return h, nil
}

// SaveHandoffBounds records the bounds of a pending handoff.
func (p Pipeline) SaveHandoffBounds(ctx context.Context, q Querier, xmax uint64, seq int64) error {
	if _, err := q.Exec(ctx, "UPDATE pgoutbox_state SET handoff_xmax = $2::text::xid8, handoff_seq = $3 WHERE pipeline = $1",
		p.Name, strconv.FormatUint(xmax, 10), seq); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// EndHandoff records that the handoff's polling is done, if its bounds
// are still xmax and seq: a slot replaced again since (by another relay of
// the pipeline, say) cleared them or saved later ones, and ended is false.
func (p Pipeline) EndHandoff(ctx context.Context, q Querier, xmax uint64, seq int64) (ended bool, err error) {
	tag, err := q.Exec(ctx, `UPDATE pgoutbox_state SET handoff_pending = false, handoff_xmax = NULL, handoff_seq = NULL
WHERE pipeline = $1 AND handoff_pending AND handoff_xmax = $2::text::xid8 AND handoff_seq = $3`,
		p.Name, strconv.FormatUint(xmax, 10), seq)
	if err != nil {
		return false, fmt.Errorf("save state: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// SetMode records the mode and why, counting switches, and the tables the
// pipeline now reads; a missing state table is ErrNoState.
func (p Pipeline) SetMode(ctx context.Context, q Querier, table string, mode Mode, reason Reason) error {
	_, err := q.Exec(ctx, `
INSERT INTO pgoutbox_state (pipeline, outbox_table, mode, mode_reason) VALUES ($1, $2, $3, $4)
ON CONFLICT (pipeline) DO UPDATE SET
  switches = pgoutbox_state.switches + CASE WHEN pgoutbox_state.mode = EXCLUDED.mode THEN 0 ELSE 1 END,
  mode_since = CASE WHEN pgoutbox_state.mode = EXCLUDED.mode THEN pgoutbox_state.mode_since ELSE now() END,
  mode = EXCLUDED.mode, mode_reason = EXCLUDED.mode_reason, outbox_table = EXCLUDED.outbox_table, updated_at = now()`,
		p.Name, table, string(mode), reason.encode())
	if err != nil {
		if IsMissing(err) {
			return fmt.Errorf("%w: run pgoutbox migrate", ErrNoState)
		}
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// Mode reads the mode the pipeline last recorded ("" without state).
func (p Pipeline) Mode(ctx context.Context, q Querier) (Mode, error) {
	var m string
	err := q.QueryRow(ctx, "SELECT mode FROM pgoutbox_state WHERE pipeline = $1", p.Name).Scan(&m)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read state: %w", err)
	}
	return Mode(m), nil
}

// PolledUntil reads polled_until: where a WAL stream passes every row the
// last poll phase published ("" when none was recorded, or before
// migration 016).
func (p Pipeline) PolledUntil(ctx context.Context, q Querier) (string, error) {
	var lsn *string
	err := q.QueryRow(ctx, "SELECT polled_until::text FROM pgoutbox_state WHERE pipeline = $1", p.Name).Scan(&lsn)
	switch {
	case errors.Is(err, pgx.ErrNoRows), IsMissing(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read state: %w", err)
	case lsn == nil:
		return "", nil
	}
	return *lsn, nil
}

// SavePolledUntil records polled_until; it never moves back. Before
// migration 016 there is nothing to record.
func (p Pipeline) SavePolledUntil(ctx context.Context, q Querier, lsn string) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET polled_until = GREATEST(polled_until, $2::text::pg_lsn)
WHERE pipeline = $1`, p.Name, lsn)
	if err != nil && !IsMissing(err) {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// Unended reads the last Kafka transaction a relay of the pipeline left
// open with no commit asked for (ok is false when none was recorded, or
// before migration 017).
func (p Pipeline) Unended(ctx context.Context, q Querier) (id int64, epoch int16, ok bool, err error) {
	var pid *int64
	var pe *int16
	err = q.QueryRow(ctx, "SELECT unended_producer_id, unended_epoch FROM pgoutbox_state WHERE pipeline = $1", p.Name).Scan(&pid, &pe)
	switch {
	case errors.Is(err, pgx.ErrNoRows), IsMissing(err):
		return 0, 0, false, nil
	case err != nil:
		return 0, 0, false, fmt.Errorf("read state: %w", err)
	case pid == nil || pe == nil:
		return 0, 0, false, nil
	}
	return *pid, *pe, true, nil
}

// SaveUnended records a Kafka transaction left open with no commit asked
// for. It never replaces a later epoch of the same producer id: a relay
// that saves late (a stopped one, on a new connection) does not overwrite
// what the relay that took over recorded since. An earlier transaction
// still open would have kept that relay from starting one, so the record
// kept is the one that can be open. Before migration 017 there is nothing
// to record.
func (p Pipeline) SaveUnended(ctx context.Context, q Querier, id int64, epoch int16) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET unended_producer_id = $2, unended_epoch = $3
WHERE pipeline = $1 AND (unended_producer_id IS DISTINCT FROM $2 OR unended_epoch IS NULL OR unended_epoch < $3)`, p.Name, id, epoch)
	if err != nil && !IsMissing(err) {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// SaveConfirmed records the confirmed position; it never moves back.
func (p Pipeline) SaveConfirmed(ctx context.Context, q Querier, lsn string) error {
	_, err := q.Exec(ctx, `
UPDATE pgoutbox_state SET confirmed_lsn = GREATEST(confirmed_lsn, $2::text::pg_lsn), updated_at = now()
WHERE pipeline = $1`, p.Name, lsn)
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// SaveFloor records the confirmed position with the published floor: the
// transaction id xmin below which everything is published and the outbox
// sequence's value seq read with it. Neither moves back. cluster, when not
// nil, is the cluster the positions belong to.
func (p Pipeline) SaveFloor(ctx context.Context, q Querier, confirmed string, xmin uint64, seq, cluster *int64) error {
	if _, err := q.Exec(ctx, `UPDATE pgoutbox_state SET
  confirmed_lsn = GREATEST(confirmed_lsn, $2::text::pg_lsn), updated_at = now(),
  floor_seq = CASE WHEN floor_xid IS NULL OR floor_xid < $3::text::xid8 THEN $4 ELSE floor_seq END,
  floor_xid = CASE WHEN floor_xid IS NULL OR floor_xid < $3::text::xid8 THEN $3::text::xid8 ELSE floor_xid END,
  system_identifier = coalesce($5, system_identifier)
WHERE pipeline = $1`, p.Name, confirmed, strconv.FormatUint(xmin, 10), seq, cluster); err != nil {
		return fmt.Errorf("save floor: %w", err)
	}
	return nil
}

// SaveWALStart sets wal_start_xid, the first transaction the slot's stream
// carries, to xmax. created says a slot was just created, which replaces
// any earlier value: a replaced slot's gap must not count as published by
// the WAL. Otherwise only a missing value is set. Before migration 004
// there is nothing to set.
func (p Pipeline) SaveWALStart(ctx context.Context, q Querier, xmax uint64, created bool) error {
	_, err := q.Exec(ctx, `UPDATE pgoutbox_state SET wal_start_xid = $2::text::xid8
WHERE pipeline = $1 AND ($3 OR wal_start_xid IS NULL)`, p.Name, strconv.FormatUint(xmax, 10), created)
	if err != nil && !IsMissing(err) {
		return fmt.Errorf("save wal start: %w", err)
	}
	return nil
}
