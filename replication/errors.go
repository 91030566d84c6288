package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// The package's errors say how a caller should treat them, through
// methods that errors.As finds (as pgconn's SafeToRetry and Timeout do),
// so that a caller asks what an error means instead of listing them:
//
//	Permanent() bool    retrying cannot fix it: the configuration, the
//	                    server's settings, the role or the table must change
//	Unavailable() bool  logical replication cannot be used now: a caller
//	                    that can poll the table instead should
//
// Every sentinel callers act on is here; each is wrapped with the detail
// the server gave.
var (
	// ErrNotReady means the server or role does not allow logical replication;
	// the error text says what to change.
	ErrNotReady error = &sentinel{"logical replication is not available", true, true}
	// ErrSlotMissing means the replication slot does not exist.
	ErrSlotMissing error = &sentinel{"replication slot does not exist", true, true}
	// ErrSlotInvalidated means the server removed WAL the slot still needed
	// (max_slot_wal_keep_size, idle timeout): changes since its confirmed
	// position can no longer be read from the WAL.
	ErrSlotInvalidated error = &sentinel{"replication slot is invalidated", true, true}
	// ErrSlotElsewhere means a slot of that name exists in another
	// database: another pipeline's, since slot names are the cluster's.
	// It is neither this pipeline's to stream nor to drop.
	ErrSlotElsewhere error = &sentinel{"the replication slot belongs to another database", true, false}
	// ErrSlotActive means another process is streaming from the slot.
	ErrSlotActive error = &sentinel{"replication slot is in use by another process", false, false}
	// ErrNoFailoverSlots means a failover slot was asked of a server
	// older than PostgreSQL 17, which has none.
	ErrNoFailoverSlots error = &sentinel{"failover slots need PostgreSQL 17 or later", true, false}
	// ErrPublication means the publication is missing or does not cover the
	// outbox table, and pgoutbox may not fix that itself.
	ErrPublication error = &sentinel{"publication does not cover the outbox table", true, true}
	// ErrProtocol marks a message the decoder cannot make sense of.
	ErrProtocol error = &sentinel{"replication protocol error", false, false}
	// ErrConnectionLost means the server stopped answering.
	ErrConnectionLost error = &sentinel{"connection to the server lost", false, false}
)

type sentinel struct {
	msg                    string
	permanent, unavailable bool
}

func (e *sentinel) Error() string     { return e.msg }
func (e *sentinel) Permanent() bool   { return e.permanent }
func (e *sentinel) Unavailable() bool { return e.unavailable }

// Permanent and Unavailable: the server refusing the role a replication
// connection is ErrNotReady.
func (e *RefusedError) Permanent() bool   { return true }
func (e *RefusedError) Unavailable() bool { return true }

// unavailableError is a replication connection the server (or something
// in front of it) refuses, which a regular connection may still get.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string     { return e.err.Error() }
func (e *unavailableError) Unwrap() error     { return e.err }
func (e *unavailableError) Unavailable() bool { return true }

// refusedReplication marks the errors of opening a replication connection
// that say the server does not give this role one there: 28000 (a
// pg_hba.conf without a replication line, where a regular connection got
// in before with the same credentials, and a role without REPLICATION on
// older servers) and 42501 ("must be superuser or replication role to
// start walsender": REPLICATION revoked between the setup's check and the
// stream's connection, seen in nemesis seeds 5 and 16 on PostgreSQL 15),
// as TryReplication reads them.
func refusedReplication(err error) error {
	if _, ok := walSenderRefused(err); ok {
		return &unavailableError{err}
	}
	return err
}

// walSenderRefused returns the server's error when err refuses this role a
// WAL sender: 28000 or 42501 (which code depends on the version and on
// why).
func walSenderRefused(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	ok := errors.As(err, &pgErr) && (pgErr.Code == "28000" || pgErr.Code == "42501")
	return pgErr, ok
}

