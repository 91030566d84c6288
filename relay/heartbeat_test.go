package relay

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

func hbConfig(format schema.Format) Config {
	var cfg Config
	cfg.Replication.DatabaseURL = "postgres://127.0.0.1:1/none"
	cfg.Replication.Slot = "s1"
	cfg.Sink = fakeOpener{}
	cfg.Router.Topic = "{aggregatetype}"
	cfg.OnPoison = PoisonHalt
	cfg.Mode = ModeWAL
	cfg.Encoder.Format = format
	cfg.Encoder.Debezium.TopicPrefix = "pfx"
	cfg.Encoder.Debezium.Key = schema.ConvJSON
	cfg.Encoder.Debezium.Value = schema.ConvJSON
	cfg.Encoder.Debezium.Header = schema.ConvString
	cfg.HeartbeatTopic = "__debezium-heartbeat.pfx"
	return cfg
}

func heartbeatAt(lsn pglogrepl.LSN, slot string) outbox.Change {
	return outbox.Change{Kind: outbox.KindHeartbeat, LSN: lsn, Values: [][]byte{[]byte(slot)}}
}

// Each heartbeat of the pipeline's own slot gives Debezium's heartbeat
// record, and its position is confirmed only once that record and
// everything before it are acked; another slot's heartbeat gives none.
func TestHeartbeatRecords(t *testing.T) {
	r, err := New(hbConfig(schema.DebeziumOutbox), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	k := newFakeSink()
	var c confirms
	p := txPublisher(t, r.p, k, &c, 0)
	batch := []outbox.Change{
		txRow(771, 10, "orders", "a1"), txCommit(771, 100),
		heartbeatAt(120, "s1"), heartbeatAt(130, "s2"), heartbeatAt(140, "s1"),
	}
	if err := p.publish(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	got := buffered(k)
	want := []struct{ topic, has string }{
		{"order", ``},
		{"__debezium-heartbeat.pfx", `{"ts_ms":`},
		{"__debezium-heartbeat.pfx", `{"ts_ms":`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		topic, value, _ := strings.Cut(got[i], " ")
		if topic != w.topic || !strings.Contains(value, w.has) {
			t.Errorf("record %d: %s, want on %s with %s", i, got[i], w.topic, w.has)
		}
	}
	k.mu.Lock()
	key, part := string(k.buffered[1].rec.Key), k.buffered[1].rec.Partition
	k.mu.Unlock()
	if key != `{"serverName":"pfx"}` || part != 0 {
		t.Errorf("heartbeat key %s in partition %d, want {\"serverName\":\"pfx\"} in 0", key, part)
	}
	k.ack(0)
	if got := c.last(); got != 100 {
		t.Fatalf("confirmed %s once the event was acked, want 100", got)
	}
	k.ack(0)
	if got := c.last(); got != 130 {
		t.Fatalf("confirmed %s once the first heartbeat record was acked, want 130 (the other slot's heartbeat with it)", got)
	}
	k.ack(0)
	if got := c.last(); got != 140 {
		t.Fatalf("confirmed %s, want 140", got)
	}
}

// A transform after the router that drops the heartbeat record leaves its
// position to be confirmed at once.
func TestHeartbeatRecordDropped(t *testing.T) {
	cfg := hbConfig(schema.DebeziumOutbox)
	cfg.Transforms = transform.Config{Props: map[string]string{
		"transforms": "outbox,drop", "transforms.outbox.type": transform.RouterClass,
		"transforms.drop.type": "org.apache.kafka.connect.transforms.Filter", "transforms.drop.predicate": "hb",
		"predicates": "hb", "predicates.hb.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
		"predicates.hb.pattern": "__debezium-heartbeat.*",
	}}
	r, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	k := newFakeSink()
	var c confirms
	p := txPublisher(t, r.p, k, &c, 0)
	if err := p.publish(context.Background(), []outbox.Change{heartbeatAt(120, "s1")}); err != nil {
		t.Fatal(err)
	}
	if n := k.pending(); n != 0 {
		t.Fatalf("%d records buffered, want none", n)
	}
	if got := c.last(); got != 120 {
		t.Fatalf("confirmed %s, want 120", got)
	}
}

// Heartbeat records are Debezium's: other formats and a transform before
// the router are refused, naming what refuses them.
func TestHeartbeatValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{name: "debezium", change: func(c *Config) { c.Encoder.Format = schema.Debezium; c.Router.Topic = "pfx.{schema}.{table}" }},
		{name: "plain", change: func(c *Config) { c.Encoder.Format = schema.Format("json") }, want: "heartbeat records (--heartbeat-topic, heartbeat.interval.ms) are Debezium's"},
		{name: "topic", change: func(c *Config) { c.HeartbeatTopic = "a b" }, want: `heartbeat topic "a b" is not a valid topic name`},
		{name: "before the router", change: func(c *Config) {
			c.Transforms = transform.Config{Props: map[string]string{
				"transforms": "h,outbox", "transforms.outbox.type": transform.RouterClass,
				"transforms.h.type":   "org.apache.kafka.connect.transforms.HeaderFrom$Value",
				"transforms.h.fields": "source,op", "transforms.h.headers": "source,op", "transforms.h.operation": "copy",
			}}
		}, want: "heartbeat records (heartbeat.interval.ms above 0) with a transform before the Outbox Event Router"},
	} {
		cfg := hbConfig(schema.DebeziumOutbox)
		tt.change(&cfg)
		err := cfg.heartbeatValidate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
