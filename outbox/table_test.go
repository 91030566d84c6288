package outbox

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

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
		// EF Core's and MassTransit's table, written bare or as in SQL.
		{`public.OutboxMessage`, Table{"public", "OutboxMessage"}, `"public"."OutboxMessage"`, true},
		{`"public"."OutboxMessage"`, Table{"public", "OutboxMessage"}, `"public"."OutboxMessage"`, true},
		{`"OutboxMessage"`, Table{"public", "OutboxMessage"}, `"public"."OutboxMessage"`, true},
		{"my-app.outbox", Table{"my-app", "outbox"}, `"my-app"."outbox"`, true},
		{`"My Schema"."out.box"`, Table{"My Schema", "out.box"}, `"My Schema"."out.box"`, true},
		{`"a""b".t`, Table{`a"b`, "t"}, `"a""b"."t"`, true},
		{`"1app".outbox`, Table{"1app", "outbox"}, `"1app"."outbox"`, true},
		{"ünïcode.täble", Table{}, "", false}, // bare names are ASCII; quote others
		{`"ünïcode"."täble"`, Table{"ünïcode", "täble"}, `"ünïcode"."täble"`, true},
		{"s.a23456789012345678901234567890123456789012345678901234567890123", Table{"s", "a23456789012345678901234567890123456789012345678901234567890123"},
			`"s"."a23456789012345678901234567890123456789012345678901234567890123"`, true},
		{"s.a234567890123456789012345678901234567890123456789012345678901234", Table{}, "", false}, // 64 bytes
		{"a.b.c", Table{}, "", false},
		{"x;drop", Table{}, "", false},
		{`o"x`, Table{}, "", false},
		{`"o'x".t`, Table{}, "", false}, // single quotes reach string literals
		{`"o\x".t`, Table{}, "", false}, // and so do backslashes
		{"\"a\tb\".t", Table{}, "", false},
		{`"unclosed.t`, Table{}, "", false},
		{`"".t`, Table{}, "", false},
		{"public.", Table{}, "", false},
		{".outbox", Table{}, "", false},
		{"1app.outbox", Table{}, "", false},
		{"-app.outbox", Table{}, "", false},
		{"app.out box", Table{}, "", false},
		{"a.b,c", Table{}, "", false},
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
		if !tt.ok && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ParseTable(%q): %v does not wrap ErrInvalidName", tt.in, err)
		}
	}
}

func TestParseTables(t *testing.T) {
	got, err := ParseTables(` public.orders , "Billing, Inc"."Outbox",  "x"."y"`)
	want := []Table{{"public", "orders"}, {"Billing, Inc", "Outbox"}, {"x", "y"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseTables = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"a.b c", `"a".b"c"`, "a,,b", `"a`} {
		if _, err := ParseTables(bad); err == nil {
			t.Errorf("ParseTables(%q) accepted", bad)
		}
	}
}

// FuzzParseTable checks that whatever ParseTable accepts is two names
// pgoutbox accepts, that its String parses back to it (so names with
// dots, commas, quotes or spaces survive being written into --table or a
// state row), that a list of it parses back too, and that anything else
// is ErrInvalidName.
func FuzzParseTable(f *testing.F) {
	for _, s := range []string{"outbox", "public.outbox", "Sales.OutboxEvents", "a.b.c", `"a"."b"`, "x;drop", ".", "", "a$.b_1",
		`"OutboxMessage"`, "my-app.outbox", `"a""b"."c.d"`, `"x, y".z`, `"o'x".t`} {
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
			if p := identifierReason(part); p != "" {
				t.Fatalf("ParseTable(%q) = %+v: part %q: %s", s, tab, part, p)
			}
		}
		if again, err := ParseTable(tab.String()); err != nil || again != tab {
			t.Fatalf("ParseTable(%q) = %+v, but its String %q parses to %+v, %v", s, tab, tab.String(), again, err)
		}
		list, err := ParseTables(tab.String() + "," + tab.String())
		if err != nil || len(list) != 2 || list[0] != tab || list[1] != tab {
			t.Fatalf("ParseTables of %q twice = %v, %v", tab.String(), list, err)
		}
		want := `"` + strings.ReplaceAll(tab.Schema, `"`, `""`) + `"."` + strings.ReplaceAll(tab.Name, `"`, `""`) + `"`
		if q := tab.Quoted(); q != want {
			t.Fatalf("ParseTable(%q).Quoted() = %s, want %s", s, q, want)
		}
	})
}
