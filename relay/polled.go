package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
)

// polledSince marks the last poll transaction's rows (last) published,
// then reads the rows of t polling marked that the stream may replay: at
// or above the published floor, up to maxPolledSeqs of them, newest
// first; and the WAL's end as it is now, which every one of them committed
// before. h is the session's hold, timeout bounds it all.
func polledSince(ctx context.Context, h *hold, t *outboxTable, timeout time.Duration, last []int64, log *slog.Logger) (polledSeqs, pglogrepl.LSN, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn := h.conn
	poller, err := poll.New(ctx, conn, t.poll)
	if err != nil {
		return nil, 0, err
	}
	h.fence(poller)
	if err := poller.MarkPublished(ctx, last); err != nil {
		return nil, 0, err
	}
	floor, err := t.own.Floor(ctx, conn)
	if err != nil {
		return nil, 0, err
	}
	_, _, lsn, err := poll.Snapshot(ctx, conn)
	if err != nil {
		return nil, 0, err
	}
	until, err := pglogrepl.ParseLSN(lsn)
	if err != nil {
		return nil, 0, err
	}
	seqs, err := poller.Published(ctx, floor, maxPolledSeqs)
	if err != nil {
		return nil, 0, err
	}
	if len(seqs) == maxPolledSeqs {
		log.Warn("polling published more rows than the WAL session keeps to skip; the stream may send again the oldest of them",
			"kept", maxPolledSeqs)
	}
	var set polledSeqs
	for _, seq := range seqs {
		set.add(seq)
	}
	return set, until, nil
}

// maxPolledSeqs bounds what a poll phase remembers for the WAL session after
// it: beyond it, the WAL simply sends the rest again.
const maxPolledSeqs = 1 << 20

// polledRows are the rows a poll phase published, handed to the WAL
// session after it, which skips them until its stream passes until.
type polledRows struct {
	seqs  polledSeqs
	until pglogrepl.LSN
	// byTable are, in a pipeline of several tables, each table's rows by
	// its name (schema.table); seqs is then unused.
	byTable map[string]polledSeqs
}

// add records a row the poll phase published.
func (p *polledRows) add(seq int64) { p.seqs.add(seq) }

// ended records where the poll phase ended: every row it published
// committed before the WAL's insert position now, read on conn; once the
// WAL passes it, none can come again. Where that cannot be read, nothing
// is skipped.
func (p *polledRows) ended(ctx context.Context, conn *pgx.Conn) {
	var lsn string
	if e := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); e == nil {
		p.until, _ = pglogrepl.ParseLSN(lsn)
	} else {
		p.seqs = nil // cannot tell when to stop skipping: skip nothing
	}
}

// endedByTable is ended for a poll group: every table's rows, by its name.
// Where the position cannot be read, the rows kept before are kept.
func (p *polledRows) endedByTable(ctx context.Context, conn *pgx.Conn, byTable map[string]polledSeqs) {
	var lsn string
	if e := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); e == nil {
		p.forget()
		p.until, _ = pglogrepl.ParseLSN(lsn)
		p.byTable = byTable
	}
}

// of returns the set the WAL row c would be in.
func (p *polledRows) of(c *outbox.Change) polledSeqs {
	if p.byTable == nil {
		return p.seqs
	}
	return p.byTable[outbox.Table{Schema: c.Relation.Schema, Name: c.Relation.Name}.String()]
}

// pending tells whether any polled row may still come from the WAL.
func (p *polledRows) pending() bool { return len(p.seqs) > 0 || len(p.byTable) > 0 }

// passed tells whether a commit at lsn is past every polled row the
// stream may replay: then none is left to skip.
func (p *polledRows) passed(lsn pglogrepl.LSN) bool { return p.pending() && lsn > p.until }

// rows are the rows of a poll session of one table.
func (p *polledRows) rows() polledSeqs { return p.seqs }

// forget stops the skipping: the stream is past what polling published.
func (p *polledRows) forget() { p.seqs, p.byTable = nil, nil }

// polledSeqs are the rows a poll phase published (Kafka acked them). When
// the relay returns to the WAL, the slot replays those transactions; the
// WAL session skips these rows instead of publishing them twice. Skipping
// an acknowledged row loses nothing and keeps order: it was delivered
// before everything the WAL publishes after it.
type polledSeqs map[int64]struct{}

func (p *polledSeqs) add(seq int64) {
	if *p == nil {
		*p = make(polledSeqs)
	}
	if len(*p) < maxPolledSeqs {
		(*p)[seq] = struct{}{}
	}
}

// take reports whether seq was published by polling, and forgets it.
func (p polledSeqs) take(seq int64) bool {
	if _, ok := p[seq]; ok {
		delete(p, seq)
		return true
	}
	return false
}
