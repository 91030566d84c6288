package relay

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// The mode machine, session by session: what each way a session ends
// leads to, and what carries over from one session to the next (the
// probe's backing off, the wait for another relay said once).
func TestModeMachine(t *testing.T) {
	unavailable := fmt.Errorf("%w: wal_level is replica", replication.ErrNotReady)
	refused := errors.New("restart after a refusal")
	connLost := errors.New("connection reset by peer")
	held := &heldError{holder: store.LeaseHolder{Holder: "other", Token: 3, ExpiresIn: 2 * time.Second}}
	created := &handoff{xmax: 100, slotLSN: 0x1000}
	replaced := &handoff{xmax: 100, slotLSN: 0x1000, replaced: true}

	// want is what a step should come to; fields left zero are not
	// checked, except do.
	type want struct {
		do        action
		wait      time.Duration
		mode      Mode
		code      store.ReasonCode
		handoff   *handoff
		probeWait time.Duration
		say       string
		quiet     bool // nothing said
	}
	type turn struct {
		name string
		e    ended
		want want
	}
	for _, tt := range []struct {
		name  string
		mode  Mode // configured
		turns []turn
	}{
		{"auto: a new slot's handoff, then the WAL", ModeAuto, []turn{
			{"the first session creates the slot", ended{t: toHandoff(created)},
				want{mode: ModePoll, code: store.ReasonHandoff, handoff: created, say: "polling before streaming the new slot"}},
			{"polling publishes what committed before it", ended{t: handoffDone()},
				want{mode: ModeWAL, code: store.ReasonHandoffDone, say: "switching to WAL"}},
		}},
		{"auto: a lost slot replaced", ModeAuto, []turn{
			{"the session replaces it", ended{t: toHandoff(replaced)},
				want{mode: ModePoll, code: store.ReasonHandoff, handoff: replaced, say: "switching to polling"}},
		}},
		{"auto: the probe backs off when the WAL keeps failing", ModeAuto, []turn{
			{"replication refused", ended{err: unavailable, sessions: 0},
				want{mode: ModePoll, code: store.ReasonWALUnavailable, say: "switching to polling"}},
			{"the probe says it is back", ended{t: walAvailable(replicationAvailable), sessions: 1},
				want{mode: ModeWAL, code: store.ReasonWALAvailable, say: "switching to WAL"}},
			{"refused again before streaming", ended{err: unavailable, sessions: 1},
				want{mode: ModePoll, probeWait: time.Minute, say: "switching to polling"}},
			{"the probe again, later", ended{t: walAvailable(replicationAvailable), sessions: 2},
				want{mode: ModeWAL, probeWait: time.Minute}},
			{"and again before streaming", ended{err: unavailable, sessions: 2},
				want{mode: ModePoll, probeWait: 2 * time.Minute}},
			{"the probe again, later still", ended{t: walAvailable(replicationAvailable), sessions: 3},
				want{mode: ModeWAL, probeWait: 2 * time.Minute}},
			{"this time the WAL streamed first", ended{err: unavailable, sessions: 4},
				want{mode: ModePoll, probeWait: 0}},
		}},
		{"auto: the probe's wait is capped", ModeAuto, []turn{
			{"refused", ended{err: unavailable}, want{mode: ModePoll}},
			{"probe", ended{t: walAvailable(replicationAvailable)}, want{mode: ModeWAL}},
			{"refused", ended{err: unavailable}, want{mode: ModePoll, probeWait: time.Minute}},
			{"probe", ended{t: walAvailable(replicationAvailable)}, want{mode: ModeWAL, probeWait: time.Minute}},
			{"refused", ended{err: unavailable}, want{mode: ModePoll, probeWait: 2 * time.Minute}},
			{"probe", ended{t: walAvailable(replicationAvailable)}, want{mode: ModeWAL, probeWait: 2 * time.Minute}},
			{"refused", ended{err: unavailable}, want{mode: ModePoll, probeWait: 4 * time.Minute}},
			{"probe", ended{t: walAvailable(replicationAvailable)}, want{mode: ModeWAL, probeWait: 4 * time.Minute}},
			{"refused", ended{err: unavailable}, want{mode: ModePoll, probeWait: 8 * time.Minute}},
			{"probe", ended{t: walAvailable(replicationAvailable)}, want{mode: ModeWAL, probeWait: 8 * time.Minute}},
			{"refused", ended{err: unavailable}, want{mode: ModePoll, probeWait: maxProbeWait}},
		}},
		{"wal: replication refused stops the relay", ModeWAL, []turn{
			{"refused", ended{err: unavailable}, want{do: stop, mode: ModeWAL}},
		}},
		{"poll: a failure retries, in poll mode", ModePoll, []turn{
			{"the connection is lost", ended{err: connLost}, want{do: retry, mode: ModePoll, quiet: true}},
			{"a refusal restarts at once", ended{err: refused, refused: true},
				want{do: again, mode: ModePoll, say: "restarting the session after kafka refused a record"}},
			{"a refusal of what cannot work stops", ended{err: ErrSlotLost, refused: true}, want{do: stop, mode: ModePoll}},
		}},
		{"another relay holds the pipeline", ModeAuto, []turn{
			{"held", ended{err: held}, want{do: waitLease, wait: time.Second, mode: ModeWAL, say: "another relay holds this pipeline; waiting to take over"}},
			{"still held: said once", ended{err: held}, want{do: waitLease, wait: time.Second, mode: ModeWAL, quiet: true}},
			{"a failure between", ended{err: connLost}, want{do: retry, mode: ModeWAL, quiet: true}},
			{"held again: said again", ended{err: held}, want{do: waitLease, mode: ModeWAL, wait: time.Second, say: "another relay holds this pipeline; waiting to take over"}},
			{"the lease lost: said every time", ended{err: fmt.Errorf("renew: %w", store.ErrLeaseLost)},
				want{do: waitLease, wait: time.Second, mode: ModeWAL, say: "another relay took over this pipeline; this one stopped publishing and waits"}},
			{"and again", ended{err: store.ErrLeaseLost},
				want{do: waitLease, wait: time.Second, mode: ModeWAL, say: "another relay took over this pipeline; this one stopped publishing and waits"}},
		}},
		{"auto: polling, another relay takes over, this one tries the WAL first when it takes over again", ModeAuto, []turn{
			{"replication refused", ended{err: unavailable}, want{mode: ModePoll, code: store.ReasonWALUnavailable}},
			{"the lease lost", ended{err: store.ErrLeaseLost}, want{do: waitLease, mode: ModeWAL, code: store.ReasonStarted}},
			{"refused again", ended{err: unavailable}, want{mode: ModePoll, code: store.ReasonWALUnavailable}},
			{"held by the other", ended{err: held}, want{do: waitLease, mode: ModeWAL, code: store.ReasonStarted}},
		}},
		// The WAL session's setup resumes it from the pipeline's state if
		// it is still pending; the other relay may have finished it.
		{"auto: a handoff is dropped while another relay holds the pipeline", ModeAuto, []turn{
			{"the slot replaced", ended{t: toHandoff(replaced)}, want{mode: ModePoll, handoff: replaced}},
			{"held by the other", ended{err: held}, want{do: waitLease, mode: ModeWAL, code: store.ReasonStarted}},
		}},
		{"auto: a handoff is dropped when the lease is lost", ModeAuto, []turn{
			{"the slot replaced", ended{t: toHandoff(replaced)}, want{mode: ModePoll, handoff: replaced}},
			{"the lease lost", ended{err: store.ErrLeaseLost}, want{do: waitLease, mode: ModeWAL, code: store.ReasonStarted}},
		}},
		{"auto: a handoff is kept through a failure", ModeAuto, []turn{
			{"the slot replaced", ended{t: toHandoff(replaced)}, want{mode: ModePoll, handoff: replaced}},
			{"the connection lost", ended{err: connLost}, want{do: retry, mode: ModePoll, handoff: replaced}},
		}},
		{"poll mode stays polling while another relay holds the pipeline", ModePoll, []turn{
			{"held by the other", ended{err: held}, want{do: waitLease, mode: ModePoll}},
		}},
		{"a lost slot without auto mode stops", ModeWAL, []turn{
			{"lost", ended{err: fmt.Errorf("%w: slot pgoutbox", ErrSlotLost)}, want{do: stop, mode: ModeWAL}},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Mode: tt.mode, ProbeInterval: 30 * time.Second, Lease: LeaseConfig{Renew: time.Second}}
			cfg.Replication.Slot = "pgoutbox"
			m := start(tt.mode)
			if want := map[bool]Mode{true: ModePoll, false: ModeWAL}[tt.mode == ModePoll]; m.mode != want {
				t.Fatalf("starts in %s, want %s", m.mode, want)
			}
			for _, tu := range tt.turns {
				var s step
				m, s = m.next(tu.e, cfg)
				w := tu.want
				switch {
				case s.do != w.do:
					t.Fatalf("%s: action %d, want %d", tu.name, s.do, w.do)
				case s.do == stop && !errors.Is(s.err, tu.e.err):
					t.Fatalf("%s: stops with %v, want %v", tu.name, s.err, tu.e.err)
				case w.wait != 0 && s.wait != w.wait:
					t.Fatalf("%s: waits %s, want %s", tu.name, s.wait, w.wait)
				case w.mode != "" && m.mode != w.mode:
					t.Fatalf("%s: next mode %s, want %s", tu.name, m.mode, w.mode)
				case w.code != "" && m.reason.Code != w.code:
					t.Fatalf("%s: reason %s, want %s", tu.name, m.reason.Code, w.code)
				case m.handoff != w.handoff:
					t.Fatalf("%s: handoff %v, want %v", tu.name, m.handoff, w.handoff)
				case m.probeWait != w.probeWait:
					t.Fatalf("%s: probe wait %s, want %s", tu.name, m.probeWait, w.probeWait)
				case w.say != "" && s.say.msg != w.say:
					t.Fatalf("%s: says %q, want %q", tu.name, s.say.msg, w.say)
				case w.quiet && s.say.msg != "":
					t.Fatalf("%s: says %q, want nothing", tu.name, s.say.msg)
				}
			}
		})
	}
}

// What the machine says reaches the log at its level; nothing, nothing.
func TestModeMachineSays(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	line{slog.LevelWarn, "switching to polling", []any{"reason", "x"}}.emit(log)
	line{}.emit(log)
	if got := out.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `level=WARN msg="switching to polling" reason=x`) {
		t.Fatalf("logged %q", got)
	}
}
