package flow

import (
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestWatermark(t *testing.T) {
	var confirmed []pglogrepl.LSN
	w := NewWatermark(100, func(l pglogrepl.LSN) { confirmed = append(confirmed, l) }, nil)
	// done names the transactions whose rows may be marked published: only
	// those confirmed, in commit order.
	var done []uint32
	w.done = func(x uint32) { done = append(done, x) }
	at := func(want pglogrepl.LSN, xids ...uint32) {
		t.Helper()
		if got, _ := w.Position(); got != want {
			t.Fatalf("position %s, want %s", got, want)
		}
		if !slices.Equal(done, xids) {
			t.Fatalf("done %v, want %v", done, xids)
		}
	}

	// T1 (two records, partition A) and T2 (one record, partition B).
	t1 := w.Begin(11)
	w.Add(t1)
	w.Add(t1)
	w.Commit(t1, 200)
	t2 := w.Begin(12)
	w.Add(t2)
	w.Commit(t2, 300)
	at(100)

	// T2's ack arrives first: nothing may be confirmed, T1 is not done.
	w.Ack(t2, nil)
	at(100)
	w.Ack(t1, nil)
	at(100) // one of T1's records is still out
	w.Ack(t1, nil)
	at(300, 11, 12) // T1 and T2 complete together

	// A transaction that is read but not committed yet holds the position.
	t3 := w.Begin(13)
	w.Add(t3)
	w.Ack(t3, nil)
	at(300, 11, 12)
	w.Mark(350) // a heartbeat behind it waits too
	at(300, 11, 12)
	w.Commit(t3, 340)
	at(350, 11, 12, 13)

	// An empty transaction or a heartbeat alone advances at once.
	w.Mark(400)
	at(400, 11, 12, 13)
	if len(confirmed) != 3 || confirmed[2] != 400 {
		t.Fatalf("advances reported %v", confirmed)
	}
}

// After a failed record nothing moves again, not even for later acks.
func TestWatermarkStopsAtFailure(t *testing.T) {
	w := NewWatermark(10, nil, nil)
	var done []uint32
	w.done = func(x uint32) { done = append(done, x) }
	t1 := w.Begin(21)
	w.Add(t1)
	w.Commit(t1, 20)
	t2 := w.Begin(22)
	w.Add(t2)
	w.Commit(t2, 30)
	boom := errors.New("boom")
	w.Ack(t1, boom)
	w.Ack(t2, nil)
	w.Mark(40)
	if got, _ := w.Position(); got != 10 {
		t.Fatalf("position %s after a failure, want 10", got)
	}
	if !errors.Is(w.Failed(), boom) {
		t.Fatalf("Failed() = %v", w.Failed())
	}
	if len(done) != 0 {
		t.Fatalf("transactions %v given to be marked after a failure", done)
	}
}

// The queue holds only unconfirmed transactions: memory follows what is in
// flight, not how long the relay has run.
func TestWatermarkQueueShrinks(t *testing.T) {
	w := NewWatermark(0, nil, nil)
	for i := 1; i <= 100000; i++ {
		tx := w.Begin(0)
		w.Add(tx)
		w.Commit(tx, pglogrepl.LSN(i))
		w.Ack(tx, nil)
	}
	if _, n := w.Position(); n != 0 {
		t.Fatalf("%d transactions still queued", n)
	}
	if cap(w.queue) > 64 {
		t.Fatalf("queue capacity %d after everything was confirmed", cap(w.queue))
	}
}
