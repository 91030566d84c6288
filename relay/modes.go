package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/store"
)

// Mode is how the relay reads the outbox (store.Mode, as the state table
// keeps it).
type Mode = store.Mode

const (
	// ModeAuto streams the WAL when it can and polls when it cannot.
	ModeAuto = store.ModeAuto
	// ModeWAL only streams the WAL.
	ModeWAL = store.ModeWAL
	// ModePoll only polls the table.
	ModePoll = store.ModePoll
)

// ParseMode parses auto, wal or poll.
func ParseMode(s string) (Mode, error) {
	return store.ParseMode(s)
}

// A session ends with a transition, a value that says which mode comes
// next and why, or with an error. next, a pure function, decides from
// either what Run does then; Run only carries it out.

// transition is a session's request to switch modes.
type transition struct {
	// to is the next mode; "" for none.
	to     Mode
	reason store.Reason
	// handoff, switching to polling, is the handoff to a new slot that
	// polling finishes first.
	handoff *handoff
	// probed, switching to the WAL, says auto mode's probe found it
	// available (not the end of a handoff).
	probed bool
}

// toHandoff switches to polling for h.
func toHandoff(h *handoff) transition {
	return transition{to: ModePoll, handoff: h, reason: store.Reason{Code: store.ReasonHandoff, Detail: h.String()}}
}

// walAvailable switches to the WAL after auto mode's probe; detail is
// why, as status shows it.
func walAvailable(detail string) transition {
	return transition{to: ModeWAL, probed: true, reason: store.Reason{Code: store.ReasonWALAvailable, Detail: detail}}
}

// handoffDone switches to the WAL once the handoff's polling is done.
func handoffDone() transition {
	return transition{to: ModeWAL, reason: store.Reason{Code: store.ReasonHandoffDone,
		Detail: "everything committed before the new slot is published"}}
}

// handoffMoved goes back to the WAL session's setup when the handoff's
// bounds changed while it polled: the slot was replaced again (by another
// relay of the pipeline, say), and the setup reads the new bounds, which
// cover what committed before the new slot. Ending the handoff on the old
// ones would stream the new slot past what committed in between.
func handoffMoved() transition {
	return transition{to: ModeWAL, reason: store.Reason{Code: store.ReasonHandoff,
		Detail: "the slot was replaced again while polling: the handoff goes on to the new slot"}}
}

// handoffGone goes back to the WAL session's setup when a poll session is
// to finish a handoff that is no longer pending with its bounds: another
// relay of the pipeline finished it, or replaced the slot again, while
// this one did not hold the pipeline. Polling it again from the floor
// would send again what that relay streamed since.
func handoffGone() transition {
	return transition{to: ModeWAL, reason: store.Reason{Code: store.ReasonHandoff,
		Detail: "the handoff this relay began was finished or moved by another relay of the pipeline"}}
}

const (
	// replicationAvailable is why a poll session's probe switches.
	replicationAvailable = "replication is available again"
	// maxProbeWait caps how far failed returns to the WAL lengthen the
	// probe interval.
	maxProbeWait = 10 * time.Minute
)

// handoff ends a WAL session that just created a slot: before streaming
// from the slot's consistent point, polling publishes every transaction
// below xmax, which covers all that committed before that point.
type handoff struct {
	xmax     uint64
	maxSeq   int64 // rows up to this seq are covered too (rows copied from another cluster)
	slotLSN  pglogrepl.LSN
	replaced bool
}

func (h *handoff) String() string {
	if h.slotLSN == 0 {
		// An existing slot, with a handoff pending from a change of
		// cluster or an interrupted start.
		return fmt.Sprintf("a handoff is pending: polling publishes what committed before streaming the slot (transactions below %d)", h.xmax)
	}
	if h.replaced {
		return fmt.Sprintf("slot replaced at %s after it was lost: polling publishes what committed before it (transactions below %d)", h.slotLSN, h.xmax)
	}
	return fmt.Sprintf("slot created at %s: polling publishes what committed before it (transactions below %d)", h.slotLSN, h.xmax)
}

// machine is what Run carries from one session to the next.
type machine struct {
	// mode is the next session's, reason why, and handoff the handoff
	// its polling finishes.
	mode    Mode
	reason  store.Reason
	handoff *handoff
	// probeWait lengthens auto mode's probe interval after WAL sessions
	// that failed right after a probe said the WAL was available; 0 when
	// none did.
	probeWait time.Duration
	// fromProbe: the WAL session was started because the probe said the
	// WAL is available again, and sessions counted probeSessions then.
	fromProbe     bool
	probeSessions int64
	// waitLogged: waiting for another relay's lease was said.
	waitLogged bool
}

