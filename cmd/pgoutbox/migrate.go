package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
)

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgoutbox migrate", flag.ContinueOnError)
	var (
		c  common
		mc mappingCheck
	)
	c.register(fs)
	mc.register(fs)
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := c.requireURL(); err != nil {
		return err
	}
	ownPublished(fs, &mc.cfg.Poll)
	tables, _, err := c.resolveTables(ctx)
	if err != nil {
		return err
	}
	conn, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// A table run could not relay is not given polling columns, nor is a
	// missing one created under a mapping that does not fit it.
	if err := mc.check(ctx, fs, conn, tables, true); err != nil {
		return errors.New(redact(err.Error(), secretsOf(c.databaseURL)))
	}
	v, err := migrations.Migrate(ctx, conn, migrations.Options{StateOnly: true})
	if err != nil {
		return errors.New(redact(err.Error(), secretsOf(c.databaseURL)))
	}
	fmt.Fprintf(stdout, "migrated to version %d: pgoutbox_state and pgoutbox_dead_letter are in place\n", v)
	if f, err := schema.ParseFormat(mc.format); err == nil {
		cfg := mc.cfg
		cfg.Encoder.Format = f
		if cfg.ChangeEvents() {
			// Polling reads no update nor delete: the tables keep their
			// columns, which their change events carry.
			fmt.Fprintf(stdout, "%s left as they are: change events (--format debezium) stream the WAL alone, and polling columns would join the events\n", strings.Join(tables, ", "))
			return nil
		}
	}
	for _, name := range tables {
		table, _ := outbox.ParseTable(name)
		var x migrations.PollIndex
		if order, where, ok := mc.cfg.Poll.Index(); ok {
			x = migrations.PollIndex{Order: order, Where: where}
		}
		res, err := migrations.EnsureOutbox(ctx, conn, table.Schema, table.Name, &x)
		if err != nil {
			return errors.New(redact(err.Error(), secretsOf(c.databaseURL)))
		}
		// A column of the table's own that bears a polling column's name
		// was kept, not added: say now whether polling can use it.
		cerr := checkPolling(ctx, conn, mc.cfg.Poll, table)
		switch {
		case res.Created:
			fmt.Fprintf(stdout, "%s created\n", table)
		case len(res.Added) > 0 || res.IndexBuilt || len(res.Defaults) > 0:
			fmt.Fprintf(stdout, "%s: added %s without rewriting the table; %s\n", table, describeAdded(res), alreadyThere(mc.cfg.Poll))
		case cerr == nil:
			fmt.Fprintf(stdout, "%s already has the polling columns\n", table)
		}
		if cerr != nil {
			return errors.New(redact(cerr.Error(), secretsOf(c.databaseURL)))
		}
		if err := noteUnordered(ctx, conn, stdout, mc.cfg.Poll, table); err != nil {
			return errors.New(redact(err.Error(), secretsOf(c.databaseURL)))
		}
		if err := notePending(ctx, conn, stdout, mc.cfg.Poll, table, res); err != nil {
			return errors.New(redact(err.Error(), secretsOf(c.databaseURL)))
		}
	}
	return nil
}

// alreadyThere says what run does with the rows a table held before
// migrate: those its own mark says are pending are polled; without such a
// mark they are its history.
func alreadyThere(cfg poll.Config) string {
	switch {
	case cfg.Status != "":
		return fmt.Sprintf("rows already there whose %s is %s are published by run, the others not", cfg.Status, strings.Join(cfg.PendingValues(), " or "))
	case cfg.OwnMark():
		return fmt.Sprintf("rows already there whose %s is null are published by run, the others not", cfg.Published)
	default:
		return "rows already there are not polled"
	}
}

