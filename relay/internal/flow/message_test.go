package flow

import (
	"sync/atomic"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// A non-transactional message's row has no transaction id: the saved
// floor never skips it, while a transaction below the floor is skipped.
func TestWALLedgerFloorSkipsNoMessage(t *testing.T) {
	var below atomic.Int64
	l := NewWALLedger(NewWatermark(0, func(pglogrepl.LSN) {}, nil), &Polled{}, "", 1000,
		Skipped{Polled: new(atomic.Int64), BelowFloor: &below, Committed: new(atomic.Int64)})
	msg := &outbox.Relation{Schema: "pg_logical_emit_message", Name: "outbox", Message: true}
	if l.Skip(&outbox.Change{Kind: outbox.KindRow, XID: 0, Relation: msg}) {
		t.Error("a non-transactional message was skipped below the floor")
	}
	if !l.Skip(&outbox.Change{Kind: outbox.KindRow, XID: 999, Relation: msg}) || below.Load() != 1 {
		t.Error("a transaction below the floor was not skipped")
	}
}
