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

// streamedTxns collects the transactions a WAL session published (every
// record acked or, exactly-once, their Kafka transaction committed) until
// their rows are marked in the tables whose own column marks published
// rows. nil, and every method a no-op, when no table of the pipeline has
// such a column.
type streamedTxns struct {
	mu   sync.Mutex
	xids []uint32
}

func newStreamedTxns(tables []*outboxTable) *streamedTxns {
	for _, t := range tables {
		if t.poll.OwnMark() {
			return &streamedTxns{}
		}
	}
	return nil
}

func (s *streamedTxns) add(xids ...uint32) {
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
func (s *streamedTxns) take() []uint32 {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	xids := s.xids
	s.xids = nil
	return xids
}

// markStreamed sets, in each table whose own column marks published rows
// (a status column, --column-published), that mark on the rows a WAL
// session published: those of the transactions streamed collected, and,
// in the first table, those below the published floor and at or above
// wal_start_xid, as retention tells them (the rows of earlier sessions,
// whose transactions this one never saw). The stream does not mark rows,
// and the team's table would otherwise keep them pending: their own
// poller, started again, would send them again, and their cleanup keyed
// on the mark would keep them. In batches of markBatch, each a short
// statement, every markEvery unless now; transactions whose rows were not
// all marked are kept for the next time. A failure is logged, once while
// it lasts, and retried after markRetry.
func (p *pipeline) markStreamed(ctx context.Context, conn *pgx.Conn, streamed *streamedTxns, now bool) {
	first := p.tables[0].hk
	if streamed == nil || conn.IsClosed() || !now && time.Since(first.lastMark) < markEvery {
		return
	}
	first.lastMark = time.Now()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.queryTimeout())
	defer cancel()
	xids := streamed.take()
	complete, failed := true, false
	for _, t := range p.tables {
		if !t.poll.OwnMark() {
			continue
		}
		total, done, err := p.markTable(ctx, conn, t, xids)
		complete = complete && done && err == nil
		failed = failed || err != nil
		hk := t.hk
		switch {
		case err != nil && ctx.Err() == nil:
			if msg := err.Error(); msg != hk.markFailed {
				hk.markFailed = msg
				p.log.Warn("marking the rows the WAL published failed; they stay pending in the table (they are in Kafka), and marking is retried", "table", t.name.String(), "err", err)
			}
		case err == nil:
			if hk.markFailed != "" {
				hk.markFailed = ""
				p.log.Info("marking the rows the WAL published works again", "table", t.name.String())
			}
		}
		if total > 0 {
			p.log.Debug("marked the rows the WAL published", "table", t.name.String(), "rows", total)
		}
	}
	if !complete {
		streamed.add(xids...)
	}
	if failed {
		first.lastMark = time.Now().Add(markRetry - markEvery)
	}
}

// markTable marks t's rows that xids and, where t records them, the slot's
// start and the published floor name. done says no such row is left.
func (p *pipeline) markTable(ctx context.Context, conn *pgx.Conn, t *outboxTable, xids []uint32) (total int64, done bool, err error) {
	b, err := t.own.Published(ctx, conn)
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
	total, err = p.inBatches(ctx, markBatch, func() (int64, error) {
		n, err := t.poll.MarkStreamed(ctx, conn, s, markBatch)
		done = n < markBatch
		return n, err
	})
	return total, done && err == nil, err
}
