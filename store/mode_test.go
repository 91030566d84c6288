package store

import "testing"

func TestReasonRoundTrip(t *testing.T) {
	for _, r := range []Reason{
		Started(ModePoll),
		Started(ModeAuto),
		{Code: ReasonHandoff, Detail: "slot created at 0/16B3748: polling publishes what committed before it (transactions below 750)"},
		{Code: ReasonHandoffDone, Detail: "everything committed before the new slot is published"},
		{Code: ReasonWALAvailable, Detail: "replication is available again"},
		{Code: ReasonWALUnavailable, Detail: "replication not ready: wal_level is replica, not logical"},
		{Code: ReasonWALUnavailable, Detail: "[handoff] a detail that looks like a code"},
		{Code: ReasonUnknown, Detail: "whatever an older pgoutbox saved"},
	} {
		if got := decodeReason(r.encode()); got != r {
			t.Errorf("decode(encode(%+v)) = %+v", r, got)
		}
	}
}

// Text saved by a pgoutbox older than the codes reads back as it was;
// the start in the configured mode is recognised.
func TestReasonFromOlderText(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Reason
	}{
		{"started in poll mode", Reason{Code: ReasonStarted, Detail: "started in poll mode"}},
		{"started in wal mode", Reason{Code: ReasonStarted, Detail: "started in wal mode"}},
		{"replication not ready: wal_level", Reason{Detail: "replication not ready: wal_level"}},
		{"[nocode] text", Reason{Detail: "[nocode] text"}},
		{"[started]", Reason{Detail: "[started]"}},
		{"", Reason{}},
	} {
		if got := decodeReason(tc.text); got != tc.want {
			t.Errorf("decode(%q) = %+v, want %+v", tc.text, got, tc.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"auto", "wal", "poll"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseMode("WAL"); err == nil {
		t.Error("ParseMode(WAL): no error")
	}
}

func TestReasonCodeString(t *testing.T) {
	for c := range reasonCodes {
		if c.String() == "unknown" || c.String() == "" {
			t.Errorf("code %q has no description", c)
		}
	}
	if ReasonUnknown.String() != "unknown" {
		t.Errorf("ReasonUnknown.String() = %q", ReasonUnknown.String())
	}
	if got := (Reason{Code: ReasonWALAvailable}).String(); got != ReasonWALAvailable.String() {
		t.Errorf("a reason without detail says %q", got)
	}
}
