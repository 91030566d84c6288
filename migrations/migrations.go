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
	return m.GetCurrentVersion(ctx)
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
