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
		if isReadOnly(err) {
			return fmt.Errorf("%w, and the server is read-only (a standby, or default_transaction_read_only): "+
				"point --database-url at the primary, or list every host with target_session_attrs=read-write", ErrNoState)
		}
		return fmt.Errorf("create pgoutbox's own tables: %w", err)
	}
	r.log.Info("pgoutbox's own tables brought up to date", "from_version", from, "to_version", to)
	return nil
}

// isReadOnly tells a write refused because the server or the session is
// read-only (SQLSTATE 25006).
func isReadOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "25006"
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
WHERE attrelid = 'pgoutbox_state'::regclass AND attname = 'gap_seq' AND NOT attisdropped)`).Scan(&current); err != nil {
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
ON CONFLICT (pipeline) DO UPDATE SET handoff_pending = true, handoff_xmax = NULL, handoff_seq = NULL, updated_at = now()`,
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
func (r *Relay) prepare(ctx context.Context, conn *pgx.Conn, canPoll bool) error {
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
	var maxSeq *int64
	if err := conn.QueryRow(ctx, "SELECT handoff_pending, handoff_xmax::text, handoff_seq FROM pgoutbox_state WHERE pipeline = $1",
		r.cfg.Replication.Slot).Scan(&pending, &xmaxText, &maxSeq); err != nil {
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
	if xmax == 0 || maxSeq == nil {
		// Read after the slot exists: every transaction that committed
		// before its consistent point is below xmax, and every row that
		// existed then has a seq at or below pos.Seq; rows copied from
		// another cluster keep its transaction ids, which may lie above
		// xmax, so the seq bound covers them. A later reading (after a
		// restart) only covers more.
		pos, err := replication.ReadFloorCandidate(ctx, conn, r.cfg.Poll)
		if err != nil {
			return err
		}
		xmax, maxSeq = pos.XMax, &pos.Seq
		if _, err := conn.Exec(ctx, "UPDATE pgoutbox_state SET handoff_xmax = $2::text::xid8, handoff_seq = $3 WHERE pipeline = $1",
			r.cfg.Replication.Slot, strconv.FormatUint(xmax, 10), pos.Seq); err != nil {
			return fmt.Errorf("save state: %w", err)
		}
	} else if !res.SlotCreated {
		r.log.Info("resuming an unfinished handoff", "slot", r.cfg.Replication.Slot)
	}
	return &handoffError{xmax: xmax, maxSeq: *maxSeq, slotLSN: res.SlotLSN, replaced: res.SlotReplaced}
}

// Floor candidates: one is taken every floorCandidateEvery while the
// newest one is passed, and saved as soon as the confirmed position passes
// it, which saveState checks every floorCheckEvery without a query. The
// floor then trails the confirmed position by about floorCandidateEvery, so
// a fallback to polling re-sends about that much.
const (
	floorCandidateEvery = 500 * time.Millisecond
	floorCheckEvery     = 100 * time.Millisecond
	// A candidate the confirmed position has not passed (Kafka is down, a
	// long transaction) is replaced by a newer one only this often.
	floorStaleCandidate = 5 * time.Second
)

// saveState runs beside a WAL session. It records the confirmed position
// every few seconds, and it advances the published floor: a candidate is
// the snapshot's xmin S, the outbox sequence's value Q, and then the WAL
// insert position L; every transaction below S finished before L, so once
// the confirmed position passes L, all their rows are in Kafka and S is
// saved, with Q. A fallback to polling starts from that floor, so it
// re-sends only what was published since. hasSeq says the table has the
// polling columns (without them there is no Q, and nothing polls).
func (r *Relay) saveState(ctx context.Context, done <-chan struct{}, conn *pgx.Conn, stream *replication.Stream, hasSeq bool) error {
	confirmEvery := min(5*time.Second, max(time.Second, r.cfg.Replication.HeartbeatInterval))
	ticker := time.NewTicker(floorCheckEvery)
	defer ticker.Stop()
	var (
		s floorSaver
		g walGap // vanish.go
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
		err := r.saveOnce(qctx, conn, stream, &s, hasSeq, confirmEvery)
		if err == nil && hasSeq {
			r.walCheckpoint(qctx, conn, stream, &g)
		}
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
	xmin  uint64
	seq   *int64
	lsn   pglogrepl.LSN
	taken time.Time
}

// floorSaver is what saveOnce keeps between calls.
type floorSaver struct {
	pending   []floorCandidate // taken, not yet passed, oldest first
	next      time.Time        // when the next candidate is due
	last      pglogrepl.LSN    // confirmed position last saved
	lastSaved time.Time
}

// maxFloorCandidates bounds the candidates kept while the confirmed
// position stands still; beyond it the newest is replaced.
const maxFloorCandidates = 64

// saveOnce takes a floor candidate when one is due, and saves the newest
// candidate the confirmed position has passed, with the confirmed position;
// without one, it saves a confirmed position that moved every confirmEvery.
func (r *Relay) saveOnce(ctx context.Context, conn *pgx.Conn, stream *replication.Stream, s *floorSaver, hasSeq bool, confirmEvery time.Duration) error {
	now := time.Now()
	due := s.next
	if n := len(s.pending); n > 0 {
		due = later(due, s.pending[n-1].taken.Add(floorStaleCandidate))
	}
	if !now.Before(due) {
		c := floorCandidate{taken: now}
		if hasSeq {
			pos, err := replication.ReadFloorCandidate(ctx, conn, r.cfg.Poll)
			if err != nil {
				return err
			}
			c.xmin, c.seq, c.lsn = pos.XMin, &pos.Seq, pos.LSN
		} else {
			xmin, _, lsnText, err := replication.Snapshot(ctx, conn)
			if err != nil {
				return err
			}
			if c.lsn, err = pglogrepl.ParseLSN(lsnText); err != nil {
				return err
			}
			c.xmin = xmin
		}
		if len(s.pending) >= maxFloorCandidates {
			s.pending[len(s.pending)-1] = c
		} else {
			s.pending = append(s.pending, c)
		}
		s.next = now.Add(floorCandidateEvery)
	}
	confirmed := stream.Confirmed()
	var f floorCandidate
	n := 0
	for n < len(s.pending) && s.pending[n].lsn <= confirmed {
		f = s.pending[n]
		n++
	}
	s.pending = s.pending[n:]
	if n == 0 {
		if confirmed == s.last || now.Sub(s.lastSaved) < confirmEvery {
			return nil
		}
		if err := r.writeState(ctx, conn, confirmed); err != nil {
			return err
		}
		s.last, s.lastSaved = confirmed, now
		return nil
	}
	var id *int64
	if r.clusterID != 0 {
		id = &r.clusterID
	}
	if _, err := conn.Exec(ctx, `UPDATE pgoutbox_state SET
  confirmed_lsn = GREATEST(confirmed_lsn, $2::text::pg_lsn), updated_at = now(),
  floor_seq = CASE WHEN floor_xid IS NULL OR floor_xid < $3::text::xid8 THEN $4 ELSE floor_seq END,
  floor_xid = CASE WHEN floor_xid IS NULL OR floor_xid < $3::text::xid8 THEN $3::text::xid8 ELSE floor_xid END,
  system_identifier = coalesce($5, system_identifier)
WHERE pipeline = $1`, r.cfg.Replication.Slot, confirmed.String(), strconv.FormatUint(f.xmin, 10), f.seq, id); err != nil {
		return fmt.Errorf("save floor: %w", err)
	}
	s.last, s.lastSaved = confirmed, now
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

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
