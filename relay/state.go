package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/vanish"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// ErrNoState means pgoutbox's own tables are missing or older than this
// binary, and could not be brought up to date.
var ErrNoState = store.ErrNoState

// own is the pipeline's rows in pgoutbox's own tables: the state row
// named by the slot, or, for a table after the first of a pipeline of
// several, that table's own row (tables.go).
func (r *Relay) own() store.Pipeline {
	if r.stateName != "" {
		return store.Pipeline{Name: r.stateName}
	}
	return store.Pipeline{Name: r.cfg.Replication.Slot}
}

// clusterCheck is the cluster check of the relay's table (cluster.go).
func (r *Relay) clusterCheck() clusterCheck {
	return clusterCheck{own: r.own(), table: r.table, poll: r.cfg.Poll, pipeline: r.cfg.Replication.Slot, log: r.log}
}

// ensureState brings pgoutbox's own tables (state, dead letters) to this
// binary's version, so that run alone works where migrate never ran, as
// Debezium needs no such step. The outbox table is not touched. A role
// that may not create tables is told what to run or grant instead.
func (r *Relay) ensureState(ctx context.Context, conn *pgx.Conn) error {
	from, to, err := store.Ensure(ctx, conn)
	if err != nil {
		return err
	}
	if to != 0 {
		r.log.Info("pgoutbox's own tables brought up to date", "from_version", from, "to_version", to)
	}
	return nil
}

// SetupResult says what Setup found and did.
type SetupResult struct {
	PublicationCreated bool
	// PublicationFixed are the statements that fixed a publication of
	// pgoutbox's, and PublicationProblems what was wrong with it.
	PublicationFixed, PublicationProblems []string

	SlotCreated bool
	SlotLSN     pglogrepl.LSN // consistent point of a created slot
	// SlotReplaced is set when the created slot replaces one that was lost
	// or invalidated: rows committed in between are in no slot.
	SlotReplaced bool
}

// Setup makes sure the pipeline can stream: the server allows logical
// replication, the publication covers the outbox table, and the slot
// exists. With create, a missing publication or slot is created. A slot
// that existed before and is now gone (or invalidated) is ErrSlotLost,
// because the rows committed since need polling, not just a new slot.
// With handoff the caller promises that polling: Setup then replaces a
// lost slot, and before it creates any slot it records a pending handoff in
// the state table, so that a restart resumes the polling instead of
// skipping what committed before the slot.
func Setup(ctx context.Context, conn *pgx.Conn, cfg replication.Config, create, handoff bool) (SetupResult, error) {
	var res SetupResult
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	tables, _ := cfg.AllTables()
	table := tableNames(tables)
	own := store.Pipeline{Name: cfg.Slot}
	known, lastLSN, err := own.Check(ctx, conn)
	if err != nil {
		return res, err
	}

	slot, err := replication.SlotStatus(ctx, conn, cfg.Slot)
	slotExists := err == nil
	if err != nil && !errors.Is(err, replication.ErrSlotMissing) {
		return res, err
	}
	ready, err := replication.Inspect(ctx, conn)
	if err != nil {
		return res, err
	}
	if err := ready.Err(slotExists); err != nil {
		return res, err
	}
	// Whether the role may stream is found by trying: managed services
	// grant it through a role of their own, not the attribute.
	if err := replication.TryReplication(ctx, conn, cfg.DatabaseURL); err != nil {
		return res, err
	}
	if slotExists && slot.WALStatus == "lost" {
		if !handoff {
			return res, fmt.Errorf("%w: slot %s (wal_status lost): WAL it needed was removed", replication.ErrSlotInvalidated, cfg.Slot)
		}
		if err := replication.DropSlot(ctx, conn, cfg.Slot); err != nil {
			return res, err
		}
		slotExists, res.SlotReplaced = false, true
	}
	if !slotExists && known && lastLSN != nil {
		if !handoff {
			return res, fmt.Errorf("%w: slot %s last confirmed %s; rows committed since are not in any slot. Run with --mode auto to publish them by polling, or accept the gap with: pgoutbox slot create --force", ErrSlotLost, cfg.Slot, *lastLSN)
		}
		res.SlotReplaced = true
	}
	pub, err := replication.EnsurePublicationFor(ctx, conn, cfg.Publication, tables, create)
	if err != nil {
		return res, err
	}
	res.PublicationCreated, res.PublicationFixed, res.PublicationProblems = pub.Created, pub.Fixed, pub.Problems
	if !slotExists {
		if !create && !res.SlotReplaced {
			return res, fmt.Errorf("%w: %s: run pgoutbox slot create", replication.ErrSlotMissing, cfg.Slot)
		}
		if handoff {
			// Recorded before the slot exists: whatever happens next, the
			// next start knows the rows before the slot still need polling.
			if err := own.PendHandoff(ctx, conn, table); err != nil {
				return res, err
			}
		}
		// The publication exists before the slot's consistent point, so
		// pgoutput finds it for every change the slot will decode.
		if res.SlotLSN, err = replication.CreateSlot(ctx, conn, cfg.Slot, cfg.Failover); err != nil {
			return res, err
		}
		res.SlotCreated = true
	}
	if err := own.SaveSetup(ctx, conn, table, lsnArg(res.SlotLSN, slot.ConfirmedLSN)); err != nil {
		return res, err
	}
	if res.SlotCreated {
		if err := saveWALStart(ctx, conn, cfg.Slot, true); err != nil { // retention.go
			return res, err
		}
	}
	return res, nil
}

