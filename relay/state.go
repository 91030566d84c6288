package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/replication"
)

// ErrNoState means pgoutbox's own tables are missing or older than this
// binary, and could not be brought up to date.
var ErrNoState = errors.New("pgoutbox's own tables are missing or older than this pgoutbox")

// ensureState brings pgoutbox's own tables (state, dead letters) to this
// binary's version, so that run alone works where migrate never ran, as
// Debezium needs no such step. The outbox table is not touched. A role
// that may not create tables is told what to run or grant instead.
func (r *Relay) ensureState(ctx context.Context, conn *pgx.Conn) error {
	latest, err := migrations.Latest()
	if err != nil {
		return err
	}
	var from int32
	err = conn.QueryRow(ctx, "SELECT version FROM "+migrations.VersionTable).Scan(&from)
	switch {
	case err == nil && from >= latest:
		return nil
	case err == nil, isUndefinedTable(err):
	case isInsufficientPrivilege(err):
		// A least-privilege role that cannot read the version: Setup's
		// own check of the state table decides.
		return nil
	default:
		return fmt.Errorf("read %s: %w", migrations.VersionTable, err)
	}
	to, err := migrations.Migrate(ctx, conn, migrations.Options{StateOnly: true})
	if err != nil {
		if isInsufficientPrivilege(err) {
			var role, quoted string
			_ = conn.QueryRow(ctx, "SELECT current_user, quote_ident(current_user)").Scan(&role, &quoted)
			return fmt.Errorf("%w, and role %q may not create them. "+
				"Run pgoutbox migrate once as a role that may (the database owner), then GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state, pgoutbox_dead_letter TO %s; "+
				"or GRANT CREATE ON SCHEMA public TO %s", ErrNoState, role, quoted, quoted)
		}
		return fmt.Errorf("create pgoutbox's own tables: %w", err)
	}
	r.log.Info("pgoutbox's own tables brought up to date", "from_version", from, "to_version", to)
	return nil
}

func isInsufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// SetupResult says what Setup found and did.
type SetupResult struct {
	PublicationCreated bool
	SlotCreated        bool
	SlotLSN            pglogrepl.LSN // consistent point of a created slot
	// SlotReplaced is set when the created slot replaces one that was lost
	// or invalidated: rows committed in between are in no slot.
	SlotReplaced bool
}

// Setup makes sure the pipeline can stream: the server allows logical
// replication, the publication covers the outbox table, and the slot
// exists. With create, a missing publication or slot is created. A slot
// that existed before and is now gone (or invalidated) is ErrSlotLost,
// because the rows committed since need polling, not just a new slot.
// With handoff the caller promises that polling: Setup then replaces a
// lost slot, and before it creates any slot it records a pending handoff in
// the state table, so that a restart resumes the polling instead of
// skipping what committed before the slot.
func Setup(ctx context.Context, conn *pgx.Conn, cfg replication.Config, create, handoff bool) (SetupResult, error) {
	var res SetupResult
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	table, _ := replication.ParseTable(cfg.Table)
	var hasState bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('pgoutbox_state') IS NOT NULL").Scan(&hasState); err != nil {
		return res, fmt.Errorf("look up state table: %w", err)
	}
	if !hasState {
		return res, fmt.Errorf("%w: run pgoutbox migrate", ErrNoState)
	}
	// The newest migration's column, looked up in the catalog that every
	// role may read: an older schema is named, not met halfway.
	var current bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = 'pgoutbox_state'::regclass AND attname = 'handoff_pending' AND NOT attisdropped)`).Scan(&current); err != nil {
		return res, fmt.Errorf("look up state table: %w", err)
	}
	if !current {
		return res, fmt.Errorf("%w: the state table is from an older pgoutbox; run pgoutbox migrate", ErrNoState)
	}
	var known bool
	var lastLSN *string
	err := conn.QueryRow(ctx, "SELECT true, confirmed_lsn::text FROM pgoutbox_state WHERE pipeline = $1", cfg.Slot).Scan(&known, &lastLSN)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return res, fmt.Errorf("read state: %w", err)
	}

	slot, err := replication.SlotStatus(ctx, conn, cfg.Slot)
	slotExists := err == nil
	if err != nil && !errors.Is(err, replication.ErrSlotMissing) {
		return res, err
	}
	ready, err := replication.Inspect(ctx, conn)
	if err != nil {
		return res, err
	}
	if err := ready.Err(slotExists); err != nil {
		return res, err
	}
	// Whether the role may stream is found by trying: managed services
	// grant it through a role of their own, not the attribute.
	if err := replication.TryReplication(ctx, conn, cfg.DatabaseURL); err != nil {
		return res, err
	}
	if slotExists && slot.WALStatus == "lost" {
		if !handoff {
			return res, fmt.Errorf("%w: slot %s (wal_status lost): WAL it needed was removed", replication.ErrSlotInvalidated, cfg.Slot)
		}
		if err := replication.DropSlot(ctx, conn, cfg.Slot); err != nil {
			return res, err
		}
		slotExists, res.SlotReplaced = false, true
	}
	if !slotExists && known && lastLSN != nil {
		if !handoff {
			return res, fmt.Errorf("%w: slot %s last confirmed %s; rows committed since are not in any slot. Run with --mode auto to publish them by polling, or accept the gap with: pgoutbox slot create --force", ErrSlotLost, cfg.Slot, *lastLSN)
		}
		res.SlotReplaced = true
	}
	if res.PublicationCreated, err = replication.EnsurePublication(ctx, conn, cfg.Publication, table, create); err != nil {
		return res, err
	}
	if !slotExists {
		if !create && !res.SlotReplaced {
			return res, fmt.Errorf("%w: %s: run pgoutbox slot create", replication.ErrSlotMissing, cfg.Slot)
		}
		if handoff {
			// Recorded before the slot exists: whatever happens next, the
			// next start knows the rows before the slot still need polling.
			if _, err := conn.Exec(ctx, `
