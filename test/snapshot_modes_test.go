package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// --snapshot-mode always publishes the rows in the table at every start,
// the slot kept: restarted, pgoutbox sends the table again, then streams
// from where the slot was confirmed. What committed while it was stopped
// goes out, also the rows deleted since (an outbox that deletes its rows):
// Debezium, which streams from the WAL's end at its snapshot, would lose
// those. Rows still in the table go out twice, none is lost.
func TestSnapshotAlwaysRestart(t *testing.T) {
	e := testenv.New(t)
	const topic = "outbox.event.order"
	history := e.InsertN("order", 40)
	args := []string{"--mode", "wal", "--snapshot-mode", "always"}
	p := e.Run(t, args...)
	testenv.AwaitIDs(t, e.Brokers, topic, history, 30*time.Second)
	e.AwaitSlotActive(t, "pgoutbox")
	streamed := e.InsertN("order", 10)
	testenv.AwaitIDs(t, e.Brokers, topic, streamed, 30*time.Second)
	p.Stop(t)

	kept := e.InsertN("order", 5)
	gone := e.InsertN("order", 5)
	e.Exec("DELETE FROM outbox WHERE id IN ('" + strings.Join(gone, "','") + "')")
	p = e.Run(t, args...)
	e.AwaitSlotActive(t, "pgoutbox")
	fresh := e.InsertN("order", 5)
	testenv.AwaitIDs(t, e.Brokers, topic, fresh, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "every row of the table twice", func() bool {
		n := testenv.CountIDs(t, e.Brokers, topic)
		for _, id := range append(append(append([]string{}, history...), streamed...), kept...) {
			if n[id] < 2 {
				return false
			}
		}
		return true
	})
	p.Stop(t)
	if !strings.Contains(p.Out.String(), "snapshot mode always: publishing the rows in the tables again") {
		t.Errorf("the restart does not say it publishes the table again:\n%s", p.Out)
	}
	n := testenv.CountIDs(t, e.Brokers, topic)
	for _, g := range []struct {
		what string
		ids  []string
		want int
	}{
		{"in the table at both starts", append(append([]string{}, history...), streamed...), 2},
		{"written while stopped, still in the table", kept, 2},
		{"written and deleted while stopped", gone, 1},
		{"written after the restart", fresh, 1},
	} {
		for _, id := range g.ids {
			if n[id] != g.want {
				t.Errorf("%s: event %s published %d times, want %d", g.what, id, n[id], g.want)
			}
		}
	}
}

// --snapshot-mode initial_only publishes the rows in the table once and
// exits: no slot, nothing streamed. A later start finds the snapshot done
// and exits at once, publishing nothing.
func TestSnapshotInitialOnly(t *testing.T) {
	e := testenv.New(t)
	const topic = "outbox.event.order"
	history := e.InsertN("order", 30)
	args := e.RunArgs(e.URL, "--snapshot-mode", "initial_only")
	out, err := testenv.RunToExit(t, args...)
	if err != nil {
		t.Fatalf("first start: %v\n%s", err, out)
	}
	if !strings.Contains(out, "the rows already in the tables are published; nothing is streamed") {
		t.Errorf("the first start does not say what it did:\n%s", out)
	}
	later := e.InsertN("order", 5)
	out, err = testenv.RunToExit(t, args...)
	if err != nil {
		t.Fatalf("second start: %v\n%s", err, out)
	}
	if !strings.Contains(out, "were published at an earlier start; nothing is streamed") {
		t.Errorf("the second start does not say the snapshot was done:\n%s", out)
	}
	var slots int
	if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots").Scan(&slots); err != nil || slots != 0 {
		t.Errorf("%d slots (err %v), want none", slots, err)
	}
	recs := testenv.Drain(t, e.Brokers, topic, 0)
	testenv.CheckOnce(t, recs, history, testenv.EventID(t))
	// Each aggregate's events in their insertion order.
	at := map[string]int{}
	for i, id := range history {
		at[id] = i
	}
	last := map[string]int{}
	for _, r := range recs {
		k, n := string(r.Key), at[testenv.EventID(t)(r)]+1
		if n <= last[k] {
			t.Errorf("aggregate %s: event %d after %d", k, n, last[k])
		}
		last[k] = n
	}
	n := testenv.CountIDs(t, e.Brokers, topic)
	for _, id := range later {
		if n[id] != 0 {
			t.Errorf("event %s, written after the snapshot, published %d times", id, n[id])
		}
	}
}
