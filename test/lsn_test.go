package test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// While the broker withholds acks, the slot's confirmed_flush_lsn stays
// before the unacked transactions, whatever else happens (heartbeats,
// status updates); once acks return it moves past all of them.
func TestConfirmedLSNWaitsForKafkaAcks(t *testing.T) {
	e := testenv.New(t)
	// Withholding acks needs the in-process broker's ControlKey.
	e.Kafka = kafkatest.InProcess(t)
	e.Brokers = e.Kafka.Brokers
	cfg := e.Config()
	e.Setup(cfg)
	r := e.Start(cfg)

	// A first transaction gets through, so the relay is up and the slot
	// has a confirmed position past it.
	e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":0}`))
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 1, 15*time.Second)
	testenv.Eventually(t, 10*time.Second, "the first transaction confirmed", func() bool {
		return r.Stats.Published.Load() == 1 && e.Slot("pgoutbox").ConfirmedLSN > 0
	})

	var withhold atomic.Bool
	release := make(chan struct{})
	withhold.Store(true)
	held := atomic.Int64{}
	fake := e.Kafka.Fake
	fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if withhold.Load() {
			held.Add(1)
			fake.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})

	probe := testenv.NewCommitProbe(e)
	for i := 1; i <= 5; i++ {
		e.Insert(testenv.NewRow("order", "o-1", "Placed", fmt.Sprintf(`{"n":%d}`, i)), testenv.NewRow("order", "o-2", "Placed", `{}`))
	}
	commits := probe.Commits()
	if len(commits) != 5 {
		t.Fatalf("probe saw %d commits, want 5", len(commits))
	}
	testenv.Eventually(t, 10*time.Second, "a produce request held by the broker", func() bool { return held.Load() > 0 })

	// Heartbeats and status updates keep flowing meanwhile; give them time
	// to (wrongly) move the slot.
	time.Sleep(1500 * time.Millisecond)
	if s := e.Slot("pgoutbox"); s.ConfirmedLSN >= commits[0] {
		t.Fatalf("confirmed_flush_lsn %s reached the first unacked commit %s while Kafka withheld every ack", s.ConfirmedLSN, commits[0])
	}
	if !e.Slot("pgoutbox").Active {
		t.Fatal("the replication connection dropped while acks were withheld")
	}

	withhold.Store(false)
	close(release)
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 11, 20*time.Second)
	testenv.Eventually(t, 10*time.Second, "confirmed_flush_lsn at the last transaction's commit", func() bool {
		return e.Slot("pgoutbox").ConfirmedLSN >= commits[4]
	})
}

// An idle outbox next to a busy table: the slot's confirmed position
// follows the WAL, with heartbeats and without. The publication covers
// only the outbox, so the busy table's transactions produce nothing to
// confirm; the server's keepalives carry how far it has read, which the
// relay confirms when nothing is in flight (as PostgreSQL's own
// subscriber does). Before, without heartbeats the slot stayed where it
// was, retaining the busy table's WAL, and the published floor with it.
func TestIdleSlotAdvances(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heartbeat time.Duration
	}{
		{"heartbeats", 200 * time.Millisecond},
		{"no heartbeats", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testenv.New(t)
			ctx := context.Background()
			if _, err := e.Conn.Exec(ctx, "CREATE TABLE busy (id bigserial PRIMARY KEY, v text)"); err != nil {
				t.Fatal(err)
			}
			cfg := e.Config()
			cfg.Replication.HeartbeatInterval = tc.heartbeat
			e.Setup(cfg)
			e.Start(cfg)
			testenv.Eventually(t, 10*time.Second, "the relay streaming", func() bool { return e.Slot("pgoutbox").Active })
			start := e.Slot("pgoutbox").ConfirmedLSN

			// Two seconds of traffic on the other table.
			for i := 0; i < 40; i++ {
				if _, err := e.Conn.Exec(ctx, "INSERT INTO busy (v) SELECT repeat('x', 200) FROM generate_series(1, 50)"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			mid := e.CurrentLSN()
			testenv.Eventually(t, 10*time.Second, "confirmed_flush_lsn past the busy table's WAL", func() bool {
				return e.Slot("pgoutbox").ConfirmedLSN > mid
			})
			s := e.Slot("pgoutbox")
			t.Logf("confirmed %s -> %s; retained WAL %d bytes", start, s.ConfirmedLSN, s.RetainedBytes)
		})
	}
}

// A status update lost with its connection is made good after the stream
// closed: the slot is advanced to what was acknowledged, never back.
func TestEnsureConfirmedAdvancesAReleasedSlot(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	start, err := replication.CreateSlot(ctx, e.Conn, "ensure", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replication.DropSlot(context.Background(), e.Conn, "ensure") })
	if _, err := e.Conn.Exec(ctx, "CREATE TABLE ensure_t (i int); INSERT INTO ensure_t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var now string
	if err := e.Conn.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&now); err != nil {
		t.Fatal(err)
	}
	target, _ := pglogrepl.ParseLSN(now)
	advanced, err := replication.EnsureConfirmed(ctx, e.Conn, "ensure", target)
	if err != nil || !advanced {
		t.Fatalf("advanced %v, err %v; want advanced from %s to %s", advanced, err, start, target)
	}
	s, err := replication.SlotStatus(ctx, e.Conn, "ensure")
	if err != nil {
		t.Fatal(err)
	}
	if s.ConfirmedLSN < target {
		t.Fatalf("confirmed %s, want at least %s", s.ConfirmedLSN, target)
	}
	// Behind what the slot has: nothing to do.
	if advanced, err := replication.EnsureConfirmed(ctx, e.Conn, "ensure", start); err != nil || advanced {
		t.Fatalf("an older position: advanced %v, err %v", advanced, err)
	}
}
