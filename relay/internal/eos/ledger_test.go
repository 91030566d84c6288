package eos

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/store"
)

// skipped are counters for a ledger's skipped rows.
func skipped() flow.Skipped {
	return flow.Skipped{Polled: new(atomic.Int64), BelowFloor: new(atomic.Int64), Committed: new(atomic.Int64)}
}

// The ledger skips what Kafka has, confirms positions with nothing to
// publish at once only while no Kafka transaction has records, and a
// transaction is due only at a Postgres commit.
func TestLedger(t *testing.T) {
	var confirmed []pglogrepl.LSN
	l := newLedger(Position{Mode: store.ModeWAL, End: 200, Commit: 190}, 0, "seq", skipped(), nil, new(atomic.Uint64))
	l.ConfirmTo(func(lsn pglogrepl.LSN) { confirmed = append(confirmed, lsn) })
	old := outbox.Change{Kind: outbox.KindRow, FinalLSN: 190}
	if !l.Skip(&old) || l.skipped.Committed.Load() != 1 {
		t.Fatal("a row of the last transaction Kafka has was not skipped")
	}
	l.Boundary(&outbox.Change{Kind: outbox.KindCommit, LSN: 200, FinalLSN: 190})
	if !slices.Equal(confirmed, []pglogrepl.LSN{200}) {
		t.Fatalf("confirmed %v after a skipped transaction, want [0/C8]", confirmed)
	}
	next := outbox.Change{Kind: outbox.KindRow, FinalLSN: 300}
	if l.Skip(&next) {
		t.Fatal("a row after what Kafka has was skipped")
	}
	l.Produce(0, &next)
	if l.Due(true, 10, time.Hour) {
		t.Fatal("due in the middle of a Postgres transaction")
	}
	l.Boundary(&outbox.Change{Kind: outbox.KindCommit, LSN: 310, FinalLSN: 300})
	if !l.Due(true, 10, time.Hour) || l.Due(false, 10, time.Hour) || !l.Due(false, 1, time.Hour) {
		t.Fatal("due: idle, size and age bounds")
	}
	l.Boundary(&outbox.Change{Kind: outbox.KindHeartbeat, LSN: 320})
	if len(confirmed) != 1 || l.later != 320 || l.last.End != 310 {
		t.Fatalf("a heartbeat behind an open Kafka transaction: confirmed %v, later %s, last %s", confirmed, l.later, l.last.End)
	}
	l.Ack(flow.Entry{}, errors.New("refused"))
	if l.Failed() == nil {
		t.Fatal("a failed record was not kept")
	}
}

// A WAL position record lists the transactions Kafka has at or above the
// floor saveState found, so that polling after it can mark their rows: the
// list keeps every transaction produced until the floor passes it, and
// says when it had to leave some out.
func TestLedgerListsTransactionsAboveTheFloor(t *testing.T) {
	floor := new(atomic.Uint64)
	l := newLedger(Position{}, 9, "seq", skipped(), nil, floor)
	l.last = Position{Mode: store.ModeWAL, End: 50, Commit: 40}
	for _, x := range []uint32{100, 101, 105} {
		l.Produce(0, &outbox.Change{Kind: outbox.KindRow, XID: x})
	}
	p := l.Position()
	if !slices.Equal(p.XIDs, []uint32{100, 101, 105}) || p.FloorXID != 0 || p.Cluster != 9 || p.Incomplete {
		t.Fatalf("before a floor: %+v", p)
	}
	floor.Store(1<<32 + 102) // an xid8: its low 32 bits are what the WAL names
	p = l.Position()
	if !slices.Equal(p.XIDs, []uint32{105}) || p.FloorXID != 1<<32+102 {
		t.Fatalf("after the floor passed 101: %+v", p)
	}
	for x := uint32(200); len(l.xids) < maxListedXIDs; x++ {
		l.Produce(0, &outbox.Change{Kind: outbox.KindRow, XID: x})
	}
	l.Produce(0, &outbox.Change{Kind: outbox.KindRow, XID: 1_000_000})
	if p = l.Position(); !p.Incomplete || len(p.XIDs) != maxListedXIDs {
		t.Fatalf("past the bound: incomplete %v, %d listed", p.Incomplete, len(p.XIDs))
	}
	floor.Store(1<<32 + 1_000_001)
	if p = l.Position(); p.Incomplete || len(p.XIDs) != 0 {
		t.Fatalf("once the floor passed every transaction: incomplete %v, %d listed", p.Incomplete, len(p.XIDs))
	}
	if !flow.XIDBefore(0xFFFFFFF0, 5) || flow.XIDBefore(5, 0xFFFFFFF0) {
		t.Fatal("xid comparison across wraparound")
	}
}