INSERT INTO pgoutbox_state (pipeline, outbox_table, handoff_pending) VALUES ($1, $2, true)
ON CONFLICT (pipeline) DO UPDATE SET handoff_pending = true, handoff_xmax = NULL, updated_at = now()`,
				cfg.Slot, table.String()); err != nil {
				return res, fmt.Errorf("save state: %w", err)
			}
		}
		// The publication exists before the slot's consistent point, so
		// pgoutput finds it for every change the slot will decode.
		if res.SlotLSN, err = replication.CreateSlot(ctx, conn, cfg.Slot, cfg.Failover); err != nil {
			return res, err
		}
		res.SlotCreated = true
	}
	_, err = conn.Exec(ctx, `
INSERT INTO pgoutbox_state (pipeline, outbox_table, mode, confirmed_lsn)
VALUES ($1, $2, 'wal', $3::text::pg_lsn)
ON CONFLICT (pipeline) DO UPDATE SET outbox_table = EXCLUDED.outbox_table,
  confirmed_lsn = coalesce(EXCLUDED.confirmed_lsn, pgoutbox_state.confirmed_lsn), updated_at = now()`,
		cfg.Slot, table.String(), lsnArg(res.SlotLSN, slot.ConfirmedLSN))
	if err != nil {
		return res, fmt.Errorf("save state: %w", err)
	}
	if res.SlotCreated {
		if err := saveWALStart(ctx, conn, cfg.Slot, true); err != nil { // retention.go
			return res, err
		}
	}
	return res, nil
}

func lsnArg(lsns ...pglogrepl.LSN) *string {
	for _, l := range lsns {
		if l != 0 {
			s := l.String()
			return &s
		}
	}
	return nil
}

// Forget removes the pipeline's state, so that a new slot of the same name
// is not taken for a lost one. Used when an operator drops the slot on
// purpose or accepts a gap.
func Forget(ctx context.Context, conn *pgx.Conn, pipeline string) error {
	var hasState bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('pgoutbox_state') IS NOT NULL").Scan(&hasState); err != nil {
		return fmt.Errorf("look up state table: %w", err)
	}
	if !hasState {
		return nil
	}
	if _, err := conn.Exec(ctx, "DELETE FROM pgoutbox_state WHERE pipeline = $1", pipeline); err != nil {
		return fmt.Errorf("forget pipeline %s: %w", pipeline, err)
	}
	return nil
}

// prepare runs Setup for a session and logs what it created. In auto mode
// with the polling columns, a slot it creates (the first, or one replacing
// a lost slot) is not streamed at once: a handoff first polls everything
// that committed before the slot's consistent point.
func (r *Relay) prepare(ctx context.Context, conn *pgx.Conn) error {
	canPoll := false
	if r.cfg.Mode == ModeAuto {
		var err error
		if canPoll, err = r.cfg.Poll.HasColumns(ctx, conn); err != nil {
			return err
		}
	}
	res, err := Setup(ctx, conn, r.cfg.Replication, r.cfg.CreateSlot, canPoll)
	if err != nil {
		return err
	}
	if res.PublicationCreated {
		r.log.Info("publication created", "publication", r.cfg.Replication.Publication, "table", r.table.String())
	}
	if res.SlotReplaced {
		r.log.Warn("slot was lost and has been replaced; polling publishes what committed in between", "slot", r.cfg.Replication.Slot, "consistent_lsn", res.SlotLSN.String())
		if _, err := conn.Exec(ctx, "UPDATE pgoutbox_state SET slot_losses = slot_losses + 1 WHERE pipeline = $1", r.cfg.Replication.Slot); err != nil {
			return fmt.Errorf("save state: %w", err)
		}
	} else if res.SlotCreated {
		r.log.Info("slot created", "slot", r.cfg.Replication.Slot, "consistent_lsn", res.SlotLSN.String())
	}
	var pending bool
	var xmaxText *string
	if err := conn.QueryRow(ctx, "SELECT handoff_pending, handoff_xmax::text FROM pgoutbox_state WHERE pipeline = $1",
		r.cfg.Replication.Slot).Scan(&pending, &xmaxText); err != nil {
		return fmt.Errorf("read state: %w", err)
	}
	if !pending {
		return nil
	}
	if !canPoll {
		r.log.Warn("a handoff to this slot is unfinished: rows committed before the slot was created may be unpublished; run in --mode auto (with the polling columns) to publish them",
			"slot", r.cfg.Replication.Slot)
		return nil
	}
	var xmax uint64
	if xmaxText != nil {
		xmax, _ = strconv.ParseUint(*xmaxText, 10, 64)
	}
	if xmax == 0 {
		// Read after the slot exists: every transaction that committed
		// before its consistent point is below it. A later reading (after
		// a restart) only covers more.
		if _, xmax, _, err = replication.Snapshot(ctx, conn); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "UPDATE pgoutbox_state SET handoff_xmax = $2::text::xid8 WHERE pipeline = $1",
			r.cfg.Replication.Slot, strconv.FormatUint(xmax, 10)); err != nil {
			return fmt.Errorf("save state: %w", err)
		}
	} else if !res.SlotCreated {
		r.log.Info("resuming an unfinished handoff", "slot", r.cfg.Replication.Slot)
	}
	return &handoffError{xmax: xmax, slotLSN: res.SlotLSN, replaced: res.SlotReplaced}
}

// saveState runs beside a WAL session. Every few seconds it records the
// confirmed position, and it advances the published floor: it reads the
// snapshot's xmin S and then the WAL insert position L; every transaction
// below S finished before L, so once the confirmed position passes L, all
// their rows are in Kafka and S is saved. A fallback to polling starts from
// that floor, so it re-sends only what was published since.
func (r *Relay) saveState(ctx context.Context, done <-chan struct{}, conn *pgx.Conn, stream *replication.Stream) error {
	interval := min(5*time.Second, max(time.Second, r.cfg.Replication.HeartbeatInterval))
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var (
		last    pglogrepl.LSN
		pending []floorCandidate
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-ticker.C:
		}
		r.housekeeping(ctx, conn) // retention.go
		// Bounded, so that a dead connection ends the session instead of
		// holding it open.
		qctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
		err := r.saveOnce(qctx, conn, stream, &pending, &last)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

type floorCandidate struct {
	xmin uint64
	lsn  pglogrepl.LSN
}

// saveOnce takes a floor candidate, saves the confirmed position, and saves
// the newest candidate the confirmed position has passed.
func (r *Relay) saveOnce(ctx context.Context, conn *pgx.Conn, stream *replication.Stream, pending *[]floorCandidate, last *pglogrepl.LSN) error {
	xmin, _, lsnText, err := replication.Snapshot(ctx, conn)
	if err != nil {
		return err
	}
	lsn, err := pglogrepl.ParseLSN(lsnText)
	if err != nil {
		return err
	}
	*pending = append(*pending, floorCandidate{xmin, lsn})
	confirmed := stream.Confirmed()
	var floor uint64
	n := 0
	for n < len(*pending) && (*pending)[n].lsn <= confirmed {
		floor = (*pending)[n].xmin
		n++
	}
	*pending = (*pending)[n:]
	if confirmed == *last && floor == 0 {
		return nil
	}
	if err := r.writeState(ctx, conn, confirmed); err != nil {
		return err
	}
	*last = confirmed
	if floor != 0 {
		if _, err := conn.Exec(ctx, `UPDATE pgoutbox_state SET floor_xid = $2::text::xid8 WHERE pipeline = $1
AND (floor_xid IS NULL OR floor_xid < $2::text::xid8)`, r.cfg.Replication.Slot, fmt.Sprint(floor)); err != nil {
			return fmt.Errorf("save floor: %w", err)
		}
	}
	return nil
}

func (r *Relay) writeState(ctx context.Context, conn *pgx.Conn, lsn pglogrepl.LSN) error {
	_, err := conn.Exec(ctx, `
UPDATE pgoutbox_state SET confirmed_lsn = GREATEST(confirmed_lsn, $2::text::pg_lsn), updated_at = now()
WHERE pipeline = $1`, r.cfg.Replication.Slot, lsn.String())
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}
