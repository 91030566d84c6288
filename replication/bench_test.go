package replication

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/schema"
)

// BenchmarkDecodeInsert is the cost of turning one pgoutput Insert of the
// default outbox table into a Change.
func BenchmarkDecodeInsert(b *testing.B) {
	d := newDecoder(Table{"public", "outbox"}, &Counters{})
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
