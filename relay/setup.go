package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// ErrNoState means pgoutbox's own tables are missing or older than this
// binary, and could not be brought up to date.
var ErrNoState = store.ErrNoState

// ensureState brings pgoutbox's own tables (state, dead letters) to this
// binary's version, so that run alone works where migrate never ran, as
// Debezium needs no such step. The outbox table is not touched. A role
// that may not create tables is told what to run or grant instead.
func ensureState(ctx context.Context, conn *pgx.Conn, log *slog.Logger) error {
	from, to, err := store.Ensure(ctx, conn)
	if err != nil {
		return err
	}
	if to != 0 {
		log.Info("pgoutbox's own tables brought up to date", "from_version", from, "to_version", to)
	}
	return nil
}

// SetupResult says what Setup found and did.
type SetupResult struct {
	// Publication is what setting up the publication did: created it,
	// fixed one of pgoutbox's (and what was wrong), or warns of.
	Publication replication.PublicationSetup

	SlotCreated bool
	// SlotFailover: the created slot is a failover slot.
	SlotFailover bool
	SlotLSN      pglogrepl.LSN // consistent point of a created slot
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
	table := tablesOf(tables)
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
	pub, err := replication.EnsurePublicationFor(ctx, conn, cfg.Publication, tables, create, cfg.Publishes())
	if err != nil {
		return res, err
	}
	res.Publication = pub
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
		failover := cfg.Failover
		if cfg.FailoverWhereSupported {
			major, err := replication.ServerMajor(ctx, conn)
			if err != nil {
				return res, err
			}
			failover, _ = replication.SlotFailover(cfg, major)
		}
		if res.SlotLSN, err = replication.CreateSlot(ctx, conn, cfg.Slot, failover); err != nil {
			return res, err
		}
		res.SlotFailover = failover
		res.SlotCreated = true
	}
	if err := own.SaveSetup(ctx, conn, table, lsnArg(res.SlotLSN, slot.ConfirmedLSN)); err != nil {
		return res, err
	}
	if res.SlotCreated {
		if err := saveWALStart(ctx, conn, cfg.Slot, true); err != nil { // housekeeping.go
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

// setup runs Setup for the WAL session and logs what it created. In auto
// mode with the polling columns (canPoll), a slot it creates (the first,
// or one replacing a lost slot) is not streamed at once: the handoff it
// returns first polls everything that committed before the slot's
// consistent point.
func (s *walSession) setup(ctx context.Context, canPoll bool) (*handoff, error) {
	p, cfg, conn := s.p, s.p.cfg, s.h.conn
	res, err := Setup(ctx, conn, cfg.Replication, cfg.CreateSlot, canPoll)
	if err != nil {
		return nil, err
	}
	p.logPublication(res.Publication)
	if res.SlotReplaced {
		p.log.Warn("slot was lost and has been replaced; polling publishes what committed in between", "slot", cfg.Replication.Slot, "consistent_lsn", res.SlotLSN.String())
		if err := p.own().CountSlotLoss(ctx, conn); err != nil {
			return nil, err
		}
	} else if res.SlotCreated {
		p.log.Info("slot created", "slot", cfg.Replication.Slot, "consistent_lsn", res.SlotLSN.String(), "failover", res.SlotFailover)
	}
	if res.SlotCreated && cfg.Replication.FailoverWhereSupported && !res.SlotFailover {
		p.log.Warn("slot created without failover: the server predates failover slots (PostgreSQL 17), so a promoted standby lacks it", "slot", cfg.Replication.Slot)
	}
	h, err := p.own().Handoff(ctx, conn)
	if err != nil {
		return nil, err
	}
	maxSeq := h.Seq
	if !h.Pending {
		return nil, nil
	}
	if !canPoll {
		p.log.Warn("a handoff to this slot is unfinished: rows committed before the slot was created may be unpublished; run in --mode auto (with the polling columns) to publish them",
			"slot", cfg.Replication.Slot)
		return nil, nil
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
		pos, err := poll.ReadFloorCandidate(ctx, conn, p.tables[0].poll)
		if err != nil {
			return nil, err
		}
		xmax, maxSeq = pos.XMax, &pos.Seq
		if err := p.own().SaveHandoffBounds(ctx, conn, xmax, pos.Seq); err != nil {
			return nil, err
		}
	} else if !res.SlotCreated {
		p.log.Info("resuming an unfinished handoff", "slot", cfg.Replication.Slot)
	}
	return &handoff{xmax: xmax, maxSeq: *maxSeq, slotLSN: res.SlotLSN, replaced: res.SlotReplaced}, nil
}

// logPublication says what setting up the publication did.
func (p *pipeline) logPublication(ps replication.PublicationSetup) {
	switch {
	case ps.AllTables:
		p.log.Info("publication created for all tables: a table created later that the patterns match is captured from its first row",
			"publication", p.cfg.Replication.Publication, "tables", p.names())
	case ps.Created:
		p.log.Info("publication created", "publication", p.cfg.Replication.Publication, "tables", p.names())
	}
	if len(ps.Fixed) > 0 {
		p.log.Warn("publication fixed: "+strings.Join(ps.Problems, "; "), "publication", p.cfg.Replication.Publication,
			"tables", p.names(), "ran", strings.Join(ps.Fixed, " "))
	}
	for _, w := range ps.Warnings {
		p.log.Warn(w, "publication", p.cfg.Replication.Publication)
	}
}
