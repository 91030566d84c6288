package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/replication"
)

// database is the bench's hold on the database under test: the admin
// connection, and what the runs created there, dropped at the end.
type database struct {
	table     outbox.Table
	admin     *pgx.Conn
	slots     []string // the runs' slots and pipelines
	createdPb bool
	aggTable  string // quoted; empty without Aggregates
}

// track notes a run's slot and pipeline, dropped at the end.
func (d *database) track(slot string) {
	if !slices.Contains(d.slots, slot) {
		d.slots = append(d.slots, slot)
	}
}

// open connects, migrates the table, makes the publication and, for an
// application's load, the aggregates table.
func openDatabase(ctx context.Context, cfg Config, table outbox.Table, suffix string) (*database, error) {
	d := &database{table: table}
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	d.admin = conn
	if _, err := migrations.Migrate(ctx, conn, migrations.Options{Schema: table.Schema, Table: table.Name}); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	pub, err := replication.EnsurePublication(ctx, conn, publication, table, true)
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	d.createdPb = pub.Created
	if cfg.Aggregates > 0 {
		if err := d.createAggregates(ctx, cfg.Aggregates, suffix); err != nil {
			conn.Close(ctx)
			return nil, err
		}
	}
	return d, nil
}

// createAggregates creates the table of aggregate rows that the
// application-shaped load locks, one row per aggregate. It is the bench's
// own, named for this run, and dropped at the end.
func (d *database) createAggregates(ctx context.Context, n int, suffix string) error {
	ident := pgx.Identifier{d.table.Schema, "bench_aggregates_" + suffix}.Sanitize()
	if _, err := d.admin.Exec(ctx, "CREATE TABLE "+ident+" (id int PRIMARY KEY, version bigint NOT NULL DEFAULT 0)"); err != nil {
		return fmt.Errorf("create the aggregates table: %w", err)
	}
	d.aggTable = ident
	if _, err := d.admin.Exec(ctx, "INSERT INTO "+ident+" (id) SELECT generate_series(0, $1 - 1)", n); err != nil {
		return fmt.Errorf("fill the aggregates table: %w", err)
	}
	return nil
}

// close drops the slots and state rows the runs left, and their rows.
func (d *database) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range d.slots {
		_ = d.dropSlot(ctx, s)
	}
	_, _ = d.admin.Exec(ctx, "DELETE FROM pgoutbox_state WHERE pipeline = ANY($1)", d.slots)
	_ = d.clearRows(ctx)
	if d.aggTable != "" {
		_, _ = d.admin.Exec(ctx, "DROP TABLE IF EXISTS "+d.aggTable)
	}
	if d.createdPb {
		_, _ = d.admin.Exec(ctx, "DROP PUBLICATION IF EXISTS "+publication)
	}
	d.admin.Close(ctx)
}

// dropSlot drops a slot if it exists, retrying while its connection goes
// away.
func (d *database) dropSlot(ctx context.Context, slot string) error {
	if err := replication.DropSlot(ctx, d.admin, slot); err != nil && !errors.Is(err, replication.ErrSlotMissing) {
		return err
	}
	return nil
}

// clearRows deletes the bench's rows, so that a poller does not publish
// the rows of an earlier run, and vacuums them away.
func (d *database) clearRows(ctx context.Context) error {
	ident := d.table.Quoted()
	if _, err := d.admin.Exec(ctx, "DELETE FROM "+ident+` WHERE aggregatetype LIKE 'bench\_%'`); err != nil {
		return err
	}
	_, err := d.admin.Exec(ctx, "VACUUM "+ident)
	return err
}

// createSlot creates a pgoutput slot for the floor reader.
func (d *database) createSlot(ctx context.Context, slot string) error {
	d.slots = append(d.slots, slot)
	_, err := replication.CreateSlot(ctx, d.admin, slot, false)
	return err
}
