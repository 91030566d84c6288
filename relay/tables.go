package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// A pipeline of several outbox tables streams them all through one slot;
// polling keeps positions per table instead. Each table is polled by a
// relay of its own (a table relay), sharing the pipeline's sink, metrics,
// refusals and lock, with its own poller, floor and account of deleted
// rows in a state row of its own:
//   - the first table's positions stay in the pipeline's row, named by the
//     slot, so a pipeline of one table that later lists more reads its
//     state as before;
//   - every other table's are in the row TableStateName names, slot/table.
//     A slot name has no '/', so that row is never taken for a pipeline.

// TableStateName names the state row of a table after the first of the
// pipeline slot.
func TableStateName(slot string, table replication.Table) string {
	return slot + "/" + table.String()
}

// tableRelays builds the table relays of a pipeline of several tables.
func (r *Relay) tableRelays() []*Relay {
	out := make([]*Relay, len(r.tables))
	for i, t := range r.tables {
		cfg := r.cfg
		cfg.Replication.Table, cfg.Replication.Tables = t.String(), nil
		cfg.Poll.Table = t.String()
		u := &Relay{cfg: cfg, log: r.log, table: t, tables: []replication.Table{t},
			enc: r.enc, router: r.router, database: r.database, Metrics: r.Metrics, refused: r.refused, parent: r}
		if i > 0 {
			u.stateName = TableStateName(r.cfg.Replication.Slot, t)
		}
		out[i] = u
	}
	return out
}

// pollTables polls every table of the pipeline, each through its table
// relay, until ctx ends or one fails; the first failure stops the others.
// It holds the pipeline's lock meanwhile, for all of them.
func (r *Relay) pollTables(ctx context.Context, k Sink, reason store.Reason) error {
	guard, err := r.lockedConn(ctx)
	if err != nil {
		return err
	}
	defer guard.Close(context.Background())
	r.mode.Store(string(ModePoll))
	r.log.Info("polling several tables", "tables", r.tableNames())
	g, gctx := errgroup.WithContext(ctx)
	for _, u := range r.units {
		u.stateReady.Store(true)
		g.Go(func() error {
			var polled polledRows
			err := u.pollSession(gctx, k, nil, reason, &polled)
			if err != nil {
				return fmt.Errorf("%s: %w", u.table, err)
			}
			if ctx.Err() == nil && gctx.Err() == nil {
				return errors.New("polling " + u.table.String() + " stopped")
			}
			return nil
		})
	}
	return g.Wait()
}

// tablesOf names the tables of a pipeline, comma-separated.
func tablesOf(tables []replication.Table) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	return strings.Join(names, ",")
}
