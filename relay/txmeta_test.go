package relay

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

// txPipeline is a pipeline of format (debezium or debezium-outbox) that
// writes transaction metadata to "pfx.transaction".
func txPipeline(t *testing.T, format schema.Format) *pipeline {
	t.Helper()
	var cfg Config
	cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
	cfg.Sink = fakeOpener{}
	cfg.Router.Topic = "{aggregatetype}"
	cfg.OnPoison = PoisonHalt
	cfg.Mode = ModeWAL
	cfg.Encoder.Format = format
	cfg.Encoder.Debezium.TopicPrefix = "pfx"
	cfg.Encoder.Debezium.Key = schema.ConvJSON
	cfg.Encoder.Debezium.Value = schema.ConvJSON
	cfg.Encoder.Debezium.Header = schema.ConvString
	cfg.TransactionTopic = "pfx.transaction"
	r, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r.p
}

// txPublisher is a WAL session's publisher with transaction metadata, its
// rows below floor skipped.
func txPublisher(t *testing.T, r *pipeline, k Sink, c *confirms, floor uint32) *publisher {
	t.Helper()
	p, _ := walPublisher(t, r, k, c)
	wm := flow.NewWatermark(0, c.confirm, nil)
	p.streaming(flow.NewWALLedger(wm, &flow.Polled{}, r.cfg.Poll.Order, floor, r.stats.skipped()), context.Background())
	return p
}

func txRow(xid uint32, lsn pglogrepl.LSN, table, id string) outbox.Change {
	c := row(lsn, id, "order", "A", "Placed", `{}`)
	c.XID = xid
	c.Relation = &outbox.Relation{Schema: "public", Name: table, Columns: testRel.Columns}
	return c
}

func txCommit(xid uint32, lsn pglogrepl.LSN) outbox.Change {
	return outbox.Change{Kind: outbox.KindCommit, LSN: lsn, XID: xid}
}

// buffered are the fake sink's records not yet acked, as "topic value".
func buffered(k *fakeSink) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, len(k.buffered))
	for i, b := range k.buffered {
		out[i] = b.rec.Topic + " " + string(b.rec.Value)
	}
	return out
}

