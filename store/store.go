package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The tables store reads and writes; migrations creates them.
const (
	StateTable      = "pgoutbox_state"
	DeadLetterTable = "pgoutbox_dead_letter"
)

// ErrNoState means pgoutbox's own tables are missing or older than this
// binary, and could not be brought up to date.
var ErrNoState = errors.New("pgoutbox's own tables are missing or older than this pgoutbox")

// Querier runs statements: a *pgx.Conn or a pgx.Tx.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ Querier = (*pgx.Conn)(nil)
	_ Querier = (pgx.Tx)(nil)
)

// Pipeline is one pipeline's rows in pgoutbox's own tables; Name is the
// pipeline's name, which is its slot's.
type Pipeline struct {
	Name string
}

// IsMissing tells an error from a table or column that is not there yet:
// the migration that adds it has not run (SQLSTATE 42P01, 42703).
func IsMissing(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42703")
}

func isInsufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// isReadOnly tells a write refused because the server or the session is
// read-only (SQLSTATE 25006).
func isReadOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "25006"
}

// TablePipeline is the state row of a table after the first in a pipeline
// of several: slot/schema.table. The first table's positions stay in the
// pipeline's own row (named by the slot), so a pipeline of one table that
// later lists more reads its state as before. A slot name has no '/', so
// such a row is never taken for a pipeline.
func TablePipeline(slot, table string) Pipeline {
	return Pipeline{Name: slot + "/" + table}
}
