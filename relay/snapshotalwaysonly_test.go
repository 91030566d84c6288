package relay

import (
	"errors"
	"strings"
	"testing"
)

// always_only is configuration_based with snapshot.data true and
// start.stream false, as Debezium's snapshotter answers it: the table at
// every start, nothing streamed. Without a slot it runs in any mode; its
// snapshot produces outside Kafka transactions, so exactly-once is
// refused.
func TestSnapshotAlwaysOnly(t *testing.T) {
	m, err := ParseSnapshotMode("always_only")
	if err != nil {
		t.Fatal(err)
	}
	if m != SnapshotAlwaysOnly || !m.ReadsTable() || !m.EveryStart() || m.Streams() || !strings.HasPrefix(m.Meaning(), "always_only:") {
		t.Errorf("%s: reads %v, every start %v, streams %v, %q", m, m.ReadsTable(), m.EveryStart(), m.Streams(), m.Meaning())
	}
	for _, tt := range []struct {
		set      func(*Config)
		sentinel error
	}{
		{nil, nil},
		{func(c *Config) { c.Mode = ModeWAL }, nil},
		{func(c *Config) { c.Mode = ModePoll }, nil},
		{func(c *Config) { c.Delivery = ExactlyOnce }, ErrSnapshotExactlyOnce},
	} {
		var c Config
		c.Replication.DatabaseURL = "postgres://x"
		c.Replication.Slot = "orders"
		c.Sink = fakeOpener{}
		c.Snapshot = SnapshotAlwaysOnly
		c.Defaults()
		if tt.set != nil {
			tt.set(&c)
		}
		err := c.Validate()
		if tt.sentinel == nil && err != nil || tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
			t.Errorf("%s/%s: %v, want %v", c.Mode, c.Delivery, err, tt.sentinel)
		}
	}
}
