package relay

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
)

// leafError stands for an error a leaf package adds later: it says what
// it is, and the relay needs no edit to treat it so.
type leafError struct{ permanent, unavailable, poison bool }

func (e leafError) Error() string     { return "leaf" }
func (e leafError) Permanent() bool   { return e.permanent }
func (e leafError) Unavailable() bool { return e.unavailable }
func (e leafError) Poison() bool      { return e.poison }

func TestErrorsByBehaviour(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("session: %w", fmt.Errorf("step: %w", err)) }
	for _, tc := range []struct {
		name                           string
		err                            error
		permanent, unavailable, poison bool
	}{
		{"new permanent leaf error", leafError{permanent: true}, true, false, false},
		{"new unavailable leaf error", leafError{unavailable: true}, false, true, false},
		{"new poison leaf error", leafError{poison: true}, false, false, true},
		{"not ready", replication.ErrNotReady, true, true, false},
		{"replication refused to the role", &replication.RefusedError{Advice: "grant it"}, true, true, false},
		{"slot missing", replication.ErrSlotMissing, true, true, false},
		{"slot invalidated", replication.ErrSlotInvalidated, true, true, false},
		{"slot active", replication.ErrSlotActive, false, false, false},
		{"publication", replication.ErrPublication, true, true, false},
		{"no polling columns", poll.ErrNoPollingColumns, true, false, false},
		{"invalid name", outbox.ErrInvalidName, true, false, false},
		{"no failover slots", replication.ErrNoFailoverSlots, true, false, false},
		{"protocol", replication.ErrProtocol, false, false, false},
		{"connection lost", replication.ErrConnectionLost, false, false, false},
		{"missing column", schema.ErrMissingColumn, true, false, false},
		{"row", &schema.RowError{Column: "type", Reason: "empty"}, true, false, true},
		{"too large", &sink.TooLargeError{Topic: "t", Size: 2, Max: 1}, true, false, true},
		{"kafka auth", sink.ErrAuth, true, false, false},
		{"kafka halted", sink.ErrHalted, false, false, false},
		{"refused event", &RefusedError{Topic: "t", EventID: "e", Err: kerr.InvalidRecord}, true, false, true},
		{"held", fmt.Errorf("event e: %w", errHeld), false, false, true},
		{"delivery", &DeliveryError{Topic: "t", EventID: "e", Err: kerr.RequestTimedOut}, false, false, false},
		{"slot lost", ErrSlotLost, true, true, false},
		{"no state", ErrNoState, true, false, false},
		{"cluster changed", ErrClusterChanged, true, false, false},
		{"no WAL sender free", &pgconn.PgError{Code: "53300"}, false, true, false},
		{"wal_level", &pgconn.PgError{Code: "55000"}, false, true, false},
		{"pooler", &pgconn.PgError{Code: "08P01"}, false, true, false},
		{"permission denied", &pgconn.PgError{Code: "42501"}, true, false, false},
		{"password", &pgconn.PgError{Code: "28P01"}, true, false, false},
		{"server shutting down", &pgconn.PgError{Code: "57P01"}, false, false, false},
		{"other", errors.New("connection reset"), false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, wrap(tc.err)} {
				if got := permanent(err); got != tc.permanent {
					t.Errorf("permanent(%v) = %v", err, got)
				}
				if got := replicationUnavailable(err); got != tc.unavailable {
					t.Errorf("replicationUnavailable(%v) = %v", err, got)
				}
				if got := isPoison(err); got != tc.poison {
					t.Errorf("isPoison(%v) = %v", err, got)
				}
			}
		})
	}
}