// A transaction's BEGIN comes before its first event, its END after its
// last, each change event carries its block, and the commit is confirmed
// only once the END is acked too. A transaction with no event gets
// neither record.
func TestTransactionMetadataRecords(t *testing.T) {
	r := txPipeline(t, schema.Debezium)
	k := newFakeSink()
	var c confirms
	p := txPublisher(t, r, k, &c, 0)
	batch := []outbox.Change{
		txRow(771, 10, "orders", "a1"), txRow(771, 20, "order_lines", "a2"), txRow(771, 30, "orders", "a3"), txCommit(771, 100),
		txCommit(772, 150), // an empty transaction
		txRow(773, 160, "orders", "b1"), txCommit(773, 200),
	}
	if err := p.publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	got := buffered(k)
	want := []struct{ topic, has string }{
		{"pfx.transaction", `{"status":"BEGIN","id":"771:10","event_count":null,"data_collections":null,"ts_ms":`},
		{"order", `"transaction":{"id":"771:10","total_order":1,"data_collection_order":1}`},
		{"order", `"transaction":{"id":"771:20","total_order":2,"data_collection_order":1}`},
		{"order", `"transaction":{"id":"771:30","total_order":3,"data_collection_order":2}`},
		{"pfx.transaction", `{"status":"END","id":"771:100","event_count":3,"data_collections":[{"data_collection":"public.orders","event_count":2},{"data_collection":"public.order_lines","event_count":1}],"ts_ms":`},
		{"pfx.transaction", `{"status":"BEGIN","id":"773:160"`},
		{"order", `"transaction":{"id":"773:160","total_order":1,"data_collection_order":1}`},
		{"pfx.transaction", `{"status":"END","id":"773:200","event_count":1,"data_collections":[{"data_collection":"public.orders","event_count":1}]`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		topic, value, _ := strings.Cut(got[i], " ")
		if !strings.HasPrefix(topic, w.topic) || !strings.Contains(value, w.has) {
			t.Errorf("record %d: %s, want on %s with %s", i, got[i], w.topic, w.has)
		}
	}
	// The events and the BEGIN acked, the END not: nothing is confirmed.
	for range 4 {
		k.ack(0)
	}
	if got := c.last(); got != 0 {
		t.Fatalf("confirmed %s before the END was acked", got)
	}
	k.ack(0)
	if got := c.last(); got != 150 {
		t.Fatalf("confirmed %s once the END was acked, want 150 (the empty transaction with it)", got)
	}
	for range 3 {
		k.ack(0)
	}
	if got := c.last(); got != 200 {
		t.Fatalf("confirmed %s, want 200", got)
	}
}

// The router passes the transaction records as they are, to the
// transaction topic; its events carry no block (the router's record is
// the payload). A transaction the ledger skips whole (below the floor:
// Kafka has it) gets neither record again.
func TestTransactionMetadataOutboxAndReplay(t *testing.T) {
	r := txPipeline(t, schema.DebeziumOutbox)
	k := newFakeSink()
	var c confirms
	p := txPublisher(t, r, k, &c, 780)
	batch := []outbox.Change{
		txRow(771, 10, "orders", "a1"), txCommit(771, 100), // below the floor
		txRow(781, 110, "orders", "b1"), txRow(781, 120, "orders", "b2"), txCommit(781, 200),
	}
	if err := p.publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for k.pending() > 0 {
		k.ack(0)
	}
	var topics []string
	for _, rec := range k.delivered {
		topics = append(topics, rec.Topic)
		if rec.Topic == "pfx.transaction" {
			if !strings.Contains(string(rec.Key), `"id":"781:`) {
				t.Errorf("key %s", rec.Key)
			}
		} else if strings.Contains(string(rec.Value), "transaction") {
			t.Errorf("the router's record carries the block: %s", rec.Value)
		}
	}
	if got := strings.Join(topics, ","); got != "pfx.transaction,order,order,pfx.transaction" {
		t.Errorf("records to %s", got)
	}
	if got := c.last(); got != 200 {
		t.Errorf("confirmed %s, want 200", got)
	}
}

// Transaction metadata needs the WAL and a Debezium format; a transform
// before the router would run on the transaction records too.
func TestTransactionMetadataConfig(t *testing.T) {
	base := func() Config {
		var cfg Config
		cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
		cfg.Replication.Table = "public.outbox"
		cfg.Sink = fakeOpener{}
		cfg.Mode = ModeWAL
		cfg.Encoder.Format = schema.DebeziumOutbox
		cfg.TransactionTopic = "pfx.transaction"
		return cfg
	}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"wal", func(*Config) {}, ""},
		{"poll", func(c *Config) { c.Mode = ModePoll }, "needs --mode wal"},
		{"auto", func(c *Config) { c.Mode = ModeAuto }, "needs --mode wal"},
		{"cloudevents", func(c *Config) { c.Encoder.Format = schema.CloudEvents }, "--format debezium or debezium-outbox"},
		{"topic", func(c *Config) { c.TransactionTopic = "a b" }, "not a valid topic name"},
		{"before the router", func(c *Config) {
			c.Transforms = transform.Config{Props: map[string]string{
				"transforms": "h,outbox", "transforms.outbox.type": transform.RouterClass,
				"transforms.h.type":   "org.apache.kafka.connect.transforms.HeaderFrom$Value",
				"transforms.h.fields": "source,op", "transforms.h.headers": "source,op", "transforms.h.operation": "copy",
			}}
		}, "before the Outbox Event Router"},
	} {
		cfg := base()
		tt.edit(&cfg)
		cfg.Defaults()
		err := cfg.txMetaValidate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
