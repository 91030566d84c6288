package replication

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The server's errors about the slot and the publication become the
// package's sentinels by SQLSTATE and by when they arrive, never by their
// text; a replication connection refused by pg_hba.conf or for the role
// says that replication is unavailable.
func TestClassify(t *testing.T) {
	// 55000 asks the server whether the slot is invalidated; none answers here.
	cfg := Config{Slot: "s", DatabaseURL: "postgres://127.0.0.1:1/none?connect_timeout=1"}
	for _, tc := range []struct {
		code      string
		streaming bool
		want      error
	}{
		{"42704", false, ErrSlotMissing},
		{"42704", true, ErrPublication},
		{"55006", false, ErrSlotActive},
		{"55000", false, nil},
		{"57P01", true, nil},
	} {
		pgErr := &pgconn.PgError{Code: tc.code, Message: "whatever the server says"}
		got := classify(pgErr, cfg, tc.streaming)
		if tc.want == nil {
			if got != error(pgErr) {
				t.Errorf("%s (streaming %v): %v, want the server's error as it is", tc.code, tc.streaming, got)
			}
			continue
		}
		if !errors.Is(got, tc.want) {
			t.Errorf("%s (streaming %v): %v, want %v", tc.code, tc.streaming, got, tc.want)
		}
	}
	var u interface{ Unavailable() bool }
	walsender := refusedReplication(&pgconn.PgError{Code: "42501", Message: "must be superuser or replication role to start walsender"})
	if !errors.As(walsender, &u) || !u.Unavailable() {
		t.Errorf("42501 on a replication connection: %v, want it unavailable", walsender)
	}
	refused := refusedReplication(&pgconn.PgError{Code: "28000", Message: "no pg_hba.conf entry"})
	if !errors.As(refused, &u) || !u.Unavailable() {
		t.Errorf("28000 on a replication connection: %v, want it unavailable", refused)
	}
	var pgErr *pgconn.PgError
	if !errors.As(refused, &pgErr) {
		t.Error("the server's error is not kept")
	}
	if other := refusedReplication(&pgconn.PgError{Code: "28P01"}); errors.As(other, &u) {
		t.Errorf("a wrong password is not a refusal of replication: %v", other)
	}
}

// An initial statement's failure stops pgoutbox, as it fails Debezium's
// task, unless its class passes.
func TestInitialStatementErrorPermanent(t *testing.T) {
	for code, want := range map[string]bool{
		"42601": true, "42P01": true, "22023": true, "P0001": true, "25006": true,
		"08006": false, "40P01": false, "55P03": false, "57P01": false, "53300": false,
	} {
		err := &InitialStatementError{N: 1, Err: &pgconn.PgError{Code: code}}
		if got := err.Permanent(); got != want {
			t.Errorf("%s: permanent %v, want %v", code, got, want)
		}
	}
	if (&InitialStatementError{N: 1, Err: errors.New("connection reset")}).Permanent() {
		t.Errorf("a failure of no server error is permanent")
	}
}