// classify maps the server's errors about the slot and the publication to
// the package's sentinels, by SQLSTATE and by where they arrive: before
// streaming, 42704 is the slot (the publication is only read once changes
// are decoded); while streaming, it is the publication (an active slot
// cannot be dropped). 55000 is an invalidated slot when the server says
// the slot is invalidated, asked again on a connection of its own.
func classify(err error, cfg Config, streaming bool) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	slot := cfg.Slot
	switch {
	case pgErr.Code == "42704" && streaming:
		return fmt.Errorf("%w: %s", ErrPublication, pgErr.Message)
	case pgErr.Code == "42704":
		return fmt.Errorf("%w: %s: %s", ErrSlotMissing, slot, pgErr.Message)
	case pgErr.Code == "55006":
		return fmt.Errorf("%w: %s: %s", ErrSlotActive, slot, pgErr.Message)
	case pgErr.Code == "55000" && invalidated(cfg):
		return fmt.Errorf("%w: %s: %s", ErrSlotInvalidated, slot, pgErr.Message)
	}
	return err
}

// invalidated asks the server whether cfg's slot is invalidated
// (its WAL removed; on a standby, a conflict; on 18, idle too long).
func invalidated(cfg Config) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := cfg.Connect(ctx)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	var lost bool
	err = conn.QueryRow(ctx, `SELECT wal_status = 'lost' OR coalesce((to_jsonb(s)->>'conflicting')::bool, false)
  OR to_jsonb(s)->>'invalidation_reason' IS NOT NULL FROM pg_replication_slots s WHERE slot_name = $1`, cfg.Slot).Scan(&lost)
	return err == nil && lost
}

// UnrecognisedError is a row that reaches the stream through the
// publication from a relation that the publication names and that is not
// an outbox table of the pipeline, nor a partition of one or a table that
// inherits from one. The stream stops at it rather than confirm past a row
// it did not account for: nothing from its transaction on is confirmed.
// The relay adds what to do.
type UnrecognisedError struct {
	Relation outbox.Table  // the relation as the stream names it at that point
	OID      uint32        // its OID
	LSN      pglogrepl.LSN // the row's position
}

func (e *UnrecognisedError) Error() string {
	return fmt.Sprintf("a row of %s (oid %d) at %s is not of an outbox table of the pipeline, nor of a partition of one or a table that inherits from one", e.Relation, e.OID, e.LSN)
}

// Permanent: the publication or the pipeline's tables must change.
func (e *UnrecognisedError) Permanent() bool { return true }

// ActionQueryError is the heartbeat action query's failure.
type ActionQueryError struct{ Err error }

func (e *ActionQueryError) Error() string {
	return "heartbeat action query (--heartbeat-action-query, heartbeat.action.query): " + e.Err.Error()
}

func (e *ActionQueryError) Unwrap() error { return e.Err }

// Permanent: the query names a table that does not exist (undefined_table),
// on which Debezium's task fails too; the query must change.
func (e *ActionQueryError) Permanent() bool {
	var pgErr *pgconn.PgError
	return errors.As(e.Err, &pgErr) && pgErr.Code == "42P01"
}

// InitialStatementError is a statement of Config.InitialStatements the
// server refused; N counts from 1. It is permanent, as it fails Debezium's
// task, unless the server's error is of a class that passes (a lost
// connection, a deadlock or serialization failure, a lock not granted in
// time, the server short of resources or shutting down).
type InitialStatementError struct {
	N   int
	Err error
}

func (e *InitialStatementError) Error() string {
	return fmt.Sprintf("initial statement %d (database.initial.statements, --database-initial-statements): %v", e.N, e.Err)
}

func (e *InitialStatementError) Unwrap() error { return e.Err }

// Permanent tells a statement that fails again as it is.
func (e *InitialStatementError) Permanent() bool {
	var pe *pgconn.PgError
	if !errors.As(e.Err, &pe) || len(pe.Code) < 2 {
		return false
	}
	switch pe.Code[:2] {
	case "08", "40", "53", "55", "57", "58":
		return false
	}
	return true
}
