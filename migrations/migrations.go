// Package migrations creates pgoutbox's tables. Its own tables (state, dead
// letters) are versioned SQL embedded in the binary and applied in order by
// jackc/tern, once per database; the version is kept in
// pgoutbox_schema_version. Outbox tables are not versioned: EnsureOutbox
// creates a missing one, or gives an existing one the polling columns
// without rewriting it, for as many tables as a database holds.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed *.sql
var files embed.FS

// VersionTable records which migrations have been applied.
const VersionTable = "pgoutbox_schema_version"

// Options name what Migrate creates besides pgoutbox's own tables.
type Options struct {
	// Schema and Table name the outbox table (default public.outbox).
	Schema, Table string
	// StateOnly applies the versioned migrations of pgoutbox's own tables
	// (state, dead letters) and leaves the outbox table alone.
	StateOnly bool
	// SkipPollingColumns leaves an existing outbox table without the
	// columns the polling fallback needs.
	SkipPollingColumns bool
}

// Migrate applies every migration of pgoutbox's own tables not yet applied,
// then, unless StateOnly, makes sure the outbox table exists and can be
// polled (EnsureOutbox). It returns the version reached. It is safe to run
// concurrently: tern takes an advisory lock.
func Migrate(ctx context.Context, conn *pgx.Conn, opts Options) (int32, error) {
	if opts.Schema == "" {
		opts.Schema = "public"
	}
	if opts.Table == "" {
		opts.Table = "outbox"
	}
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return 0, fmt.Errorf("migrator: %w", err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return 0, fmt.Errorf("load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	v, err := m.GetCurrentVersion(ctx)
	if err != nil {
		return 0, err
	}
	if opts.StateOnly {
		return v, nil
	}
	if _, err := EnsureOutbox(ctx, conn, opts.Schema, opts.Table, !opts.SkipPollingColumns); err != nil {
		return v, err
	}
	return v, nil
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
