// Package migrations holds the SQL that creates pgoutbox's tables, embedded
// in the binary and applied in order by jackc/tern. Each migration runs once
// per database; the version is kept in pgoutbox_schema_version.
package migrations

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed *.sql
var files embed.FS

// VersionTable records which migrations have been applied.
const VersionTable = "pgoutbox_schema_version"

// Options name what the migrations create.
type Options struct {
	// Schema and Table name the outbox table (default public.outbox).
	Schema, Table string
	// SkipPollingColumns leaves an existing outbox table without the
	// columns the polling fallback needs.
	SkipPollingColumns bool
}

// Migrate applies every migration not yet applied and returns the version
// reached. It is safe to run concurrently: tern takes an advisory lock.
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
	m.Data["table"] = pgx.Identifier{opts.Schema, opts.Table}.Sanitize()
	m.Data["index_prefix"] = sanitizeIndexPrefix(opts.Table)
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
	if !opts.SkipPollingColumns {
		if err := AddPollingColumns(ctx, conn, opts.Schema, opts.Table); err != nil {
			return v, err
		}
	}
	return v, nil
}

// AddPollingColumns gives an existing outbox table what polling needs:
// insertion order (seq), the writing transaction (txid), the published
// mark, and a partial index over unpublished rows. Columns that exist are
// left alone. Adding seq to a large table rewrites it.
func AddPollingColumns(ctx context.Context, conn *pgx.Conn, schema, table string) error {
	t := pgx.Identifier{schema, table}.Sanitize()
	stmts := []string{
		"ALTER TABLE " + t + " ADD COLUMN IF NOT EXISTS seq bigint GENERATED ALWAYS AS IDENTITY",
		"ALTER TABLE " + t + " ADD COLUMN IF NOT EXISTS txid xid8 NOT NULL DEFAULT pg_current_xact_id()",
		"ALTER TABLE " + t + " ADD COLUMN IF NOT EXISTS published_at timestamptz",
		"CREATE INDEX IF NOT EXISTS " + sanitizeIndexPrefix(table) + "_unpublished ON " + t + " (seq) WHERE published_at IS NULL",
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("add polling columns to %s: %w", t, err)
		}
	}
	return nil
}

// sanitizeIndexPrefix makes an unquoted index name from a table name that
// the caller validated as letters, digits, '_' and '$'.
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
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}
