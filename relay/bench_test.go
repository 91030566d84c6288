package relay

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// benchRow is a decoded insert into the default outbox table, as the
// stream hands it over: text values in column order.
func benchRow() (*outbox.Relation, [][]byte) {
	rel := &outbox.Relation{Schema: "public", Name: "outbox", Columns: []schema.Column{
		{Name: "id", TypeOID: 2950}, {Name: "aggregatetype", TypeOID: 25}, {Name: "aggregateid", TypeOID: 25},
		{Name: "type", TypeOID: 25}, {Name: "payload", TypeOID: 3802}, {Name: "headers", TypeOID: 3802},
		{Name: "created_at", TypeOID: 1184}, {Name: "seq", TypeOID: 20}, {Name: "txid", TypeOID: 5069},
		{Name: "published_at", TypeOID: 1184},
	}}
	values := [][]byte{
		[]byte("5f0c6a4e-8a53-4a5e-9d7b-6c1f2e3d4b5a"), []byte("order"), []byte("order-12345"), []byte("OrderPlaced"),
		[]byte(`{"orderId": 12345, "customerId": "c-778", "total": 125000, "currency": "KRW", "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "channel": "web"}`),
		nil, []byte("2026-11-21 18:37:59.123456+00"), []byte("42"), []byte("771"), nil,
	}
	return rel, values
}

// BenchmarkRecord is the per-event path after decoding: row to event
// record, envelope, topic and Kafka record.
func BenchmarkRecord(b *testing.B) {
	for _, format := range []schema.Format{schema.CloudEvents, schema.CloudEventsBinary} {
		b.Run(string(format), func(b *testing.B) {
			var cfg Config
			cfg.Replication.DatabaseURL = "postgres://bench"
			cfg.Sink = fakeOpener{}
			cfg.Encoder.Format = format
			rl, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			r := rl.p
			rel, values := benchRow()
			bind, err := r.cfg.Columns.Bind(rel.Columns)
			if err != nil {
				b.Fatal(err)
			}
			c := outbox.Change{Kind: outbox.KindRow, Relation: rel, Values: values, CommitTime: time.Now()}
			b.ReportAllocs()
			b.SetBytes(int64(len(values[4])))
			for b.Loop() {
				if _, err := r.record(bind, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWatermark is the bookkeeping per event: add, ack, commit.
func BenchmarkWatermark(b *testing.B) {
	w := newWatermark(0, func(pglogrepl.LSN) {})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		tx := w.begin(0)
		w.add(tx)
		w.commit(tx, pglogrepl.LSN(i))
		w.ack(tx, nil)
	}
}
