package replication

import (
	"errors"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
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
		if err := ValidateName("slot", n); !errors.Is(err, outbox.ErrInvalidName) {
			t.Errorf("%q accepted", n)
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
