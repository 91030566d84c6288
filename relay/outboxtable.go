package relay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/store"
)

// outboxTable is one outbox table of the pipeline. A pipeline of several
// tables streams them all through one slot; polling keeps positions per
// table instead, each in a state row:
//   - the first table's in the pipeline's row, named by the slot, so that
//     a pipeline of one table that later lists more reads its state as
//     before;
//   - every other table's in a row of its own (store.TablePipeline,
//     slot/schema.table).
//
// Its fields never change once built; what lasts from one session of the
// table to the next is in the types it points to, each changed by its own
// methods only: its housekeeping, the rows left unmarked, what was said.
type outboxTable struct {
	name outbox.Table
	own  store.Pipeline
	// names is what its state row says the pipeline's tables are: all of
	// them in the pipeline's row, the table alone in its own.
	names string
	poll  poll.Config
	// mode is the mode the table is polled in: the pipeline's for the
	// first table, whose poller probes the WAL for all of them in auto
	// mode; poll for the others.
	mode Mode

	hk         *housekeeper
	unmarked   *unmarkedRows
	seqWarned  *atomic.Bool // the detector's missing sequence was said
	scanWarned *atomic.Bool // that every poll reads the whole table was said
	// shapeFit says the table passed poll.Shape.Check once, which later
	// sessions then skip: the check plans the mark, which waits for any
	// lock on the table, and a session reconnecting while one is held
	// would otherwise end at the check each time, never reaching a poll.
	shapeFit *atomic.Bool
}

// newOutboxTables are the tables of a pipeline of cfg, the first one's
// state in the pipeline's row; their housekeepers share up.
func newOutboxTables(cfg Config, tables []outbox.Table, up *upkeep) []*outboxTable {
	all := tablesOf(tables)
	out := make([]*outboxTable, len(tables))
	for i, t := range tables {
		pc := cfg.Poll
		pc.Table = t.String()
		ot := &outboxTable{name: t, own: store.Pipeline{Name: cfg.Replication.Slot}, names: all, poll: pc, mode: cfg.Mode,
			unmarked: &unmarkedRows{}, seqWarned: new(atomic.Bool), scanWarned: new(atomic.Bool), shapeFit: new(atomic.Bool)}
		if i > 0 {
			ot.own, ot.names, ot.mode = store.TablePipeline(cfg.Replication.Slot, t.String()), t.String(), ModePoll
		}
		ot.hk = &housekeeper{up: up, table: t, own: ot.own, poll: pc}
		out[i] = ot
	}
	return out
}

// tablesOf names tables, comma-separated.
func tablesOf(tables []outbox.Table) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	return strings.Join(names, ",")
}

// warnSeqOnce tells whether the detector's missing sequence is to be said:
// the first time only.
func (t *outboxTable) warnSeqOnce() bool { return !t.seqWarned.Swap(true) }

// recordMode records the mode and why in t's state row, under h's lease,
// counting switches, and clears why the relay last stopped.
func (t *outboxTable) recordMode(ctx context.Context, h *hold, mode Mode, reason store.Reason) error {
	if err := h.fenced(ctx, func(q store.Querier) error {
		return t.own.SetMode(ctx, q, t.names, mode, reason)
	}); err != nil {
		return err
	}
	if err := t.own.ClearStopped(ctx, h.conn); err != nil && !store.IsMissing(err) {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// hasPollingColumns tells whether every one of tables has the polling
// columns, which auto mode needs to poll any of them.
func hasPollingColumns(ctx context.Context, conn *pgx.Conn, tables []*outboxTable) (bool, error) {
	for _, t := range tables {
		ok, err := t.poll.HasColumns(ctx, conn)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// unmarkedRows are the order values of rows a poll session of the table
// published but could not mark (the table refused the mark, the
// connection was lost): the next session marks them before it polls, so
// they are not sent again while this process runs.
type unmarkedRows struct {
	mu   sync.Mutex
	seqs []int64
}

// keep keeps seqs for the next session.
func (u *unmarkedRows) keep(seqs []int64) {
	u.mu.Lock()
	u.seqs = seqs
	u.mu.Unlock()
}

// mark marks what was kept, through m, and forgets it once marked.
func (u *unmarkedRows) mark(ctx context.Context, m interface {
	MarkPublished(ctx context.Context, seqs []int64) error
}) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seqs) == 0 {
		return nil
	}
	if err := m.MarkPublished(ctx, u.seqs); err != nil {
		return fmt.Errorf("%d rows published before are not marked yet, and nothing more is polled until they are: %w", len(u.seqs), err)
	}
	u.seqs = nil
	return nil
}
