package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/replication"
)

// ErrNoState means the state table is missing: pgoutbox migrate has not run.
var ErrNoState = errors.New("pgoutbox_state table is missing: run pgoutbox migrate first")

// SetupResult says what Setup found and did.
type SetupResult struct {
	PublicationCreated bool
	SlotCreated        bool
	SlotLSN            pglogrepl.LSN // consistent point of a created slot
}

// Setup makes sure the pipeline can stream: the server allows logical
// replication, the publication covers the outbox table, and the slot
// exists. With create, a missing publication or slot is created; a slot
// that existed before and is now gone is ErrSlotLost whatever create says,
// because the rows committed since it was lost need polling, not a new slot.
func Setup(ctx context.Context, conn *pgx.Conn, cfg replication.Config, create bool) (SetupResult, error) {
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
		return res, ErrNoState
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
	if slotExists && slot.WALStatus == "lost" {
		return res, fmt.Errorf("%w: slot %s (wal_status lost): WAL it needed was removed", replication.ErrSlotInvalidated, cfg.Slot)
	}
	if !slotExists && known && lastLSN != nil {
		return res, fmt.Errorf("%w: slot %s last confirmed %s; rows committed since are not in any slot. Publish them by polling, or accept the gap with: pgoutbox slot create --force", ErrSlotLost, cfg.Slot, *lastLSN)
	}
	if res.PublicationCreated, err = replication.EnsurePublication(ctx, conn, cfg.Publication, table, create); err != nil {
		return res, err
	}
	if !slotExists {
		if !create {
			return res, fmt.Errorf("%w: %s: run pgoutbox slot create", replication.ErrSlotMissing, cfg.Slot)
		}
		// The publication exists before the slot's consistent point, so
		// pgoutput finds it for every change the slot will decode.
		if res.SlotLSN, err = replication.CreateSlot(ctx, conn, cfg.Slot); err != nil {
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

// prepare runs Setup for a session and logs what it created.
func (r *Relay) prepare(ctx context.Context, conn *pgx.Conn) error {
	res, err := Setup(ctx, conn, r.cfg.Replication, r.cfg.CreateSlot)
	if err != nil {
		return err
	}
	if res.PublicationCreated {
		r.log.Info("publication created", "publication", r.cfg.Replication.Publication, "table", r.table.String())
	}
	if res.SlotCreated {
		r.log.Info("slot created", "slot", r.cfg.Replication.Slot, "consistent_lsn", res.SlotLSN.String())
	}
	return nil
}

// saveState records the confirmed position in the state table every few
// seconds; status reads it, and it tells a lost slot from a new one.
func (r *Relay) saveState(ctx context.Context, done <-chan struct{}, conn *pgx.Conn, stream *replication.Stream) error {
	ticker := time.NewTicker(5 * time.Second)
	defer ticker.Stop()
	var last pglogrepl.LSN
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-ticker.C:
		}
		if lsn := stream.Confirmed(); lsn != last {
			if err := r.writeState(ctx, conn, lsn); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			last = lsn
		}
	}
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
