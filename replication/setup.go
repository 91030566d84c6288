package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// Readiness is what the server allows for logical replication.
type Readiness struct {
	WALLevel string
	Role     string
	// Replication says the role has the REPLICATION attribute (or is
	// superuser). It does not decide whether the role may stream: managed
	// services grant that otherwise (TryReplication finds out by trying).
	Replication bool
	MaxSlots    int
	UsedSlots   int
	MaxSenders  int
	UsedSenders int
}

// Inspect reads the settings and privileges logical replication needs.
func Inspect(ctx context.Context, conn *pgx.Conn) (Readiness, error) {
	var r Readiness
	err := conn.QueryRow(ctx, `
SELECT current_setting('wal_level'),
       current_user,
       (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user),
       current_setting('max_replication_slots')::int,
       (SELECT count(*) FROM pg_replication_slots)::int,
       current_setting('max_wal_senders')::int,
       (SELECT count(*) FROM pg_stat_replication)::int`).Scan(
		&r.WALLevel, &r.Role, &r.Replication, &r.MaxSlots, &r.UsedSlots, &r.MaxSenders, &r.UsedSenders)
	if err != nil {
		return r, fmt.Errorf("inspect server: %w", err)
	}
	return r, nil
}

// Problems lists what in the server's settings stops logical replication,
// each with what to change. slotExists says whether the slot is already
// there (it then needs no free slot of its own). Whether the role may
// stream is not judged here: TryReplication tries it.
func (r Readiness) Problems(slotExists bool) []string {
	var p []string
	if r.WALLevel != "logical" {
		p = append(p, fmt.Sprintf("wal_level is %q: run ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL (managed services call it a parameter such as rds.logical_replication or cloudsql.logical_decoding)", r.WALLevel))
	}
	if !slotExists && r.UsedSlots >= r.MaxSlots {
		p = append(p, fmt.Sprintf("all %d replication slots are in use: drop an unused slot or raise max_replication_slots and restart PostgreSQL", r.MaxSlots))
	}
	if r.UsedSenders >= r.MaxSenders {
		p = append(p, fmt.Sprintf("all %d WAL senders are busy: raise max_wal_senders and restart PostgreSQL", r.MaxSenders))
	}
	return p
}

// Err returns ErrNotReady with every problem, or nil.
func (r Readiness) Err(slotExists bool) error {
	if p := r.Problems(slotExists); len(p) > 0 {
		return fmt.Errorf("%w: %s", ErrNotReady, strings.Join(p, "; "))
	}
	return nil
}

// failoverMajor is the first PostgreSQL major version with failover slots.
const failoverMajor = 17

// ServerMajor returns the server's major version (15, 18...).
func ServerMajor(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&n); err != nil {
		return 0, fmt.Errorf("read server version: %w", err)
	}
	return n, nil
}

// SlotFailover says whether cfg's slot is to be created as a failover slot
// on a server of major version major; ErrNoFailoverSlots when cfg asks for
// one the server cannot make.
func SlotFailover(cfg Config, major int) (bool, error) {
	switch {
	case cfg.Failover && major < failoverMajor:
		return false, fmt.Errorf("%w: the server is PostgreSQL %d; create slot %s without --failover, and know that a failover loses it (auto mode polls the gap)", ErrNoFailoverSlots, major, cfg.Slot)
	case cfg.Failover:
		return true, nil
	}
	return cfg.FailoverWhereSupported && major >= failoverMajor, nil
}

// CreateSlot creates a pgoutput logical slot and returns its consistent
// point. With failover, the slot is a failover slot (PostgreSQL 17 and
// later; ErrNoFailoverSlots before).
func CreateSlot(ctx context.Context, conn *pgx.Conn, name string, failover bool) (pglogrepl.LSN, error) {
	if err := ValidateName("slot", name); err != nil {
		return 0, err
	}
	query := "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')"
	if failover {
		major, err := ServerMajor(ctx, conn)
		if err != nil {
			return 0, err
		}
		if major < failoverMajor {
			return 0, fmt.Errorf("%w: the server is PostgreSQL %d; create slot %s without --failover, and know that a failover loses it (auto mode polls the gap)", ErrNoFailoverSlots, major, name)
		}
		// Arguments: name, plugin, temporary, two-phase, failover.
		query = "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)"
	}
	var lsn string
	if err := conn.QueryRow(ctx, query, name).Scan(&lsn); err != nil {
		if isPrivilegeError(err) {
			return 0, fmt.Errorf("%w: may not create slot %s: %v", ErrNotReady, name, err)
		}
		return 0, fmt.Errorf("create slot %s: %w", name, err)
	}
	return pglogrepl.ParseLSN(lsn)
}

// SlotInfo is a slot's state as pg_replication_slots shows it.
type SlotInfo struct {
	Name         string
	Plugin       string
	Database     string
	Active       bool
	ActivePID    int
	RestartLSN   pglogrepl.LSN
	ConfirmedLSN pglogrepl.LSN
	WALStatus    string // reserved, extended, unreserved or lost
	// RetainedBytes is the WAL the slot keeps on the server's disk
	// (current LSN minus restart LSN).
	RetainedBytes int64
	// LagBytes is how far the confirmed position trails the current LSN.
	LagBytes int64
}

