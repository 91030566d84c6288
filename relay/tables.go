package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/sink"
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
//   - every other table's are in a row of its own (store.TablePipeline,
//     slot/schema.table).

// tableRelays builds the table relays of a pipeline of several tables.
func (r *Relay) tableRelays() []*Relay {
	out := make([]*Relay, len(r.tables))
	for i, t := range r.tables {
		cfg := r.cfg
		cfg.Replication.Table, cfg.Replication.Tables = t.String(), nil
		cfg.Poll.Table = t.String()
		if i > 0 {
			// In auto mode the first table's poller probes the WAL for
			// all of them; the others only poll.
			cfg.Mode = ModePoll
		}
		u := &Relay{cfg: cfg, log: r.log, table: t, tables: []outbox.Table{t},
			enc: r.enc, router: r.router, database: r.database, Metrics: r.Metrics, refused: r.refused, parent: r}
		if i > 0 {
			u.stateName = store.TablePipeline(r.cfg.Replication.Slot, t.String()).Name
		}
		out[i] = u
	}
	return out
}

// pollTables polls every table of the pipeline, each through its table
// relay, until ctx ends or one fails; the first failure stops the others.
// It holds the pipeline's lock meanwhile, for all of them. In auto mode the
// first table's probe ends it (errBackToWAL) for all. With a handoff, each
// table polls until everything of it that committed before the new slot
// is published; only once every table is done is the handoff ended, in
// the pipeline's row, so a stop before that resumes it for all tables.
//
// The rows each table published are handed to the WAL session after it in
// polled, by table, so that the slot's replay does not send them again.
func (r *Relay) pollTables(ctx context.Context, k *sink.Kafka, handoff *handoffError, reason store.Reason, polled *polledRows) error {
	guard, err := r.lockedConn(ctx)
	if err != nil {
		return err
	}
	defer guard.Close(context.Background())
	handoffs := make([]*handoffError, len(r.units))
	if handoff != nil {
		// The transaction bound holds for every table; the bound on seq is
		// each table's own, read now: later than the slot's creation, it
		// only covers more.
		handoffs[0] = handoff
		for i, u := range r.units[1:] {
			pos, err := poll.ReadFloorCandidate(ctx, guard, u.cfg.Poll)
			if err != nil {
				return err
			}
			h := *handoff
			h.maxSeq = pos.Seq
			handoffs[i+1] = &h
		}
	}
	r.units[0].probeWait = r.probeWait // the first table's poller probes for all
	r.mode.Store(string(ModePoll))
	r.log.Info("polling several tables", "tables", r.tableNames(), "handoff", handoff != nil)
	var done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	published := make([]polledRows, len(r.units))
	for i, u := range r.units {
		u.stateReady.Store(true)
		g.Go(func() error {
			err := u.pollSession(gctx, k, handoffs[i], reason, &published[i])
			switch {
			case errors.Is(err, errHandoffDone):
				done.Add(1)
				return nil
			case err != nil:
				return fmt.Errorf("%s: %w", u.table, err)
			case ctx.Err() == nil && gctx.Err() == nil:
				return errors.New("polling " + u.table.String() + " stopped")
			}
			return nil
		})
	}
	err = g.Wait()
	if errors.Is(err, errBackToWAL) || (err == nil && handoff != nil) {
		// Every table has stopped publishing: each row any of them
		// published committed before this position.
		var lsn string
		if e := guard.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); e == nil {
			polled.forget()
			polled.until, _ = pglogrepl.ParseLSN(lsn)
			polled.byTable = make(map[string]polledSeqs, len(r.units))
			for i, u := range r.units {
				polled.byTable[u.table.String()] = published[i].seqs
			}
		}
	}
	if err != nil {
		return err
	}
	if handoff != nil && done.Load() == int64(len(r.units)) {
		if err := r.fenced(ctx, guard, func(q store.Querier) error { return r.own().EndHandoff(ctx, q) }); err != nil {
			return err
		}
		return errHandoffDone
	}
	return nil
}

// tablesHaveColumns tells whether every table of the pipeline has the
// polling columns, which auto mode needs to poll any of them.
func (r *Relay) tablesHaveColumns(ctx context.Context, conn *pgx.Conn) (bool, error) {
	for _, u := range r.units {
		ok, err := u.cfg.Poll.HasColumns(ctx, conn)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// tablesOf names the tables of a pipeline, comma-separated.
func tablesOf(tables []outbox.Table) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	return strings.Join(names, ",")
}

// saveTableFloors gives the other tables of a streamed pipeline the floor
// just saved in the pipeline's row: every transaction below xmin is in
// Kafka, whichever table it wrote, so polling any of them later (a
// restart in --mode poll) starts from what the WAL published for it.
func (r *Relay) saveTableFloors(ctx context.Context, conn store.Querier, confirmed string, xmin uint64, cluster *int64) error {
	for _, u := range r.units[min(1, len(r.units)):] {
		own := u.own()
		if err := own.SaveSetup(ctx, conn, u.table.String(), nil); err != nil {
			return err
		}
		if err := own.SaveFloor(ctx, conn, confirmed, xmin, nil, cluster); err != nil {
			return err
		}
	}
	return nil
}

// sampleTables reads each table's unpublished rows into the gauges, each
// above its own row's floor; a table whose row was never written (a
// pipeline streamed before its tables had rows) is counted above the
// pipeline's floor, which holds for every table.
func (r *Relay) sampleTables(ctx context.Context, conn *pgx.Conn) error {
	units := r.units
	if len(units) == 0 {
		units = []*Relay{r}
	}
	for _, u := range units {
		own := u.own()
		if known, _, err := own.Check(ctx, conn); err != nil {
			return err
		} else if !known {
			own = r.own()
		}
		count, oldest, err := own.Unpublished(ctx, conn, u.table, u.cfg.Poll, u.timeColumn())
		if err != nil {
			if store.IsMissing(err) {
				continue // no polling columns or no state table: nothing to report
			}
			return err
		}
		r.Metrics.unpublished(u.table.String(), count, oldest)
	}
	return nil
}
