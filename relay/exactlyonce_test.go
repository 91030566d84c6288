package relay

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
)

func TestDeliveryValidation(t *testing.T) {
	for _, tt := range []struct {
		mode     Mode
		delivery Delivery
		topic    string
		tables   []string
		snapshot SnapshotMode
		ok       bool
	}{
		{ModeAuto, AtLeastOnce, "", nil, "", true},
		{ModeAuto, "", "", nil, "", true}, // the default
		{ModeWAL, ExactlyOnce, "", nil, "", true},
		{ModePoll, ExactlyOnce, "", nil, "", true},
		{ModeAuto, ExactlyOnce, "", nil, "", true},
		{ModeWAL, "exactly-twice", "", nil, "", false},
		{ModeWAL, ExactlyOnce, "bad{topic}", nil, "", false},
		{ModeWAL, ExactlyOnce, "pgoutbox.dlq", nil, "", false}, // the dead-letter topic
		{ModeWAL, AtLeastOnce, "", []string{"public.outbox", "public.b"}, "", true},
		{ModeWAL, ExactlyOnce, "", []string{"public.outbox", "public.b"}, "", false},
		{ModeWAL, AtLeastOnce, "", nil, SnapshotInitial, true},
		{ModeWAL, ExactlyOnce, "", nil, SnapshotInitial, false},
	} {
		cfg := Config{Mode: tt.mode, Delivery: tt.delivery, PositionTopic: tt.topic, Snapshot: tt.snapshot}
		cfg.Replication.Tables = tt.tables
		cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
		cfg.Sink.Brokers = []string{"127.0.0.1:1"}
		cfg.Defaults()
		err := cfg.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("mode %s, delivery %q, position topic %q, tables %v, snapshot %q: %v", tt.mode, tt.delivery, tt.topic, tt.tables, tt.snapshot, err)
		}
	}
}

// The ledger skips what Kafka has, confirms positions with nothing to
// publish at once only while no Kafka transaction has records, and a
// transaction is due only at a Postgres commit.
func TestTxnLedger(t *testing.T) {
	var confirmed []pglogrepl.LSN
	l := &txnLedger{after: position{mode: ModeWAL, end: 200, commit: 190}, stats: &Stats{},
		confirm: func(lsn pglogrepl.LSN) { confirmed = append(confirmed, lsn) },
		floor:   new(atomic.Uint64), xids: make(map[uint32]struct{})}
	old := outbox.Change{Kind: outbox.KindRow, FinalLSN: 190}
	if !l.skip(&old) || l.stats.SkippedCommitted.Load() != 1 {
		t.Fatal("a row of the last transaction Kafka has was not skipped")
	}
	l.boundary(&outbox.Change{Kind: outbox.KindCommit, LSN: 200, FinalLSN: 190})
	if !slices.Equal(confirmed, []pglogrepl.LSN{200}) {
		t.Fatalf("confirmed %v after a skipped transaction, want [0/C8]", confirmed)
	}
	next := outbox.Change{Kind: outbox.KindRow, FinalLSN: 300}
	if l.skip(&next) {
		t.Fatal("a row after what Kafka has was skipped")
	}
	l.produce(0, &next)
	if l.due(true, 10, time.Hour) {
		t.Fatal("due in the middle of a Postgres transaction")
	}
	l.boundary(&outbox.Change{Kind: outbox.KindCommit, LSN: 310, FinalLSN: 300})
	if !l.due(true, 10, time.Hour) || l.due(false, 10, time.Hour) || !l.due(false, 1, time.Hour) {
		t.Fatal("due: idle, size and age bounds")
	}
	l.boundary(&outbox.Change{Kind: outbox.KindHeartbeat, LSN: 320})
	if len(confirmed) != 1 || l.later != 320 || l.last.end != 310 {
		t.Fatalf("a heartbeat behind an open Kafka transaction: confirmed %v, later %s, last %s", confirmed, l.later, l.last.end)
	}
	l.ack(entry{}, errors.New("refused"))
	if l.failed() == nil {
		t.Fatal("a failed record was not kept")
	}
}

// A WAL position record lists the transactions Kafka has at or above the
// floor saveState found, so that polling after it can mark their rows: the
// list keeps every transaction produced until the floor passes it, and
// says when it had to leave some out.
func TestTxnLedgerListsTransactionsAboveTheFloor(t *testing.T) {
	floor := new(atomic.Uint64)
	l := &txnLedger{floor: floor, xids: make(map[uint32]struct{}), cluster: 9,
		last: position{mode: ModeWAL, end: 50, commit: 40}}
	for _, x := range []uint32{100, 101, 105} {
		l.produce(0, &outbox.Change{Kind: outbox.KindRow, XID: x})
	}
	p := l.position()
	if !slices.Equal(p.xids, []uint32{100, 101, 105}) || p.floorXID != 0 || p.cluster != 9 || p.incomplete {
		t.Fatalf("before a floor: %+v", p)
	}
	floor.Store(1<<32 + 102) // an xid8: its low 32 bits are what the WAL names
	p = l.position()
	if !slices.Equal(p.xids, []uint32{105}) || p.floorXID != 1<<32+102 {
		t.Fatalf("after the floor passed 101: %+v", p)
	}
	for x := uint32(200); len(l.xids) < maxListedXIDs; x++ {
		l.produce(0, &outbox.Change{Kind: outbox.KindRow, XID: x})
	}
	l.produce(0, &outbox.Change{Kind: outbox.KindRow, XID: 1_000_000})
	if p = l.position(); !p.incomplete || len(p.xids) != maxListedXIDs {
		t.Fatalf("past the bound: incomplete %v, %d listed", p.incomplete, len(p.xids))
	}
	floor.Store(1<<32 + 1_000_001)
	if p = l.position(); p.incomplete || len(p.xids) != 0 {
		t.Fatalf("once the floor passed every transaction: incomplete %v, %d listed", p.incomplete, len(p.xids))
	}
	if !xidBefore(0xFFFFFFF0, 5) || xidBefore(5, 0xFFFFFFF0) {
		t.Fatal("xid comparison across wraparound")
	}
}