func lsnArg(lsns ...pglogrepl.LSN) *string {
	for _, l := range lsns {
		if l != 0 {
			s := l.String()
			return &s
		}
	}
	return nil
}

// prepare runs Setup for a session and logs what it created. In auto mode
// with the polling columns, a slot it creates (the first, or one replacing
// a lost slot) is not streamed at once: a handoff first polls everything
// that committed before the slot's consistent point.
func (r *Relay) prepare(ctx context.Context, conn *pgx.Conn, canPoll bool) error {
	res, err := Setup(ctx, conn, r.cfg.Replication, r.cfg.CreateSlot, canPoll)
	if err != nil {
		return err
	}
	r.logPublication(res.PublicationCreated, res.PublicationFixed, res.PublicationProblems)
	if res.SlotReplaced {
		r.log.Warn("slot was lost and has been replaced; polling publishes what committed in between", "slot", r.cfg.Replication.Slot, "consistent_lsn", res.SlotLSN.String())
		if err := r.own().CountSlotLoss(ctx, conn); err != nil {
			return err
		}
	} else if res.SlotCreated {
		r.log.Info("slot created", "slot", r.cfg.Replication.Slot, "consistent_lsn", res.SlotLSN.String())
	}
	h, err := r.own().Handoff(ctx, conn)
	if err != nil {
		return err
	}
	maxSeq := h.Seq
	if !h.Pending {
		return nil
	}
	if !canPoll {
		r.log.Warn("a handoff to this slot is unfinished: rows committed before the slot was created may be unpublished; run in --mode auto (with the polling columns) to publish them",
			"slot", r.cfg.Replication.Slot)
		return nil
	}
	var xmax uint64
	if h.XMax != nil {
		xmax = *h.XMax
	}
	if xmax == 0 || maxSeq == nil {
		// Read after the slot exists: every transaction that committed
		// before its consistent point is below xmax, and every row that
		// existed then has a seq at or below pos.Seq; rows copied from
		// another cluster keep its transaction ids, which may lie above
		// xmax, so the seq bound covers them. A later reading (after a
		// restart) only covers more.
		pos, err := poll.ReadFloorCandidate(ctx, conn, r.cfg.Poll)
		if err != nil {
			return err
		}
		xmax, maxSeq = pos.XMax, &pos.Seq
		if err := r.own().SaveHandoffBounds(ctx, conn, xmax, pos.Seq); err != nil {
			return err
		}
	} else if !res.SlotCreated {
		r.log.Info("resuming an unfinished handoff", "slot", r.cfg.Replication.Slot)
	}
	return &handoffError{xmax: xmax, maxSeq: *maxSeq, slotLSN: res.SlotLSN, replaced: res.SlotReplaced}
}

// publicationCheckEvery is how often a WAL session checks that the
// publication still publishes every row of the pipeline's tables: a table
// that inherits from one, created since, is not published, nor is a new
// table that took an outbox table's name; the stream itself cannot see
// rows that never reach it.
const publicationCheckEvery = 2 * time.Second

// checkPublication fixes the publication where it is pgoutbox's, and ends
// the session with what to do where it is not.
func (r *Relay) checkPublication(ctx context.Context, conn *pgx.Conn) error {
	res, err := replication.EnsurePublicationFor(ctx, conn, r.cfg.Replication.Publication, r.tables, r.cfg.CreateSlot)
	if err != nil {
		return err
	}
	if len(res.Fixed) > 0 {
		r.log.Error("the publication stopped publishing rows of the outbox tables while streaming, and was fixed: rows written in between (in the relations named) are not in the stream; they are in the tables",
			"publication", r.cfg.Replication.Publication, "problems", strings.Join(res.Problems, "; "), "ran", strings.Join(res.Fixed, " "))
	}
	return nil
}

func undefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

// logPublication says what setting up the publication did.
func (r *Relay) logPublication(created bool, fixed, problems []string) {
	if created {
		r.log.Info("publication created", "publication", r.cfg.Replication.Publication, "tables", r.tableNames())
	}
	if len(fixed) > 0 {
		r.log.Warn("publication fixed: "+strings.Join(problems, "; "), "publication", r.cfg.Replication.Publication,
			"tables", r.tableNames(), "ran", strings.Join(fixed, " "))
	}
}

// Floor candidates: one is taken every floorCandidateEvery while the
// newest one is passed, and saved as soon as the confirmed position passes
// it, which saveState checks every floorCheckEvery without a query. The
// floor then trails the confirmed position by about floorCandidateEvery, so
// a fallback to polling re-sends about that much.
const (
	floorCandidateEvery = 500 * time.Millisecond
	floorCheckEvery     = 100 * time.Millisecond
	// A candidate the confirmed position has not passed (Kafka is down, a
	// long transaction) is replaced by a newer one only this often.
	floorStaleCandidate = 5 * time.Second
)

// saveState runs beside a WAL session. It records the confirmed position
// every few seconds, and it advances the published floor: a candidate is
// the snapshot's xmin S, the outbox sequence's value Q, and then the WAL
// insert position L; every transaction below S finished before L, so once
// the confirmed position passes L, all their rows are in Kafka and S is
// saved, with Q. A fallback to polling starts from that floor, so it
// re-sends only what was published since. hasSeq says the table has the
// polling columns (without them there is no Q, and nothing polls).
func (r *Relay) saveState(ctx context.Context, done <-chan struct{}, conn *pgx.Conn, stream *replication.Stream, hasSeq bool) error {
	confirmEvery := min(5*time.Second, max(time.Second, r.cfg.Replication.HeartbeatInterval))
	ticker := time.NewTicker(floorCheckEvery)
	defer ticker.Stop()
	var (
		s        floorSaver
		g        = vanish.NewWAL(conn, r.cfg.Poll, vanish.StoreAccount(r.own(), conn), r.table.String(), r.log)
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
		if err := r.keepLease(ctx, conn); err != nil { // lease.go
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		r.housekeeping(ctx, conn) // retention.go
		// Bounded, so that a dead connection ends the session instead of
		// holding it open.
		qctx, cancel := context.WithTimeout(ctx, r.queryTimeout())
		err := r.saveOnce(qctx, conn, stream, &s, hasSeq, confirmEvery)
		if err == nil && hasSeq {
			g.Step(qctx, stream.Confirmed)
		}
		if err == nil && time.Now().After(pubCheck) || undefinedTable(err) {
			// A table gone (renamed, dropped) is said better by the check.
			pubCheck = time.Now().Add(publicationCheckEvery)
			if perr := r.checkPublication(qctx, conn); perr != nil || err == nil {
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
func (r *Relay) saveOnce(ctx context.Context, conn *pgx.Conn, stream *replication.Stream, s *floorSaver, hasSeq bool, confirmEvery time.Duration) error {
	now := time.Now()
	due := s.next
	if n := len(s.pending); n > 0 {
		due = later(due, s.pending[n-1].taken.Add(floorStaleCandidate))
	}
	if !now.Before(due) {
		c := floorCandidate{taken: now}
		if hasSeq {
			pos, err := poll.ReadFloorCandidate(ctx, conn, r.cfg.Poll)
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
	confirmed := stream.Confirmed()
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
		if err := r.writeState(ctx, conn, confirmed); err != nil {
			return err
		}
		s.last, s.lastSaved = confirmed, now
		return nil
	}
	r.walFloor.Store(max(r.walFloor.Load(), f.xmin)) // exactlyonce.go
	var id *int64
	if r.clusterID != 0 {
		id = &r.clusterID
	}
	if err := r.fenced(ctx, conn, func(q store.Querier) error {
		if err := r.own().SaveFloor(ctx, q, confirmed.String(), f.xmin, f.seq, id); err != nil {
			return err
		}
		return r.saveTableFloors(ctx, q, confirmed.String(), f.xmin, id) // tables.go
	}); err != nil {
		return err
	}
	s.last, s.lastSaved = confirmed, now
	return nil
}

func (r *Relay) writeState(ctx context.Context, conn *pgx.Conn, lsn pglogrepl.LSN) error {
	return r.fenced(ctx, conn, func(q store.Querier) error { return r.own().SaveConfirmed(ctx, q, lsn.String()) })
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
