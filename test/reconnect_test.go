package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Postgres stops under the relay (a fast shutdown, and an immediate one,
// which is a crash) and comes back: the relay reconnects with backoff and
// resumes from the slot's confirmed position, losing nothing.
func TestPostgresRestart(t *testing.T) {
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) { testPostgresRestart(t, mode) })
	}
}

func testPostgresRestart(t *testing.T, stopMode string) {
	e := testenv.New(t)
	if e.PG.External() {
		t.Skip("restarting Postgres needs the throwaway cluster, not PGOUTBOX_TEST_DATABASE_URL")
	}
	cfg := e.Config()
	e.Setup(cfg)
	r := e.Start(cfg)
	var ids []string
	for i := 0; i < 20; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, len(ids), 15*time.Second)
	ctx := context.Background()
	if err := e.PG.Stop(ctx, stopMode); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the relay notices and backs off
	if err := e.PG.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	e.Conn = e.Connect()
	for i := 20; i < 40; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%3), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	// A fast shutdown waits until the relay has confirmed the WAL end.
	// PostgreSQL 17 and later write a logical slot whose confirmed position
	// moved at the shutdown checkpoint, so nothing is sent again; 15 and 16
	// do not, so the slot replays from its last saved position:
	// duplicates, no loss. An immediate stop writes no checkpoint, so it
	// may replay on every version.
	read := testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 30*time.Second)
	major := testenv.ServerMajor(t, e.Conn)
	t.Logf("PostgreSQL %d, %s stop: %d events, %d records read (duplicates after the restart: %d)",
		major, stopMode, len(ids), read, read-len(ids))
	if major >= 17 && stopMode == "fast" && read != len(ids) {
		t.Errorf("PostgreSQL %d sent %d events again after a fast restart; it keeps the confirmed position at shutdown", major, read-len(ids))
	}
	if n := r.Stats.Sessions.Load(); n < 2 {
		t.Errorf("%d replication sessions; the relay should have reconnected", n)
	}
}