// notePending says how many rows of a table that had a published_at of its
// own before pgoutbox are unpublished by that mark: rows written before
// the polling columns are the table's history, which a first start leaves
// alone unless given --snapshot-mode initial, and a team that marked its
// rows with published_at would otherwise find its pending ones unsent.
func notePending(ctx context.Context, conn *pgx.Conn, stdout io.Writer, cfg poll.Config, table outbox.Table, res migrations.OutboxResult) error {
	if res.Created || cfg.OwnMark() {
		return nil
	}
	if slices.Contains(res.Added, outbox.PublishedColumn) {
		return noteHistory(ctx, conn, stdout, table)
	}
	var pending, marked int64
	err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE %[2]s IS NULL), count(*) FILTER (WHERE %[2]s IS NOT NULL) FROM %[1]s WHERE %[3]s IS NULL`,
		table.Quoted(), pgx.Identifier{outbox.PublishedColumn}.Sanitize(), pgx.Identifier{outbox.TxIDColumn}.Sanitize())).Scan(&pending, &marked)
	if err != nil {
		return fmt.Errorf("%s: count the rows written before pgoutbox: %w", table, err)
	}
	if pending > 0 && marked > 0 {
		fmt.Fprintf(stdout, "%s: %d rows written before pgoutbox have no published_at, which the table already had (%d have one): "+
			"run publishes them when told the column is your poller's mark, --column-published published_at "+
			"(with --column-order <the table's identity or serial id>, as they have no seq), or your status column (--column-status); "+
			"otherwise it publishes what commits from then on (docs/modes.md)\n",
			table, pending, marked)
	}
	return nil
}

// noteHistory says, for a table that had no mark of published rows, what a
// first start does with the rows already in it: a poller that kept a
// cursor over them (seed 001) has sent those up to its last id.
func noteHistory(ctx context.Context, conn *pgx.Conn, stdout io.Writer, table outbox.Table) error {
	var has bool
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE %s IS NULL)`,
		table.Quoted(), pgx.Identifier{outbox.TxIDColumn}.Sanitize())).Scan(&has); err != nil {
		return fmt.Errorf("%s: look for rows written before pgoutbox: %w", table, err)
	}
	if has {
		fmt.Fprintf(stdout, "%s: the rows already in the table are its history: a first start publishes what commits from then on. "+
			"To publish them first, start it once with --snapshot-mode initial (every one), "+
			"or with --snapshot-mode initial --snapshot-after <id> --column-order <the table's identity or serial id> "+
			"(those above the last id a poller that keeps a cursor sent) (docs/outbox-table.md)\n", table)
	}
	return nil
}

// noteUnordered says, for a table whose own mark says which rows are
// pending, that pending rows written before seq have no order value: run
// stops on them until they have one, and the note says how to give it.
func noteUnordered(ctx context.Context, conn *pgx.Conn, stdout io.Writer, cfg poll.Config, table outbox.Table) error {
	if !cfg.OwnMark() {
		return nil
	}
	cfg.Table = table.String()
	p, err := poll.New(ctx, conn, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", table, err)
	}
	err = p.Shape().CheckOrdered(ctx)
	if ue := (*poll.UnorderedError)(nil); errors.As(err, &ue) {
		fmt.Fprintf(stdout, "%s: run will stop before it publishes anything: %s\n", table, strings.TrimPrefix(ue.Error(), "poll: "))
		return nil
	}
	return err
}

// checkPolling checks table as a poll session would before it publishes.
func checkPolling(ctx context.Context, conn *pgx.Conn, cfg poll.Config, table outbox.Table) error {
	cfg.Table = table.String()
	p, err := poll.New(ctx, conn, cfg)
	if err == nil {
		err = p.Shape().Check(ctx)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", table, err)
	}
	return nil
}

// connect opens a connection for pgoutbox's own tables, keeping the URL
// out of any error text.
func (c *common) connect(ctx context.Context) (*pgx.Conn, error) {
	return c.dial(ctx, replication.Config.Connect)
}

// connectUser opens a connection that reads the user's tables and catalog
// (or creates the publication), where Debezium's JDBC connections would:
// it runs --database-initial-statements first.
func (c *common) connectUser(ctx context.Context) (*pgx.Conn, error) {
	return c.dial(ctx, replication.Config.ConnectUser)
}

func (c *common) dial(ctx context.Context, connect func(replication.Config, context.Context) (*pgx.Conn, error)) (*pgx.Conn, error) {
	if _, err := replication.ConnConfig(c.databaseURL); err != nil {
		return nil, errors.New("--database-url is not a valid connection string")
	}
	conn, err := connect(replication.Config{DatabaseURL: c.databaseURL, InitialStatements: c.initialStatements}, ctx)
	var stmt *replication.InitialStatementError
	switch {
	case err == nil:
		return conn, nil
	case errors.As(err, &stmt):
		return nil, err
	case replication.Untrusted(err):
		return nil, fmt.Errorf("connect: %w", &replication.TLSError{Err: errors.New(redact(err.Error(), secretsOf(c.databaseURL)))})
	}
	return nil, fmt.Errorf("connect: %s", redact(err.Error(), secretsOf(c.databaseURL)))
}

func describeAdded(res migrations.OutboxResult) string {
	parts := []string{}
	if len(res.Added) > 0 {
		parts = append(parts, "the columns "+strings.Join(res.Added, ", "))
	}
	if res.IndexBuilt {
		parts = append(parts, "the index over unpublished rows (built concurrently)")
	}
	if len(res.Defaults) > 0 {
		parts = append(parts, "the defaults of "+strings.Join(res.Defaults, ", "))
	}
	return strings.Join(parts, " and ")
}
