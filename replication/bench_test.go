package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// BenchmarkDecodeInsert is the cost of turning one pgoutput Insert of the
// default outbox table into a Change.
func BenchmarkDecodeInsert(b *testing.B) {
	d := newDecoder(outboxOnly(), &Counters{})
	cols := []schema.Column{{Name: "id", TypeOID: 2950}, {Name: "aggregatetype", TypeOID: 25}, {Name: "aggregateid", TypeOID: 25}, {Name: "type", TypeOID: 25}, {Name: "payload", TypeOID: 3802},
		{Name: "headers", TypeOID: 3802}, {Name: "created_at", TypeOID: 1184}, {Name: "seq", TypeOID: 20}, {Name: "txid", TypeOID: 5069}, {Name: "published_at", TypeOID: 1184}}
	if _, _, err := d.decode(1, msgRelation(1, "public", "outbox", cols...)); err != nil {
		b.Fatal(err)
	}
	if _, _, err := d.decode(1, msgBegin(2, 3)); err != nil {
		b.Fatal(err)
	}
	msg := msgInsert(1, []byte("5f0c6a4e-8a53-4a5e-9d7b-6c1f2e3d4b5a"), []byte("order"), []byte("order-12345"), []byte("OrderPlaced"),
		[]byte(`{"orderId": 12345, "customerId": "c-778", "total": 125000, "currency": "KRW", "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "channel": "web"}`),
		nil, []byte("2026-11-21 18:37:59.123456+00"), []byte("42"), []byte("771"), nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, ok, err := d.decode(1, msg); err != nil || !ok {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandoff is the reader -> publisher hand-off per change: a
// channel send and a wake-up per change as the stream did before batches,
// against batches of N changes handed over by deliver and released by the
// receiver once walked.
func BenchmarkHandoff(b *testing.B) {
	c := outbox.Change{Kind: outbox.KindRow, LSN: 1, Values: [][]byte{[]byte("5f0c6a4e-8a53-4a5e-9d7b-6c1f2e3d4b5a")}}
	b.Run("chan-per-change", func(b *testing.B) {
		out := make(chan outbox.Change, 512)
		done := make(chan int)
		go func() {
			n := 0
			for c := range out {
				n += len(c.Values)
			}
			done <- n
		}()
		b.ReportAllocs()
		for b.Loop() {
			out <- c
		}
		close(out)
		<-done
	})
	for _, n := range []int{1, 16, MaxBatch} {
		b.Run(fmt.Sprintf("batch-%d", n), func(b *testing.B) {
			s := &Stream{cfg: Config{StatusInterval: time.Hour}}
			out := make(chan *Batch, 4)
			h := newHandoff(out)
			done := make(chan int)
			go func() {
				n := 0
				for bt := range out {
					for i := range bt.Changes {
						n += len(bt.Changes[i].Values)
					}
					bt.Release()
				}
				done <- n
			}()
			ctx := context.Background()
			next := time.Now().Add(time.Hour)
			b.ReportAllocs()
			for b.Loop() {
				h.cur.Changes = append(h.cur.Changes, c)
				if len(h.cur.Changes) == n {
					if _, err := s.deliver(ctx, h, next); err != nil {
						b.Fatal(err)
					}
				}
			}
			if len(h.cur.Changes) > 0 {
				if _, err := s.deliver(ctx, h, next); err != nil {
					b.Fatal(err)
				}
			}
			close(out)
			<-done
		})
	}
}
