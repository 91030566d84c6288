package relay

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/poll"
)

const (
	// markEvery is how often a WAL session marks, in a table whose own
	// column marks published rows, the rows it published; markBatch rows
	// per statement, as retention deletes them.
	markEvery = time.Second
	markBatch = 1000
	// markRetry is how long marking waits after a failure (a role without
	// UPDATE, a value the column refuses) before it tries again, with
	// every transaction published meanwhile.
	markRetry = 10 * time.Second
	// maxMarkXIDs bounds the transactions waiting for their rows to be
	// marked (while marking fails); past it, newer ones wait for the
	// floor instead.
	maxMarkXIDs = 100_000
)

// streamMarks collects the transactions a WAL session published (every
// record acked or, exactly-once, their Kafka transaction committed) until
// their rows are marked in the tables whose own column marks published
// rows (mark). nil, and every method a no-op, when no table of the
// pipeline has such a column.
type streamMarks struct {
	// tables are the tables marked; the first table's housekeeper keeps
	// when marking last ran.
	tables []*outboxTable
	first  *housekeeper

	mu   sync.Mutex
	xids []uint32
}

func newStreamMarks(tables []*outboxTable) *streamMarks {
	s := &streamMarks{first: tables[0].hk}
	for _, t := range tables {
		if t.poll.OwnMark() {
			s.tables = append(s.tables, t)
		}
	}
	if len(s.tables) == 0 {
		return nil
	}
	return s
}

func (s *streamMarks) add(xids ...uint32) {
	if s == nil || len(xids) == 0 {
		return
	}
	s.mu.Lock()
	if room := maxMarkXIDs - len(s.xids); room > 0 {
		s.xids = append(s.xids, xids[:min(len(xids), room)]...)
	}
	s.mu.Unlock()
}

// take returns what was collected and starts over.
func (s *streamMarks) take() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	xids := s.xids
	s.xids = nil
	return xids
}

// mark sets, in each table whose own column marks published rows (a status
// column, --column-published), that mark on the rows a WAL session
// published: those of the transactions collected, and, in the first
// table, those below the published floor and at or above wal_start_xid, as
// retention tells them (the rows of earlier sessions, whose transactions
// this one never saw). The stream does not mark rows, and the team's table
// would otherwise keep them pending: their own poller, started again,
// would send them again, and their cleanup keyed on the mark would keep
// them. In batches of markBatch, each a short statement, every markEvery
// unless now; transactions whose rows were not all marked are kept for the
// next time. A failure is logged, once while it lasts, and retried after
// markRetry.
func (s *streamMarks) mark(ctx context.Context, conn *pgx.Conn, now bool) {
	if s == nil || conn.IsClosed() || !s.first.markDue(now) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.first.up.cfg.queryTimeout())
	defer cancel()
	xids := s.take()
	complete, failed := true, false
	for _, t := range s.tables {
		done, err := t.hk.markStreamed(ctx, conn, xids)
		complete = complete && done && err == nil
		failed = failed || err != nil
	}
	if !complete {
		s.add(xids...)
	}
	if failed {
		s.first.markLater()
	}
}

// markDue tells whether marking is due (always when now), and notes that
// it runs.
func (hk *housekeeper) markDue(now bool) bool {
	if !now && time.Since(hk.lastMark) < markEvery {
		return false
	}
	hk.lastMark = time.Now()
	return true
}

// markLater puts the next marking off by markRetry, after a failure.
func (hk *housekeeper) markLater() { hk.lastMark = time.Now().Add(markRetry - markEvery) }

// markStreamed marks the table's rows that xids and, where its state row
// records them, the slot's start and the published floor name, and says a
// failure once while it lasts. done says no such row is left.
func (hk *housekeeper) markStreamed(ctx context.Context, conn *pgx.Conn, xids []uint32) (done bool, err error) {
	total, done, err := hk.markRows(ctx, conn, xids)
	log := hk.up.log
	switch {
	case err != nil && ctx.Err() == nil:
		if msg := err.Error(); msg != hk.markFailed {
			hk.markFailed = msg
			log.Warn("marking the rows the WAL published failed; they stay pending in the table (they are in Kafka), and marking is retried", "table", hk.table.String(), "err", err)
		}
	case err == nil:
		if hk.markFailed != "" {
			hk.markFailed = ""
			log.Info("marking the rows the WAL published works again", "table", hk.table.String())
		}
	}
	if total > 0 {
		log.Debug("marked the rows the WAL published", "table", hk.table.String(), "rows", total)
	}
	return done, err
}

// markRows is markStreamed's work.
func (hk *housekeeper) markRows(ctx context.Context, conn *pgx.Conn, xids []uint32) (total int64, done bool, err error) {
	b, err := hk.own.Published(ctx, conn)
	if err != nil {
		return 0, false, err
	}
	s := poll.Streamed{XIDs: xids}
	if b.Start != nil && b.Floor != nil {
		s.Start, s.Floor = b.Start, b.Floor
	}
	if s.Start == nil && len(xids) == 0 {
		return 0, true, nil
	}
	total, err = inBatches(ctx, hk.up.cfg.queryTimeout()/3, markBatch, func() (int64, error) {
		n, err := hk.poll.MarkStreamed(ctx, conn, s, markBatch)
		done = n < markBatch
		return n, err
	})
	return total, done && err == nil, err
}
