package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/store"
)

// gate lets one relay at a time into the pipeline, one session after the
// other: it connects the session, checks a connection pooler in front of
// the server, brings pgoutbox's own tables up to date once, and takes the
// pipeline's lease (lease.go); the others wait (errLocked). It lives as
// long as Run, whose goroutine alone uses it, and gives the last lease up
// when the relay stops.
type gate struct {
	p *pipeline
	// stateReady is set once pgoutbox's own tables are known to be at
	// this binary's version.
	stateReady   bool
	pooledLogged bool
	// last is the lease the last session took.
	last *leaseKeeper
	// cols are the configured columns as the sessions bind them, read in
	// the server's zone once the tables are known (inServerZone).
	cols schema.Columns
}

// columns are the columns the sessions bind their tables with; read by
// the first enter, before any session binds a table.
func (g *gate) columns() schema.Columns { return g.cols }

// hold is a session's hold on the pipeline: its connection, the lease it
// holds, and whether the connection goes through a pooler.
type hold struct {
	conn   *pgx.Conn
	lease  *leaseKeeper
	pooled bool
}

// on is a hold of lease on conn, another connection of the session that
// took it (a poll group's tables').
func (k *leaseKeeper) on(conn *pgx.Conn) *hold { return &hold{conn: conn, lease: k} }

// held tells whether the session may publish (leaseKeeper.held).
func (h *hold) held() bool { return h.lease.held() }

// fence makes poller mark under the lease.
func (h *hold) fence(poller *poll.Poller) { poller.SetFence(h.lease) }

// close closes the session's connection; the lease stays taken until it
// expires or the relay stops.
func (h *hold) close() { h.conn.Close(context.Background()) }

// keep renews the lease when a renewal is due (leaseKeeper.keep).
func (h *hold) keep(ctx context.Context) error { return h.lease.keep(ctx, h.conn) }

// fenced writes the pipeline's state under the lease (leaseKeeper.fenced).
func (h *hold) fenced(ctx context.Context, fn func(store.Querier) error) error {
	return h.lease.fenced(ctx, h.conn, fn)
}

// enter connects and takes the pipeline's lease: one relay works on a
// pipeline, in either mode; the others wait (errLocked). A connection
// through a pooler is checked first (CheckPooler), and pgoutbox's own
// tables are brought up to date before the lease, which lives in them.
func (g *gate) enter(ctx context.Context) (*hold, error) {
	cfg := g.p.cfg
	conn, err := cfg.Replication.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	fail := func(err error) (*hold, error) {
		conn.Close(context.Background())
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, cfg.queryTimeout())
	defer cancel()
	pooled, err := replication.Pooled(qctx, conn)
	if err != nil {
		return fail(err)
	}
	if pooled {
		if err := replication.CheckPooler(qctx, conn); err != nil {
			return fail(err)
		}
		if !g.pooledLogged {
			g.p.log.Info("connected through a connection pooler: the lease alone keeps one relay per pipeline, and the WAL needs a replication connection straight to the server",
				"pipeline", cfg.Replication.Slot)
			g.pooledLogged = true
		}
	}
	if !g.stateReady {
		// Before anything is created: a mapping that cannot work stops
		// here, not at the first row after the slot exists.
		unread, err := CheckMapping(ctx, conn, cfg)
		for _, t := range unread {
			g.p.log.Info("the table's headers column is not json or jsonb, so it is left out of the events: --column-headers headers reads it as CloudEvents extensions (a JSON object of lower-case names), and a row whose value is not one goes to the dead-letter topic",
				"table", t.String())
		}
		if err != nil {
			// On a read-only server (a standby) the missing table is not
			// the problem to report: the server is. ensureState says so,
			// and creates nothing there.
			var ro string
			if errors.Is(err, replication.ErrNoTable) && conn.QueryRow(ctx, "SHOW transaction_read_only").Scan(&ro) == nil && ro == "on" {
				if serr := ensureState(ctx, conn, g.p.log); serr != nil {
					err = serr
				}
			}
			conn.Close(context.Background())
			return nil, err
		}
		if err := ensureState(ctx, conn, g.p.log); err != nil {
			return fail(err)
		}
		// Before any session binds a table (mapping.go).
		if g.cols, err = inServerZone(qctx, conn, cfg.Columns, g.p.log); err != nil {
			return fail(err)
		}
		g.stateReady = true
	}
	lease, err := takeLease(ctx, conn, cfg, g.p.holder, pooled)
	if err != nil {
		return fail(err)
	}
	g.last = lease
	g.p.log.Info("holding the pipeline's lease", "pipeline", cfg.Replication.Slot, "holder", g.p.holder, "token", lease.token(), "through_pooler", pooled)
	return &hold{conn: conn, lease: lease, pooled: pooled}, nil
}

// release gives the last lease up, when the relay stops.
func (g *gate) release() {
	if g.last != nil {
		g.last.release(g.p.cfg, g.p.log)
	}
}