// SlotStatus reads a slot's state; ErrSlotMissing if there is none,
// ErrSlotElsewhere if it is another database's.
func SlotStatus(ctx context.Context, conn *pgx.Conn, name string) (SlotInfo, error) {
	if err := ValidateName("slot", name); err != nil {
		return SlotInfo{}, err
	}
	var (
		s                   SlotInfo
		plugin, db, walStat *string
		pid                 *int
		restart, confirmed  *string
		retained, lag       *int64
		here                string
	)
	err := conn.QueryRow(ctx, `
SELECT slot_name::text, plugin::text, database::text, active, active_pid,
       restart_lsn::text, confirmed_flush_lsn::text, wal_status,
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint END,
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint END,
       current_database()::text
FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(
		&s.Name, &plugin, &db, &s.Active, &pid, &restart, &confirmed, &walStat, &retained, &lag, &here)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("%w: %s", ErrSlotMissing, name)
	}
	if err != nil {
		return s, fmt.Errorf("read slot %s: %w", name, err)
	}
	s.Plugin, s.Database, s.WALStatus = deref(plugin), deref(db), deref(walStat)
	if s.Database != "" && s.Database != here {
		return s, elsewhere(name, s.Database)
	}
	if pid != nil {
		s.ActivePID = *pid
	}
	if retained != nil {
		s.RetainedBytes = *retained
	}
	if lag != nil {
		s.LagBytes = *lag
	}
	if restart != nil {
		if s.RestartLSN, err = pglogrepl.ParseLSN(*restart); err != nil {
			return s, err
		}
	}
	if confirmed != nil {
		if s.ConfirmedLSN, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return s, err
		}
	}
	return s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// elsewhere is ErrSlotElsewhere for slot name, which is database db's.
func elsewhere(name, db string) error {
	return fmt.Errorf("%w: slot %s is database %s's, another pipeline's (slot names are the cluster's); give this pipeline a slot of its own (--slot)", ErrSlotElsewhere, name, db)
}

// DropSlot drops a slot of this database; another database's is
// ErrSlotElsewhere (PostgreSQL would drop it from here). A slot whose
// connection just closed stays active for a moment (SQLSTATE 55006), so
// that error is retried for a few seconds.
func DropSlot(ctx context.Context, conn *pgx.Conn, name string) error {
	if err := ValidateName("slot", name); err != nil {
		return err
	}
	if _, err := SlotStatus(ctx, conn, name); errors.Is(err, ErrSlotElsewhere) {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", name)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "42704":
			return fmt.Errorf("%w: %s", ErrSlotMissing, name)
		case errors.As(err, &pgErr) && pgErr.Code == "55006" && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		default:
			return fmt.Errorf("drop slot %s: %w", name, err)
		}
	}
}

// DropPublication drops a publication if it exists.
func DropPublication(ctx context.Context, conn *pgx.Conn, name string) error {
	if err := ValidateName("publication", name); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name); err != nil {
		return fmt.Errorf("drop publication %s: %w", name, err)
	}
	return nil
}

func isPrivilegeError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// EnsureConfirmed makes sure a slot whose stream just closed has confirmed
// at least lsn. The last status update a stream sends can go unread: a
// walsender that is still sending when the connection closes can exit
// before it reads it, and the next stream would then replay what was
// already acknowledged. It waits, until ctx ends, for the slot to be
// released, then advances it to lsn (pg_replication_slot_advance). It
// reports whether it had to. The caller must hold the pipeline, so that no
// other stream takes the slot in between.
func EnsureConfirmed(ctx context.Context, conn *pgx.Conn, name string, lsn pglogrepl.LSN) (advanced bool, err error) {
	if err := ValidateName("slot", name); err != nil {
		return false, err
	}
	for {
		s, err := SlotStatus(ctx, conn, name)
		if err != nil {
			return false, err
		}
		if s.ConfirmedLSN >= lsn {
			return false, nil
		}
		if !s.Active {
			if _, err := conn.Exec(ctx, "SELECT pg_replication_slot_advance($1, $2::pg_lsn)", name, lsn.String()); err != nil {
				return false, fmt.Errorf("advance slot %s to %s: %w", name, lsn, err)
			}
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("slot %s is still active, confirmed %s, acknowledged %s: %w", name, s.ConfirmedLSN, lsn, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ErrNoTable means the outbox table does not exist.
var ErrNoTable error = &sentinel{"outbox table does not exist", true, false}

// TableColumns reads a table's columns in table order, with their types,
// as a pgoutput Relation message gives them; ErrNoTable when there is no
// such table.
func TableColumns(ctx context.Context, conn *pgx.Conn, t outbox.Table) ([]schema.Column, error) {
	rows, err := conn.Query(ctx, `SELECT attname::text, atttypid::int8, atttypmod FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, t.Quoted())
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", t, err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (schema.Column, error) {
		var (
			c   schema.Column
			oid int64
		)
		err := r.Scan(&c.Name, &oid, &c.TypMod)
		c.TypeOID = uint32(oid)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", t, err)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoTable, t)
	}
	return cols, nil
}
