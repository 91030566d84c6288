package replication

import (
	"errors"
	"strings"
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
		{"ledger.outbox$2", Table{"ledger", "outbox$2"}, `"ledger"."outbox$2"`, true},
		{"_s._t", Table{"_s", "_t"}, `"_s"."_t"`, true},
		{"s.a23456789012345678901234567890123456789012345678901234567890123", Table{"s", "a23456789012345678901234567890123456789012345678901234567890123"},
			`"s"."a23456789012345678901234567890123456789012345678901234567890123"`, true},
		{"s.a234567890123456789012345678901234567890123456789012345678901234", Table{}, "", false}, // 64 bytes
		{"a.b.c", Table{}, "", false},
		{"x;drop", Table{}, "", false},
		{`o"x`, Table{}, "", false},
		{`"public"."outbox"`, Table{}, "", false}, // quoted names are not parsed; names are taken as written
		{"public.", Table{}, "", false},
		{".outbox", Table{}, "", false},
		{"1app.outbox", Table{}, "", false},
		{"app.out box", Table{}, "", false},
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

// FuzzParseTable checks that whatever ParseTable accepts is two plain
// identifiers that survive a round trip through String and quote as two
// SQL identifiers, and that anything else is ErrInvalidName.
func FuzzParseTable(f *testing.F) {
	for _, s := range []string{"outbox", "public.outbox", "Sales.OutboxEvents", "a.b.c", `"a"."b"`, "x;drop", ".", "", "a$.b_1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tab, err := ParseTable(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("ParseTable(%q): %v does not wrap ErrInvalidName", s, err)
			}
			return
		}
		for _, part := range []string{tab.Schema, tab.Name} {
			if !identPattern.MatchString(part) {
				t.Fatalf("ParseTable(%q) = %+v: part %q is not a plain identifier", s, tab, part)
			}
		}
		if !strings.Contains(s, ".") && (tab.Schema != "public" || tab.Name != s) {
			t.Fatalf("ParseTable(%q) = %+v, want public.%s", s, tab, s)
		}
		if again, err := ParseTable(tab.String()); err != nil || again != tab {
			t.Fatalf("ParseTable(%q) = %+v, but its String %q parses to %+v, %v", s, tab, tab.String(), again, err)
		}
		if q := tab.Quoted(); q != `"`+tab.Schema+`"."`+tab.Name+`"` {
			t.Fatalf("ParseTable(%q).Quoted() = %s", s, q)
		}
	})
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
