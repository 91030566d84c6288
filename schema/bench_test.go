package schema

import (
	"testing"
	"time"
)

// benchPayload is a realistic jsonb payload (about 200 bytes, as Postgres
// prints jsonb: keys sorted by length, ", " and ": " separators).
const benchPayload = `{"sku": "A-1042", "total": "129.90", "status": "NEW", "orderId": 918273, "currency": "EUR", ` +
	`"customer": {"id": "c-5521", "email": "ada@example.com"}, "createdBy": "checkout-svc", "lineCount": 3}`

func benchRow() [][]byte {
	return row("0b7e4c1e-6c3f-4a53-9f0e-2b8c2f1d9a10", "Order", "918273", "OrderCreated",
		benchPayload, "<null>", "2026-11-21 18:37:59.123456+00")
}

func BenchmarkRecord(b *testing.B) {
	bind := mustBind(b, Columns{}, defaultTable)
	values, commit := benchRow(), time.Now()
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		if _, err := bind.Record(values, commit); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRecord(b *testing.B, headers string) Record {
	bind := mustBind(b, Columns{}, defaultTable)
	values := benchRow()
	if headers != "" {
		values[5] = []byte(headers)
	}
	rec, err := bind.Record(values, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return rec
}

func benchEncode(b *testing.B, f Format, headers string) {
	e := mustEncoder(b, f, testSource)
	rec := benchRecord(b, headers)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		if _, err := e.Encode(&rec); err != nil {
			b.Fatal(err)
		}
	}
}

const benchHeaders = `{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`

func BenchmarkEncodeStructured(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchEncode(b, CloudEvents, "") })
	b.Run("traceparent", func(b *testing.B) { benchEncode(b, CloudEvents, benchHeaders) })
}

func BenchmarkEncodeBinary(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchEncode(b, CloudEventsBinary, "") })
	b.Run("traceparent", func(b *testing.B) { benchEncode(b, CloudEventsBinary, benchHeaders) })
}

func BenchmarkParseTimestamp(b *testing.B) {
	v := []byte("2026-11-21 18:37:59.123456+05:30")
	b.ReportAllocs()
	for b.Loop() {
		if _, reason := parseTimestamp(v); reason != "" {
			b.Fatal(reason)
		}
	}
}