// start is the machine before the first session of a relay configured
// with mode.
func start(mode Mode) machine {
	m := machine{mode: ModeWAL, reason: store.Started(mode)}
	if mode == ModePoll {
		m.mode = ModePoll
	}
	return m
}

// probeInterval is how long polling waits before it probes the WAL.
func (m machine) probeInterval(cfg Config) time.Duration { return max(cfg.ProbeInterval, m.probeWait) }

// ended is how a session ended.
type ended struct {
	t   transition
	err error
	// refused: Kafka refused a record in it (refusals.endSession).
	refused bool
	// sessions counts the sessions that streamed or polled so far
	// (Stats.Sessions).
	sessions int64
}

// action is what Run does after a session.
type action uint8

const (
	// again starts the next session at once.
	again action = iota
	// waitLease waits for another relay's lease, for step.wait.
	waitLease
	// retry reconnects after a backoff.
	retry
	// stop returns step.err; it is recorded for status first.
	stop
)

// step is what next decides: the action, and what to say.
type step struct {
	do   action
	wait time.Duration
	err  error
	say  line
}

// line is a log line; no msg, nothing to say.
type line struct {
	level slog.Level
	msg   string
	attrs []any
}

func (l line) emit(log *slog.Logger) {
	if l.msg != "" {
		log.Log(context.Background(), l.level, l.msg, l.attrs...)
	}
}

// next is the mode machine: from how a session ended, the machine for the
// next one and what Run does now.
func (m machine) next(e ended, cfg Config) (machine, step) {
	err := e.err
	if e.refused && !permanent(err) {
		// Not a connection problem: the next session dead-letters the
		// refused event before it produces anything, at once.
		return m, step{say: line{slog.LevelWarn, "restarting the session after kafka refused a record", []any{"reason", err}}}
	}
	switch t := e.t; {
	case t.to == ModePoll:
		m.mode, m.handoff, m.reason = ModePoll, t.handoff, t.reason
		say := line{slog.LevelInfo, "polling before streaming the new slot", []any{"reason", t.reason.Detail}}
		if t.handoff.replaced {
			say.level, say.msg = slog.LevelWarn, "switching to polling"
		}
		return m, step{say: say}
	case t.to == ModeWAL:
		m.mode, m.handoff, m.reason = ModeWAL, nil, t.reason
		m.fromProbe, m.probeSessions = t.probed, e.sessions
		return m, step{say: line{slog.LevelInfo, "switching to WAL", []any{"reason", t.reason.Detail}}}
	case m.mode == ModeWAL && cfg.Mode == ModeAuto && replicationUnavailable(err):
		m.mode, m.handoff, m.reason = ModePoll, nil, store.Reason{Code: store.ReasonWALUnavailable, Detail: err.Error()}
		attrs := []any{"reason", m.reason.Detail}
		if m.fromProbe && e.sessions == m.probeSessions {
			// The probe found nothing wrong, yet the session failed
			// before it streamed: probe less often, so that this does
			// not become a switch back and forth every probe interval.
			m.probeWait = min(2*m.probeInterval(cfg), max(cfg.ProbeInterval, maxProbeWait))
			attrs = append(attrs, "next_probe_in", m.probeWait)
		} else {
			m.probeWait = 0
		}
		m.fromProbe = false
		return m, step{say: line{slog.LevelWarn, "switching to polling", attrs}}
	case errors.Is(err, errLocked), errors.Is(err, store.ErrLeaseLost):
		if cfg.Mode == ModeAuto && m.mode == ModePoll {
			// The relay that holds the pipeline meanwhile may have gone
			// back to the WAL: taking over, this one tries the WAL first,
			// as a relay that starts does. Polling from the floor would
			// send again what that relay streamed since (nemesis seed
			// 13: 319 events after a 5 s partition from PostgreSQL). A
			// handoff it had begun is dropped too: the WAL session's
			// setup resumes it from the pipeline's state if it is still
			// pending, and the other relay may have finished it (seed 8:
			// 92 events polled again).
			m.mode, m.handoff, m.reason, m.probeWait, m.fromProbe = ModeWAL, nil, store.Started(cfg.Mode), 0, false
		}
		var say line
		if errors.Is(err, store.ErrLeaseLost) {
			say = line{slog.LevelWarn, "another relay took over this pipeline; this one stopped publishing and waits", []any{"pipeline", cfg.Replication.Slot}}
			m.waitLogged = true
		} else if !m.waitLogged {
			say = line{slog.LevelInfo, "another relay holds this pipeline; waiting to take over", []any{"pipeline", cfg.Replication.Slot, "reason", err}}
			m.waitLogged = true
		}
		return m, step{do: waitLease, wait: retryIn(err, cfg.Lease.Renew), say: say} // lease.go
	case permanent(err):
		return m, step{do: stop, err: err}
	}
	m.waitLogged, m.fromProbe = false, false
	return m, step{do: retry}
}
