package replication

import (
	"errors"
	"testing"
	"time"
)

func TestValidateName(t *testing.T) {
	good := []string{"pgoutbox", "_x", "slot_1", "a23456789012345678901234567890123456789012345678901234567890123"}
	bad := []string{"", "1slot", "Slot", "pg-outbox", "a;DROP TABLE x", "x'y", `x"y`, "a b",
		"a234567890123456789012345678901234567890123456789012345678901234"}
	for _, n := range good {
		if err := ValidateName("slot", n); err != nil {
			t.Errorf("%q rejected: %v", n, err)
		}
	}
	for _, n := range bad {
		if err := ValidateName("slot", n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("%q accepted", n)
		}
	}
}

func TestParseTable(t *testing.T) {
	tests := []struct {
		in     string
		want   Table
		quoted string
		ok     bool
	}{
		{"outbox", Table{"public", "outbox"}, `"public"."outbox"`, true},
		{"app.outbox_event", Table{"app", "outbox_event"}, `"app"."outbox_event"`, true},
		{"Sales.OutboxEvents", Table{"Sales", "OutboxEvents"}, `"Sales"."OutboxEvents"`, true},
		{"a.b.c", Table{}, "", false},
		{"x;drop", Table{}, "", false},
		{`o"x`, Table{}, "", false},
		{"", Table{}, "", false},
	}
	for _, tt := range tests {
		got, err := ParseTable(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseTable(%q) error %v", tt.in, err)
			continue
		}
		if tt.ok && (got != tt.want || got.Quoted() != tt.quoted) {
			t.Errorf("ParseTable(%q) = %+v %s", tt.in, got, got.Quoted())
		}
	}
}

func TestReceiveTimeoutFromServer(t *testing.T) {
	for _, tt := range []struct {
		show string
		want time.Duration
	}{
		{"1min", 2 * time.Minute}, {"60s", 2 * time.Minute}, {"5s", 30 * time.Second},
		{"10min", 20 * time.Minute}, {"0", 2 * time.Minute}, {"90000", 3 * time.Minute}, {"1h", 2 * time.Hour},
	} {
		d, ok := parsePGDuration(tt.show)
		if !ok {
			t.Errorf("cannot parse %q", tt.show)
			continue
		}
		if got := DefaultReceiveTimeout(d); got != tt.want {
			t.Errorf("wal_sender_timeout %s: receive timeout %s, want %s", tt.show, got, tt.want)
		}
	}
	for _, bad := range []string{"", "min", "5 s", "5x"} {
		if _, ok := parsePGDuration(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
