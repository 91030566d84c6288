package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/store"
)

// pollGroup polls every table of a pipeline of several, each in a poll
// session of its own (with its own connection, poller, floor and account
// of deleted rows, in its own state row), under one lease that the group
// holds for all of them, until ctx ends or one fails; the first failure
// stops the others. In auto mode the first table's probe ends it for all.
// With a handoff, each table polls until everything of it that committed
// before the new slot is published; only once every table is done is the
// handoff ended, in the pipeline's row, so a stop before that resumes it
// for all tables.
//
// The rows each table published are handed to the WAL session after it in
// polled, by table, so that the slot's replay does not send them again.
type pollGroup struct {
	p          *pipeline
	k          Broker
	gate       *gate
	now        *modeNow
	reason     store.Reason
	handoff    *handoff
	polled     *flow.Polled
	probeEvery time.Duration
}

func (g *pollGroup) run(ctx context.Context) (transition, error) {
	p := g.p
	guard, err := g.gate.enter(ctx)
	if err != nil {
		return transition{}, err
	}
	defer guard.close()
	handoffs := make([]*handoff, len(p.tables))
	if g.handoff != nil {
		if current, err := handoffCurrent(ctx, guard.conn, p.own(), g.handoff); err != nil {
			return transition{}, err
		} else if !current {
			return handoffGone(), nil
		}
		// The transaction bound holds for every table; the bound on seq is
		// each table's own, read now: later than the slot's creation, it
		// only covers more.
		handoffs[0] = g.handoff
		for i, t := range p.tables[1:] {
			pos, err := poll.ReadFloorCandidate(ctx, guard.conn, t.poll)
			if err != nil {
				return transition{}, err
			}
			h := *g.handoff
			h.maxSeq = pos.Seq
			handoffs[i+1] = &h
		}
	}
	g.now.set(ModePoll)
	p.log.Info("polling several tables", "tables", p.names(), "handoff", g.handoff != nil)
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		// The first table to end otherwise than by finishing its
		// handoff stops the others: with an error (first), or the
		// first table's probe (probed).
		stopped   bool
		first     error
		probed    transition
		done      int
		published = make([]flow.Polled, len(p.tables))
	)
	for i, t := range p.tables {
		s := &pollSession{p: p, t: t, k: g.k, gate: g.gate, reason: g.reason, handoff: handoffs[i], polled: &published[i],
			probeEvery: g.probeEvery, group: guard.lease}
		wg.Add(1)
		go func() {
			defer wg.Done()
			next, err := s.run(gctx)
			mu.Lock()
			defer mu.Unlock()
			var end transition
			switch {
			case err != nil:
				err = fmt.Errorf("%s: %w", t.name, err)
			case next.to == ModeWAL && !next.probed: // its handoff is done
				done++
				return
			case next.to == ModeWAL:
				// The first table's probe: the WAL is available for all.
				end = walAvailable(t.name.String() + ": " + next.reason.Detail)
			case ctx.Err() == nil && gctx.Err() == nil:
				err = errors.New("polling " + t.name.String() + " stopped")
			}
			if (err != nil || end.to != "") && !stopped {
				stopped, first, probed = true, err, end
				cancel()
			}
		}()
	}
	wg.Wait()
	if probed.to != "" || (first == nil && g.handoff != nil) {
		// Every table has stopped publishing: each row any of them
		// published committed before this position.
		byTable := make(map[string]flow.Seqs, len(p.tables))
		for i, t := range p.tables {
			byTable[t.name.String()] = published[i].Rows()
		}
		endPolledByTable(ctx, guard.conn, g.polled, byTable)
	}
	if first != nil {
		return transition{}, first
	}
	if probed.to != "" {
		return probed, nil
	}
	if g.handoff != nil && done == len(p.tables) {
		return endHandoff(ctx, guard.fenced, p.own(), g.handoff)
	}
	return transition{}, nil
}
