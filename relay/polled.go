package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
)

// polledSince marks the last poll transaction's rows (last) published,
// then reads the rows of t polling marked that the stream may replay: at
// or above the published floor, up to maxPolledSeqs of them, newest
// first; and the WAL's end as it is now, which every one of them committed
// before. h is the session's hold, timeout bounds it all.
func polledSince(ctx context.Context, h *hold, t *outboxTable, timeout time.Duration, last []int64, log *slog.Logger) (flow.Seqs, pglogrepl.LSN, error) {
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
	seqs, err := poller.Published(ctx, floor, flow.MaxPolledSeqs)
	if err != nil {
		return nil, 0, err
	}
	if len(seqs) == flow.MaxPolledSeqs {
		log.Warn("polling published more rows than the WAL session keeps to skip; the stream may send again the oldest of them",
			"kept", flow.MaxPolledSeqs)
	}
	var set flow.Seqs
	for _, seq := range seqs {
		set.Add(seq)
	}
	return set, until, nil
}

// endPolled records where a poll phase ended in polled: every row it
// published committed before the WAL's insert position now, read on conn;
// once the WAL passes it, none can come again. Where that cannot be read,
// nothing is skipped.
func endPolled(ctx context.Context, conn *pgx.Conn, polled *flow.Polled) {
	if lsn, err := walInsertLSN(ctx, conn); err == nil {
		polled.EndAt(lsn)
	} else {
		polled.Unknown() // cannot tell when to stop skipping: skip nothing
	}
}

// endPolledByTable is endPolled for a poll group: every table's rows, by
// its name. Where the position cannot be read, the rows kept before are
// kept.
func endPolledByTable(ctx context.Context, conn *pgx.Conn, polled *flow.Polled, byTable map[string]flow.Seqs) {
	if lsn, err := walInsertLSN(ctx, conn); err == nil {
		polled.EndByTable(lsn, byTable)
	}
}

// walInsertLSN is the WAL's insert position now.
func walInsertLSN(ctx context.Context, conn *pgx.Conn) (pglogrepl.LSN, error) {
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(lsn)
}
