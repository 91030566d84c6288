package store

import (
	"fmt"
	"strings"
)

// Mode is how the relay reads the outbox.
type Mode string

const (
	// ModeAuto streams the WAL when it can and polls when it cannot.
	ModeAuto Mode = "auto"
	// ModeWAL only streams the WAL.
	ModeWAL Mode = "wal"
	// ModePoll only polls the table.
	ModePoll Mode = "poll"
)

// ParseMode parses auto, wal or poll.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeWAL, ModePoll:
		return m, nil
	}
	return "", fmt.Errorf("mode %q: use auto, wal or poll", s)
}

// ReasonCode says why a session runs in its mode.
type ReasonCode string

const (
	// ReasonUnknown is a reason saved by a pgoutbox older than the codes;
	// its Detail is the text it saved.
	ReasonUnknown ReasonCode = ""
	// ReasonStarted: the mode the relay was started in.
	ReasonStarted ReasonCode = "started"
	// ReasonHandoff: a slot was created or replaced, or a handoff is
	// pending; polling publishes what committed before the slot.
	ReasonHandoff ReasonCode = "handoff"
	// ReasonHandoffDone: the handoff's polling is done; the slot streams.
	ReasonHandoffDone ReasonCode = "handoff-done"
	// ReasonWALAvailable: auto mode found replication available again.
	ReasonWALAvailable ReasonCode = "wal-available"
	// ReasonWALUnavailable: auto mode polls because the WAL cannot be
	// streamed (the server, the role, a pooler, or the slot).
	ReasonWALUnavailable ReasonCode = "wal-unavailable"
)

var reasonCodes = map[ReasonCode]string{
	ReasonStarted:        "started in the configured mode",
	ReasonHandoff:        "polling what committed before the slot",
	ReasonHandoffDone:    "everything committed before the slot is published",
	ReasonWALAvailable:   "replication is available again",
	ReasonWALUnavailable: "replication is not available",
}

// String describes the code.
func (c ReasonCode) String() string {
	if d, ok := reasonCodes[c]; ok {
		return d
	}
	return "unknown"
}

// Reason is why a session runs in its mode: a code to act on and the
// detail a person reads.
type Reason struct {
	Code   ReasonCode
	Detail string
}

// Started is the reason of the first session, in the configured mode.
func Started(configured Mode) Reason {
	return Reason{Code: ReasonStarted, Detail: "started in " + string(configured) + " mode"}
}

// String is the detail, or the code's description without one.
func (r Reason) String() string {
	if r.Detail != "" {
		return r.Detail
	}
	return r.Code.String()
}

// encode is the reason as mode_reason keeps it: "[code] detail". The code
// in front keeps the column one text column, as before the codes.
func (r Reason) encode() string {
	if r.Code == ReasonUnknown {
		return r.Detail
	}
	return "[" + string(r.Code) + "] " + r.Detail
}

// decodeReason reads mode_reason. Text without a known code was saved by
// an older pgoutbox: it is the detail, and the one reason status tells
// apart, the start in the configured mode, is recognised by the text that
// version saved for it.
func decodeReason(s string) Reason {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		if code, detail, ok := strings.Cut(rest, "] "); ok {
			if _, known := reasonCodes[ReasonCode(code)]; known {
				return Reason{Code: ReasonCode(code), Detail: detail}
			}
		}
	}
	for _, m := range []Mode{ModeAuto, ModeWAL, ModePoll} {
		if r := Started(m); s == r.Detail {
			return r
		}
	}
	return Reason{Detail: s}
}
