package replication

import (
	"errors"
	"testing"
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
