package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
)

// splitTables reads --table: one schema.table, or several comma-separated
// (a part holding a comma is quoted, as in SQL).
func splitTables(v string) ([]string, error) {
	ts, err := outbox.ParseTables(v)
	if err != nil {
		return nil, fmt.Errorf("--table: %w", err)
	}
	if len(ts) == 0 {
		return nil, errors.New("--table: no table given")
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.String()
	}
	return out, nil
}

// resolveTables returns the pipeline's outbox tables: --table's, or, with
// --table-include-list, the existing tables whose schema.table one of its
// patterns matches whole and none of --table-exclude-list's does, in any
// case (as Debezium's table.include.list and table.exclude.list), in name
// order; matched then names them, for the log.
func (c *common) resolveTables(ctx context.Context) (tables []string, matched string, err error) {
	if c.tableInclude == "" {
		if c.tableExclude != "" {
			return nil, "", errors.New("--table-exclude-list leaves tables out of those --table-include-list matches: give that too")
		}
		tables, err = splitTables(c.table)
		return tables, "", err
	}
	include, err := schema.ParsePatterns(c.tableInclude)
	if err != nil {
		return nil, "", fmt.Errorf("--table-include-list: %w", err)
	}
	if len(include) == 0 {
		return nil, "", errors.New("--table-include-list: no pattern given")
	}
	exclude, err := schema.ParsePatterns(c.tableExclude)
	if err != nil {
		return nil, "", fmt.Errorf("--table-exclude-list: %w", err)
	}
	conn, err := c.connectUser(ctx)
	if err != nil {
		return nil, "", err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT n.nspname::text, c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
ORDER BY 1, 2`)
	if err != nil {
		return nil, "", fmt.Errorf("--table-include-list: list tables: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outbox.Table, error) {
		var t outbox.Table
		err := r.Scan(&t.Schema, &t.Name)
		return t, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("--table-include-list: list tables: %w", err)
	}
	for _, t := range all {
		// Matched as Debezium matches: against schema.table as Postgres
		// stores them, unquoted.
		if !capturable(t) {
			continue
		}
		name := t.Schema + "." + t.Name
		if !include.Match(name) || exclude.Match(name) {
			continue
		}
		for _, part := range []string{t.Schema, t.Name} {
			if err := outbox.ValidateIdentifier("name", part); err != nil {
				return nil, "", fmt.Errorf("--table-include-list matches %s, which pgoutbox cannot name: %w", name, err)
			}
		}
		tables = append(tables, t.String())
	}
	if len(tables) == 0 {
		return nil, "", fmt.Errorf("--table-include-list %q matches no table of the database", c.tableInclude)
	}
	return tables, strings.Join(tables, ","), nil
}

// capturable tells a table patterns may match: not the system's, nor one
// of pgoutbox's own.
func capturable(t outbox.Table) bool {
	switch {
	case t.Schema == "pg_catalog", t.Schema == "information_schema", strings.HasPrefix(t.Schema, "pg_"):
		return false
	}
	switch t.Name {
	case "pgoutbox_state", "pgoutbox_dead_letter", "pgoutbox_lease", "pgoutbox_schema_version":
		return false
	}
	return true
}

// captures is the pipeline's patterns as replication.Config.Captures
// takes them: the tables --table-include-list matches and
// --table-exclude-list does not, created since start, which Debezium's
// connector captures from its first row; nil without patterns.
func (c *common) captures() (func(outbox.Table) bool, error) {
	if c.tableInclude == "" {
		return nil, nil
	}
	include, err := schema.ParsePatterns(c.tableInclude)
	if err != nil {
		return nil, fmt.Errorf("--table-include-list: %w", err)
	}
	exclude, err := schema.ParsePatterns(c.tableExclude)
	if err != nil {
		return nil, fmt.Errorf("--table-exclude-list: %w", err)
	}
	return func(t outbox.Table) bool {
		name := t.Schema + "." + t.Name
		return capturable(t) && include.Match(name) && !exclude.Match(name)
	}, nil
}

// tableList names the configured tables, comma-separated.
func tableList(c replication.Config) string {
	if len(c.Tables) > 0 {
		return strings.Join(c.Tables, ",")
	}
	return c.Table
}
