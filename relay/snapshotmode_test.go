package relay

import (
	"errors"
	"strings"
	"testing"
)

// The snapshot modes as Debezium's snapshotters answer: whether the first
// start reads the table, whether every start does, whether streaming
// follows.
func TestSnapshotModes(t *testing.T) {
	for _, tt := range []struct {
		mode                       string
		reads, everyStart, streams bool
	}{
		{"no_data", false, false, true},
		{"initial", true, false, true},
		{"when_needed", true, false, true},
		{"always", true, true, true},
		{"initial_only", true, false, false},
	} {
		m, err := ParseSnapshotMode(tt.mode)
		if err != nil {
			t.Fatalf("%s: %v", tt.mode, err)
		}
		if m.ReadsTable() != tt.reads || m.EveryStart() != tt.everyStart || m.Streams() != tt.streams {
			t.Errorf("%s: reads %v, every start %v, streams %v; want %v, %v, %v", tt.mode,
				m.ReadsTable(), m.EveryStart(), m.Streams(), tt.reads, tt.everyStart, tt.streams)
		}
		if !strings.HasPrefix(m.Meaning(), tt.mode+":") {
			t.Errorf("%s: meaning %q", tt.mode, m.Meaning())
		}
	}
	for _, bad := range []string{"custom", "configuration_based", "never", "Always", ""} {
		if _, err := ParseSnapshotMode(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The modes a configuration cannot keep are refused before anything
// starts: always's snapshot at every start with polling, which sends no
// row twice, and the modes whose snapshot runs at every start or is all
// they do under exactly-once, whose snapshot produces outside
// transactions.
func TestSnapshotModeValidate(t *testing.T) {
	for _, tt := range []struct {
		mode     SnapshotMode
		set      func(*Config)
		want     string // "" for valid
		sentinel error
	}{
		{SnapshotAlways, nil, "", nil},
		{SnapshotAlways, func(c *Config) { c.Mode = ModeWAL }, "", nil},
		{SnapshotAlways, func(c *Config) { c.Mode = ModePoll }, "--mode wal or auto", nil},
		{SnapshotAlways, func(c *Config) { c.Delivery = ExactlyOnce }, "exactly-once", ErrSnapshotExactlyOnce},
		{SnapshotInitialOnly, nil, "", nil},
		{SnapshotInitialOnly, func(c *Config) { c.Mode = ModePoll }, "", nil},
		{SnapshotInitialOnly, func(c *Config) { c.Delivery = ExactlyOnce }, "exactly-once", ErrSnapshotExactlyOnce},
		// initial's snapshot is refused where it would run, on a first start.
		{SnapshotInitial, func(c *Config) { c.Delivery = ExactlyOnce }, "", nil},
	} {
		var c Config
		c.Replication.DatabaseURL = "postgres://x"
		c.Replication.Slot = "orders"
		c.Sink = fakeOpener{}
		c.Snapshot = tt.mode
		c.Defaults()
		if tt.set != nil {
			tt.set(&c)
		}
		err := c.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %s/%s: %v", tt.mode, c.Mode, c.Delivery, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s %s/%s: %v, want %q", tt.mode, c.Mode, c.Delivery, err, tt.want)
		case tt.sentinel != nil && !errors.Is(err, tt.sentinel):
			t.Errorf("%s %s/%s: %v is not %v", tt.mode, c.Mode, c.Delivery, err, tt.sentinel)
		}
	}
}
