// Package migrations creates pgoutbox's tables. Its own tables (state, dead
// letters, lease) are versioned SQL embedded in the binary and applied in
// order, once per database; the version is kept in pgoutbox_schema_version.
// Outbox tables are not versioned: EnsureOutbox creates a missing one, or
// gives an existing one the polling columns without rewriting it, for as
// many tables as a database holds.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed *.sql
var files embed.FS

// VersionTable records which migrations have been applied.
const VersionTable = "pgoutbox_schema_version"

// lockKey is the advisory lock migrations hold while they run: the key
// jackc/tern, which applied them in earlier versions, takes, so that an
// older pgoutbox migrating the same database at the same time waits too.
const lockKey = int64(9628173550095224)

// downMarker ends a migration's SQL; what follows undoes it (unused).
const downMarker = "---- create above / drop below ----"

// Options name what Migrate creates besides pgoutbox's own tables.
type Options struct {
	// Schema and Table name the outbox table (default public.outbox).
	Schema, Table string
	// StateOnly applies the versioned migrations of pgoutbox's own tables
	// (state, dead letters, lease) and leaves the outbox table alone.
	StateOnly bool
	// SkipPollingColumns leaves an existing outbox table without the
	// columns the polling fallback needs.
	SkipPollingColumns bool
}

// Migrate applies every migration of pgoutbox's own tables not yet applied,
// then, unless StateOnly, makes sure the outbox table exists and can be
// polled (EnsureOutbox). It returns the version reached. It is safe to run
// concurrently, and through a transaction pooler (migrateState).
func Migrate(ctx context.Context, conn *pgx.Conn, opts Options) (int32, error) {
	if opts.Schema == "" {
		opts.Schema = "public"
	}
	if opts.Table == "" {
		opts.Table = "outbox"
	}
	v, err := migrateState(ctx, conn)
	for try := 1; err != nil && isDuplicate(err) && try < 3; try++ {
		// Another pgoutbox created the tables while this one waited
		// for the lock; its transaction began before, and PostgreSQL
		// had shown it the tables as missing. A new transaction sees
		// them.
		v, err = migrateState(ctx, conn)
	}
	if err != nil {
		return 0, err
	}
	if opts.StateOnly {
		return v, nil
	}
	var x *PollIndex
	if !opts.SkipPollingColumns {
		x = &PollIndex{}
	}
	if _, err := EnsureOutbox(ctx, conn, opts.Schema, opts.Table, x); err != nil {
		return v, err
	}
	return v, nil
}

// migrateState applies the migrations not yet applied in one transaction,
// all or none, under a transaction's advisory lock: a session's lock, as
// migration tools take, would stay behind on the server connection a
// transaction pooler (PgBouncer) ran it on, and block the next migration
// that lands on another one for as long as that connection lives.
func migrateState(ctx context.Context, conn *pgx.Conn) (int32, error) {
	ups, err := upMigrations()
	if err != nil {
		return 0, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	// Looked up before it is created: CREATE TABLE IF NOT EXISTS needs
	// the privilege to create even where the table exists.
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", VersionTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if !exists {
		if _, err := tx.Exec(ctx, "CREATE TABLE "+VersionTable+" (version int4 NOT NULL); INSERT INTO "+VersionTable+" VALUES (0)"); err != nil {
			return 0, fmt.Errorf("migrate: %w", err)
		}
	}
	var version int32
	if err := tx.QueryRow(ctx, "SELECT version FROM "+VersionTable).Scan(&version); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if int(version) > len(ups) {
		return 0, fmt.Errorf("migrate: the database is at version %d, beyond this pgoutbox's %d: run a newer pgoutbox", version, len(ups))
	}
	if int(version) == len(ups) {
		return version, tx.Commit(ctx)
	}
	for i := int(version); i < len(ups); i++ {
		// Without arguments, pgx sends the file as one simple query:
		// its statements run in order, in this transaction.
		if _, err := tx.Exec(ctx, ups[i].sql); err != nil {
			return 0, fmt.Errorf("migrate: %s: %w", ups[i].name, err)
		}
	}
	if _, err := tx.Exec(ctx, "UPDATE "+VersionTable+" SET version = $1", int32(len(ups))); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	return int32(len(ups)), nil
}

// isDuplicate tells an error of creating what another session created at
// the same time: a table, or the row type PostgreSQL makes for it.
func isDuplicate(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P07" || pe.Code == "23505" || pe.Code == "42710")
}

type migration struct{ name, sql string }

// upMigrations are the embedded migrations in order, each without its down
// part. Files are numbered from 001 without gaps.
func upMigrations() ([]migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]migration, len(names))
	for i, name := range names { // Glob sorts them
		if want := fmt.Sprintf("%03d_", i+1); !strings.HasPrefix(name, want) {
			return nil, fmt.Errorf("migration %s: expected number %s", name, want[:3])
		}
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		up, _, _ := strings.Cut(string(b), downMarker)
		out[i] = migration{name: name, sql: up}
	}
	return out, nil
}

// Latest is the version the embedded migrations reach.
func Latest() (int32, error) {
	entries, err := fs.Glob(files, "*.sql")
	if err != nil {
		return 0, err
	}
	return int32(len(entries)), nil
}

// sanitizeIndexPrefix makes the start of an index or sequence name from a
// table name (which is quoted where it is used): lower case, '$' as '_',
// at most 40 bytes, cut at a character boundary.
func sanitizeIndexPrefix(table string) string {
	b := []byte(table)
	for i, c := range b {
		if c == '$' {
			b[i] = '_'
		}
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	n := len(b)
	if n > 40 {
		n = 40
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
	}
	return string(b[:n])
}
