package router

import (
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/schema"
)

func BenchmarkTopic(b *testing.B) {
	rc := &schema.Record{AggregateType: "Order", AggregateID: "918273", Type: "OrderCreated"}
	for _, tc := range []struct{ name, template string }{
		{"constant", "all-events"},
		{"default", ""},
		{"two-fields", "{aggregatetype}.{type}"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r, err := New(Config{Topic: tc.template})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Topic(rc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchPayload is a realistic jsonb payload of about 200 bytes.
const benchPayload = `{"sku": "A-1042", "total": "129.90", "status": "NEW", "orderId": 918273, "currency": "EUR", ` +
	`"customer": {"id": "c-5521", "email": "ada@example.com"}, "createdBy": "checkout-svc", "lineCount": 3}`

// BenchmarkRowToMessage is the whole per-event path: a pgoutput row's text
// values -> Record -> envelope -> topic.
func BenchmarkRowToMessage(b *testing.B) {
	cols := []schema.Column{
		{Name: "id", TypeOID: 2950}, {Name: "aggregatetype", TypeOID: 25}, {Name: "aggregateid", TypeOID: 25},
		{Name: "type", TypeOID: 25}, {Name: "payload", TypeOID: 3802}, {Name: "headers", TypeOID: 3802},
		{Name: "created_at", TypeOID: 1184}, {Name: "seq", TypeOID: 20}, {Name: "txid", TypeOID: 5069},
		{Name: "published_at", TypeOID: 1184},
	}
	values := [][]byte{
		[]byte("0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10"), []byte("Order"), []byte("918273"), []byte("OrderCreated"),
		[]byte(benchPayload), nil, []byte("2026-11-21 18:37:59.123456+00"), []byte("1042"), []byte("77123"), nil,
	}
	for _, format := range []schema.Format{schema.CloudEvents, schema.CloudEventsBinary} {
		b.Run(string(format), func(b *testing.B) {
			bind, err := schema.Columns{}.Bind(cols)
			if err != nil {
				b.Fatal(err)
			}
			enc, err := schema.NewEncoder(schema.EncoderConfig{Format: format, Source: "urn:pgoutbox:orders"})
			if err != nil {
				b.Fatal(err)
			}
			r, err := New(Config{})
			if err != nil {
				b.Fatal(err)
			}
			commit := time.Now()
			b.ReportAllocs()
			b.SetBytes(int64(len(benchPayload)))
			for b.Loop() {
				rec, err := bind.Record(values, commit)
				if err != nil {
					b.Fatal(err)
				}
				msg, err := enc.Encode(&rec)
				if err != nil {
					b.Fatal(err)
				}
				topic, err := r.Topic(&rec)
				if err != nil || len(topic) == 0 || len(msg.Value) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
