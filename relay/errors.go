package relay

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Errors are judged by what they say of themselves: the errors of
// replication, schema and sink have methods that errors.As finds (as
// pgconn's SafeToRetry and Timeout), so that a new error there needs no
// edit here. The relay's own sentinels are listed below, and a server
// error by its SQLSTATE, the server's own classification.
type (
	// permanentError: retrying cannot fix it.
	permanentError interface{ Permanent() bool }
	// unavailableError: logical replication cannot be used now; auto
	// mode polls.
	unavailableError interface{ Unavailable() bool }
	// poisonError: it belongs to one row, not to the pipeline.
	poisonError interface{ Poison() bool }
)

// Poison: a refused event is one row's, and stays refused.
func (e *RefusedError) Poison() bool    { return true }
func (e *RefusedError) Permanent() bool { return true }

// The relay's own sentinels that retrying cannot fix.
var permanentSentinels = []error{ErrSlotLost, ErrNoState, ErrClusterChanged, ErrSnapshotExactlyOnce}

// permanent tells the errors retrying cannot fix: configuration, privileges,
// the table's shape, a poison row under the halt policy, a lost slot.
func permanent(err error) bool {
	var p permanentError
	if errors.As(err, &p) && p.Permanent() {
		return true
	}
	for _, s := range permanentSentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 28: invalid authorization; 42: syntax or access rule violation
		// (missing table, permission denied); 3D: unknown database.
		class := pgErr.Code[:2]
		return class == "28" || class == "42" || class == "3D"
	}
	return false
}

// replicationUnavailable tells the errors after which auto mode polls:
// the server, the role or a pooler refuses logical replication, or the
// slot cannot be streamed any more.
func replicationUnavailable(err error) bool {
	var u unavailableError
	if errors.As(err, &u) && u.Unavailable() || errors.Is(err, ErrSlotLost) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "53300", // too many connections: no free WAL sender
			"55000", // object not in prerequisite state (wal_level, invalidated slot)
			"08P01": // protocol violation: a pooler refusing replication (PgBouncer: unsupported startup parameter)
			return true
		}
	}
	return false
}

// isPoison tells the errors that belong to one row, not to the pipeline.
func isPoison(err error) bool {
	var p poisonError
	return errors.As(err, &p) && p.Poison() || errors.Is(err, errHeld)
}
