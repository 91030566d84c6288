package relay

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
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
			cfg.Encoder.Format = format
			benchRecord(b, cfg)
		})
	}
}

// benchRecord runs pipeline.record on benchRow under cfg.
func benchRecord(b *testing.B, cfg Config) {
	b.Helper()
	cfg.Replication.DatabaseURL = "postgres://bench"
	cfg.Sink = fakeOpener{}
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
		if _, err := r.record(context.Background(), bind, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordDebezium is the per-event path of Debezium's outbox
// format (string key, JSON value, string headers), without transforms and
// with a chain of Kafka Connect's after the router: the router's record
// written with JsonConverter and schemas, read back, transformed and
// written again.
func BenchmarkRecordDebezium(b *testing.B) {
	chain := map[string]string{
		"transforms": "outbox,meta,rename,tag", "transforms.outbox.type": transform.RouterClass,
		"transforms.meta.type": "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value", "transforms.meta.schema.name": "com.example.Event",
		"transforms.meta.predicate": "orders", "predicates": "orders",
		"predicates.orders.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches", "predicates.orders.pattern": `outbox\.event\..*`,
		"transforms.rename.type":  "org.apache.kafka.connect.transforms.RegexRouter",
		"transforms.rename.regex": `outbox\.event\.(.*)`, "transforms.rename.replacement": "$1.events",
		"transforms.tag.type": "org.apache.kafka.connect.transforms.InsertHeader", "transforms.tag.header": "source", "transforms.tag.value.literal": "orders",
	}
	for _, tc := range []struct {
		name  string
		chain map[string]string
	}{{"debezium-outbox", nil}, {"debezium-outbox+transforms", chain}} {
		b.Run(tc.name, func(b *testing.B) {
			var cfg Config
			cfg.Encoder.Format = schema.DebeziumOutbox
			cfg.Router.RouteReplacement = "outbox.event.${routedByValue}"
			cfg.Columns.Additional, _ = schema.ParseAdditionalFields("type:envelope:eventType")
			cfg.Transforms.Props = tc.chain
			benchRecord(b, cfg)
		})
	}
	// Debezium's documented CloudEvents of outbox events: HeaderFrom$Value
	// on the change event before the router, CloudEventsConverter with
	// its metadata from headers.
	b.Run("debezium-outbox+cloudevents", func(b *testing.B) {
		var cfg Config
		cfg.Encoder.Format = schema.DebeziumOutbox
		d := &cfg.Encoder.Debezium
		d.Value, d.Header, d.ExpandJSONPayload = schema.ConvCloudEvents, schema.ConvJSONSchemas, true
		d.CloudEventsMetadata = schema.CloudEventsMetadata{Headers: true, IDHeader: true, TypeHeader: true}
		cfg.Columns.Additional, _ = schema.ParseAdditionalFields("type:header")
		cfg.Transforms.Props = map[string]string{"transforms": "meta,outbox", "transforms.outbox.type": transform.RouterClass,
			"transforms.meta.type": "org.apache.kafka.connect.transforms.HeaderFrom$Value", "transforms.meta.fields": "source,op,transaction",
			"transforms.meta.headers": "source,op,transaction", "transforms.meta.operation": "copy"}
		benchRecord(b, cfg)
	})
}

// BenchmarkRecordChangeEvents is the per-event path of the connector's
// change events (format debezium): written directly under JsonConverter,
// with schemas or without, and through Kafka Connect's data (written
// with schemas, read back, written again) under Debezium's
// CloudEventsConverter and StringConverter.
func BenchmarkRecordChangeEvents(b *testing.B) {
	for _, tc := range []struct{ name, key, value string }{
		{"json", "json", "json"},
		{"json-schemas", "json-schemas", "json-schemas"},
		{"cloudevents", "json-schemas", "cloudevents:json-schemas"},
		{"string-key", "string", "json-schemas"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var cfg Config
			cfg.Encoder.Format = schema.Debezium
			cfg.Encoder.Debezium.Key, cfg.Encoder.Debezium.Value = schema.Converter(tc.key), schema.Converter(tc.value)
			benchRecord(b, cfg)
		})
	}
}

// BenchmarkWatermark is the bookkeeping per event: add, ack, commit.
func BenchmarkWatermark(b *testing.B) {
	w := flow.NewWatermark(0, func(pglogrepl.LSN) {}, nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		tx := w.Begin(0)
		w.Add(tx)
		w.Commit(tx, pglogrepl.LSN(i))
		w.Ack(tx, nil)
	}
}
