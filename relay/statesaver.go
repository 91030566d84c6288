package relay

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/vanish"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// stateSaver runs beside a WAL session, on the session's connection: it
// keeps the lease, runs the housekeeping, saves the confirmed position and
// the published floor, moves the deleted-row account forward and checks
// the publication (run).
type stateSaver struct {
	p      *pipeline
	h      *hold
	stream *replication.Stream
	// hasSeq says the tables have the polling columns (without them there
	// is no Q, and nothing polls).
	hasSeq bool
	// cluster is the session's cluster, saved with each floor; floor is
	// where the floor saved last is told to the session (walSession.floor).
	cluster int64
	floor   *atomic.Uint64
	fs      floorSaver
	// streamed are the transactions published, whose rows it marks.
	streamed *streamMarks
}

// run records the confirmed position every few seconds, and it advances
// the published floor: a candidate is the snapshot's xmin S, the outbox
// sequence's value Q, and then the WAL insert position L; every
// transaction below S finished before L, so once the confirmed position
// passes L, all their rows are in Kafka and S is saved, with Q. A fallback
// to polling starts from that floor, so it re-sends only what was
// published since. It ends when done is closed (the stream ended) or ctx
// ends.
func (s *stateSaver) run(ctx context.Context, done <-chan struct{}) error {
	p, cfg, conn, first := s.p, s.p.cfg, s.h.conn, s.p.tables[0]
	confirmEvery := min(5*time.Second, max(time.Second, cfg.Replication.HeartbeatInterval))
	ticker := time.NewTicker(floorCheckEvery)
	defer ticker.Stop()
	var (
		g        = vanish.NewWAL(conn, first.poll, vanish.StoreAccount(first.own, conn), first.name.String(), p.log)
		pubCheck = time.Now().Add(publicationCheckEvery)
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return nil
		case <-ticker.C:
		}
		if err := s.h.keep(ctx); err != nil { // lease.go
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		first.hk.tick(ctx, conn)          // housekeeping.go
		s.streamed.mark(ctx, conn, false) // marks.go
		// Bounded, so that a dead connection ends the session instead of
		// holding it open.
		qctx, cancel := context.WithTimeout(ctx, cfg.queryTimeout())
		err := s.saveOnce(qctx, confirmEvery)
		if err == nil && s.hasSeq {
			g.Step(qctx, s.stream.Confirmed)
		}
		if err == nil && time.Now().After(pubCheck) || undefinedTable(err) {
			// A table gone (renamed, dropped) is said better by the check.
			pubCheck = time.Now().Add(publicationCheckEvery)
			if perr := s.checkPublication(qctx); perr != nil || err == nil {
				err = perr
			}
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// publicationCheckEvery is how often a WAL session checks that the
// publication still publishes every row of the pipeline's tables: a table
// that inherits from one, created since, is not published, nor is a new
// table that took an outbox table's name; the stream itself cannot see
// rows that never reach it.
const publicationCheckEvery = 2 * time.Second

// Floor candidates: one is taken every floorCandidateEvery while the
// newest one is passed, and saved as soon as the confirmed position passes
// it, which the state saver checks every floorCheckEvery without a query. The
// floor then trails the confirmed position by about floorCandidateEvery, so
// a fallback to polling re-sends about that much.
const (
	floorCandidateEvery = 500 * time.Millisecond
	floorCheckEvery     = 100 * time.Millisecond
	// A candidate the confirmed position has not passed (Kafka is down, a
	// long transaction) is replaced by a newer one only this often.
	floorStaleCandidate = 5 * time.Second
)

type floorCandidate struct {
	xmin  uint64
	seq   *int64
	lsn   pglogrepl.LSN
	taken time.Time
}

// floorSaver is what saveOnce keeps between calls.
type floorSaver struct {
	pending   []floorCandidate // taken, not yet passed, oldest first
	next      time.Time        // when the next candidate is due
	last      pglogrepl.LSN    // confirmed position last saved
	lastSaved time.Time
}

// maxFloorCandidates bounds the candidates kept while the confirmed
// position stands still; beyond it the newest is replaced.
const maxFloorCandidates = 64

// saveOnce takes a floor candidate when one is due, and saves the newest
// candidate the confirmed position has passed, with the confirmed position;
// without one, it saves a confirmed position that moved every confirmEvery.
func (ss *stateSaver) saveOnce(ctx context.Context, confirmEvery time.Duration) error {
	conn, s := ss.h.conn, &ss.fs
	now := time.Now()
	due := s.next
	if n := len(s.pending); n > 0 {
		due = later(due, s.pending[n-1].taken.Add(floorStaleCandidate))
	}
	if !now.Before(due) {
		c := floorCandidate{taken: now}
		if ss.hasSeq {
			pos, err := poll.ReadFloorCandidate(ctx, conn, ss.p.tables[0].poll)
			if err != nil {
				return err
			}
			c.xmin, c.seq, c.lsn = pos.XMin, &pos.Seq, pos.LSN
		} else {
			xmin, _, lsnText, err := poll.Snapshot(ctx, conn)
			if err != nil {
				return err
			}
			if c.lsn, err = pglogrepl.ParseLSN(lsnText); err != nil {
				return err
			}
			c.xmin = xmin
		}
		if len(s.pending) >= maxFloorCandidates {
			s.pending[len(s.pending)-1] = c
		} else {
			s.pending = append(s.pending, c)
		}
		s.next = now.Add(floorCandidateEvery)
	}
	confirmed := ss.stream.Confirmed()
	var f floorCandidate
	n := 0
	for n < len(s.pending) && s.pending[n].lsn <= confirmed {
		f = s.pending[n]
		n++
	}
	s.pending = s.pending[n:]
	if n == 0 {
		if confirmed == s.last || now.Sub(s.lastSaved) < confirmEvery {
			return nil
		}
		if err := ss.writeState(ctx, confirmed); err != nil {
			return err
		}
		s.last, s.lastSaved = confirmed, now
		return nil
	}
	ss.floor.Store(max(ss.floor.Load(), f.xmin)) // exactlyonce.go
	var id *int64
	if ss.cluster != 0 {
		id = &ss.cluster
	}
	if err := ss.h.fenced(ctx, func(q store.Querier) error {
		if err := ss.p.own().SaveFloor(ctx, q, confirmed.String(), f.xmin, f.seq, id); err != nil {
			return err
		}
		return ss.saveTableFloors(ctx, q, confirmed.String(), f.xmin, id)
	}); err != nil {
		return err
	}
	s.last, s.lastSaved = confirmed, now
	return nil
}

// writeState saves the confirmed position.
func (s *stateSaver) writeState(ctx context.Context, lsn pglogrepl.LSN) error {
	return s.h.fenced(ctx, func(q store.Querier) error { return s.p.own().SaveConfirmed(ctx, q, lsn.String()) })
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// saveTableFloors gives the other tables of a streamed pipeline the floor
// just saved in the pipeline's row: every transaction below xmin is in
// Kafka, whichever table it wrote, so polling any of them later (a
// restart in --mode poll) starts from what the WAL published for it.
func (s *stateSaver) saveTableFloors(ctx context.Context, conn store.Querier, confirmed string, xmin uint64, cluster *int64) error {
	for _, t := range s.p.tables[1:] {
		if err := t.own.SaveSetup(ctx, conn, t.name.String(), nil); err != nil {
			return err
		}
		if err := t.own.SaveFloor(ctx, conn, confirmed, xmin, nil, cluster); err != nil {
			return err
		}
	}
	return nil
}

// checkPublication fixes the publication where it is pgoutbox's, and ends
// the session with what to do where it is not.
func (s *stateSaver) checkPublication(ctx context.Context) error {
	p, cfg := s.p, s.p.cfg
	res, err := replication.EnsurePublicationFor(ctx, s.h.conn, cfg.Replication.Publication, p.tableList(), cfg.CreateSlot, cfg.Replication.Publishes())
	if err != nil {
		return err
	}
	if len(res.Fixed) > 0 {
		p.log.Error("the publication stopped publishing rows of the outbox tables while streaming, and was fixed: rows written in between (in the relations named) are not in the stream; they are in the tables",
			"publication", cfg.Replication.Publication, "problems", strings.Join(res.Problems, "; "), "ran", strings.Join(res.Fixed, " "))
	}
	return nil
}

func undefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}
