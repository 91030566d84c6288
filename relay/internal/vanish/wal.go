package vanish

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/store"
)

const (
	// walGapEvery is the least time between two checkpoints of the WAL
	// session; each also waits walGapFactor times the last count's
	// duration, so that counting a large table costs a few percent of one
	// connection.
	walGapEvery  = time.Second
	walGapFactor = 50
	// walGapCountLimit ends a count that would hold the state connection
	// too long (about 25 million rows at the speed measured); the session
	// then keeps no account, and says so.
	walGapCountLimit = 10 * time.Second
)

// WAL moves the checkpoint forward while the WAL is streamed: the WAL
// publishes every insert, deleted since or not. A position L is read with
// the next transaction id; once xmin reaches it, every transaction that
// may have drawn a position up to L has finished, so the rows up to L are
// present or deleted for good: they are counted then, with the delete
// counter, and the WAL position is read. Once the confirmed position
// passes that, the WAL has published every row up to L, and the reading
// becomes the new account.
// Only the WAL session's state saver uses it.
type WAL struct {
	// What it is handed: the state saver's connection, the polled
	// table's columns, where the account is kept, how it speaks.
	conn  *pgx.Conn
	cfg   poll.Config
	acct  Account
	table string
	log   *slog.Logger

	census *poll.Census
	seq    poll.Sequence
	off    bool
	// last and nextXID are the reading waiting for xmin; counted is set once
	// known and deletes are counted and lsn read.
	last           int64
	nextXID        uint64
	counted        bool
	known, deletes int64
	files          string
	lsn            pglogrepl.LSN
	waiting        bool
	next           time.Time
}

// NewWAL keeps the account of cfg's table in acct, reading on conn.
func NewWAL(conn *pgx.Conn, cfg poll.Config, acct Account, table string, log *slog.Logger) *WAL {
	return &WAL{conn: conn, cfg: cfg, acct: acct, table: table, log: log}
}

// Step advances g one step; confirmed is the stream's confirmed position.
// A failure only stops the checkpoints of this session (the next poll
// phase then judges from an older one, or starts a new account).
func (g *WAL) Step(ctx context.Context, confirmed func() pglogrepl.LSN) {
	if g.off {
		return
	}
	err := g.step(ctx, confirmed)
	if err != nil && ctx.Err() == nil {
		g.off = true
		if !store.IsMissing(err) && !errors.Is(err, poll.ErrNoSequence) {
			g.log.Warn("cannot keep the account of deleted rows while streaming; a later poll phase judges rows deleted meanwhile from an older position",
				"table", g.table, "err", err)
		}
	}
}

func (g *WAL) step(ctx context.Context, confirmed func() pglogrepl.LSN) error {
	now := time.Now()
	switch {
	case g.census == nil:
		p, err := poll.New(ctx, g.conn, g.cfg)
		if err != nil {
			return err
		}
		c := p.Census()
		if g.seq, err = c.Sequence(ctx); err != nil {
			return err
		}
		g.census = c
	case !g.waiting:
		if now.Before(g.next) {
			return nil
		}
		pos, err := g.census.Positions(ctx, g.seq, 0)
		if err != nil {
			return err
		}
		g.last, g.nextXID, g.counted, g.waiting = pos.Last, pos.Next, false, true
	case !g.counted:
		xmin, _, lsn, err := poll.Snapshot(ctx, g.conn)
		if err != nil || xmin < g.nextXID {
			return err
		}
		if g.lsn, err = pglogrepl.ParseLSN(lsn); err != nil {
			return err
		}
		began := time.Now()
		var files poll.Files
		if g.known, g.deletes, files, err = g.census.ReadKnown(ctx, g.last, walGapCountLimit); err != nil {
			return err
		}
		g.files = filesKey(files)
		g.counted = true
		g.next = now.Add(max(walGapEvery, walGapFactor*time.Since(began)))
	case confirmed() >= g.lsn:
		g.waiting = false
		return saveCheckpoint(ctx, g.acct,
			checkpoint{seq: g.last, knownSeq: g.last, known: g.known, deletes: g.deletes, files: g.files})
	}
	return nil
}
