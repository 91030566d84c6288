package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/replication"
)

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgoutbox migrate", flag.ContinueOnError)
	var c common
	c.register(fs)
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := c.requireURL(); err != nil {
		return err
	}
	table, err := replication.ParseTable(c.table)
	if err != nil {
		return err
	}
	conn, err := connect(ctx, c.databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	v, err := migrations.Migrate(ctx, conn, migrations.Options{Schema: table.Schema, Table: table.Name})
	if err != nil {
		return errors.New(redact(err.Error(), secretsOf(c.databaseURL)))
	}
	fmt.Fprintf(stdout, "migrated to version %d: %s and pgoutbox_state are in place\n", v, table)
	return nil
}

// connect opens a connection without letting the URL reach an error text.
func connect(ctx context.Context, databaseURL string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, errors.New("--database-url is not a valid connection string")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = replication.ConnectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %s", redact(err.Error(), secretsOf(databaseURL)))
	}
	return conn, nil
}
