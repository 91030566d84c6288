package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Failover says whether a logical slot would survive the promotion of a
// standby, as far as the server asked can tell.
type Failover struct {
	ServerMajor int
	// InRecovery is true when the server asked is a standby.
	InRecovery bool
	// SlotExists and SlotFailover: the slot is there, and is a failover
	// slot (pg_replication_slots.failover, 17 and later).
	SlotExists   bool
	SlotFailover bool
	// SlotSynced is true on a standby whose copy of the slot is kept in
	// step by slot synchronization (pg_replication_slots.synced).
	SlotSynced bool
	// StandbySlots is synchronized_standby_slots: the physical slots of the
	// standbys that a failover slot's consumers wait for. Set on a primary.
	StandbySlots []string
	// InactiveStandbySlots lists those of StandbySlots that no standby
	// is streaming from, or that do not exist.
	InactiveStandbySlots []string
	// SyncReplicationSlots is the standby's sync_replication_slots, and
	// HotStandbyFeedback its hot_standby_feedback; read only when the
	// server asked is a standby, since a primary cannot tell.
	SyncReplicationSlots bool
	HotStandbyFeedback   bool
	// Warnings say what a failover would cost, each with what to change.
	Warnings []string
}

// Survives reports whether nothing was found that would lose the slot in a
// failover. From a primary the standbys' own settings cannot be seen:
// sync_replication_slots must be on there too.
func (f Failover) Survives() bool { return len(f.Warnings) == 0 }

// FailoverStatus reads what decides whether slot survives a failover and
// warns about what does not.
func FailoverStatus(ctx context.Context, conn *pgx.Conn, slot string) (Failover, error) {
	var f Failover
	if err := ValidateName("slot", slot); err != nil {
		return f, err
	}
	major, err := ServerMajor(ctx, conn)
	if err != nil {
		return f, err
	}
	f.ServerMajor = major
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&f.InRecovery); err != nil {
		return f, fmt.Errorf("read recovery state: %w", err)
	}
	if major < failoverMajor {
		err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)", slot).Scan(&f.SlotExists)
		if err != nil {
			return f, fmt.Errorf("read slot %s: %w", slot, err)
		}
		f.Warnings = append(f.Warnings, fmt.Sprintf("PostgreSQL %d has no failover slots: a standby promoted to primary will not have slot %s (auto mode polls the gap and creates a new slot; wal mode stops)", major, slot))
		return f, nil
	}

	var temporary bool
	err = conn.QueryRow(ctx, "SELECT failover, synced, temporary FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&f.SlotFailover, &f.SlotSynced, &temporary)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return f, fmt.Errorf("read slot %s: %w", slot, err)
	default:
		f.SlotExists = true
	}
	if f.SlotExists && !f.SlotFailover {
		f.Warnings = append(f.Warnings, fmt.Sprintf("slot %s is not a failover slot, so no standby keeps a copy: drop it and create it with pgoutbox slot create --failover (or run --slot-failover)", slot))
	}

	if f.InRecovery {
		var sync, feedback string
		if err := conn.QueryRow(ctx, "SELECT current_setting('sync_replication_slots'), current_setting('hot_standby_feedback')").Scan(&sync, &feedback); err != nil {
			return f, fmt.Errorf("read standby settings: %w", err)
		}
		f.SyncReplicationSlots, f.HotStandbyFeedback = sync == "on", feedback == "on"
		if !f.SyncReplicationSlots {
			f.Warnings = append(f.Warnings, "this standby has sync_replication_slots off: it keeps no copy of failover slots; set it on, with hot_standby_feedback on and primary_slot_name")
		} else if !f.HotStandbyFeedback {
			f.Warnings = append(f.Warnings, "this standby has hot_standby_feedback off, which slot synchronization needs")
		}
		switch {
		case f.SlotExists && !f.SlotSynced:
			f.Warnings = append(f.Warnings, fmt.Sprintf("slot %s on this standby is not synchronized from the primary", slot))
		case f.SlotExists && temporary:
			// Kept temporary until the primary's slot passes where
			// the standby could start it; a promotion drops it.
			f.SlotSynced = false
			f.Warnings = append(f.Warnings, fmt.Sprintf("slot %s on this standby is still being synchronized (temporary): a promotion now would drop it", slot))
		case !f.SlotExists && f.SyncReplicationSlots:
			f.Warnings = append(f.Warnings, fmt.Sprintf("slot %s has not been synchronized to this standby yet", slot))
		}
		return f, nil
	}

	var standby string
	if err := conn.QueryRow(ctx, "SELECT current_setting('synchronized_standby_slots')").Scan(&standby); err != nil {
		return f, fmt.Errorf("read synchronized_standby_slots: %w", err)
	}
	for _, s := range strings.Split(standby, ",") {
		if s = strings.TrimSpace(s); s != "" {
			f.StandbySlots = append(f.StandbySlots, s)
		}
	}
	if len(f.StandbySlots) == 0 {
		f.Warnings = append(f.Warnings, "synchronized_standby_slots is empty: pgoutbox may receive and publish changes that no standby has yet, which a failover then loses; set it to the standbys' physical slots (primary_slot_name)")
	}
	rows, err := conn.Query(ctx, `SELECT s.name FROM unnest($1::text[]) AS s(name)
WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots r
                  WHERE r.slot_name = s.name AND r.slot_type = 'physical' AND r.active)`, f.StandbySlots)
	if err != nil {
		return f, fmt.Errorf("read standby slots: %w", err)
	}
	inactive, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return f, fmt.Errorf("read standby slots: %w", err)
	}
	f.InactiveStandbySlots = inactive
	if len(inactive) > 0 {
		f.Warnings = append(f.Warnings, fmt.Sprintf("no standby streams from %s, listed in synchronized_standby_slots: failover slots wait for it, and it keeps no copy", strings.Join(inactive, ", ")))
	}
	return f, nil
}
