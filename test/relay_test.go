package test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// An insert becomes a CloudEvent; cloudevents/sdk-go, an independent
// implementation of the spec, parses it and every attribute is checked, in
// both content modes.
func TestInsertBecomesCloudEvent(t *testing.T) {
	for _, format := range []schema.Format{schema.CloudEvents, schema.CloudEventsBinary} {
		t.Run(string(format), func(t *testing.T) {
			e := testenv.New(t)
			cfg := e.Config()
			cfg.Encoder.Format = format
			e.Start(cfg)
			testenv.Eventually(t, 10*time.Second, "slot", func() bool {
				var n int
				e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE active").Scan(&n)
				return n == 1
			})
			var id string
			err := e.Conn.QueryRow(context.Background(), `
INSERT INTO outbox (aggregatetype, aggregateid, type, payload, headers, created_at)
VALUES ('Order', 'order-42', 'OrderPlaced', '{"total": 1200, "items": ["a", "b"], "note": "한국어"}',
        '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}',
        '2026-11-21 10:11:12.345678+09')
RETURNING id::text`).Scan(&id)
			if err != nil {
				t.Fatal(err)
			}
			recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.Order"}, 1, 15*time.Second)
			rec := recs[0]
			if string(rec.Key) != "order-42" {
				t.Errorf("key %q, want the aggregate id", rec.Key)
			}
			if rec.Topic != "outbox.event.Order" {
				t.Errorf("topic %q", rec.Topic)
			}
			ev := parseCloudEvent(t, format, rec)
			if err := ev.Validate(); err != nil {
				t.Fatalf("sdk-go rejects the event: %v", err)
			}
			checks := map[string][2]any{
				"specversion":     {ev.SpecVersion(), "1.0"},
				"id":              {ev.ID(), id},
				"source":          {ev.Source(), "/pgoutbox/public.outbox"},
				"type":            {ev.Type(), "OrderPlaced"},
				"datacontenttype": {ev.DataContentType(), "application/json"},
				"partitionkey":    {fmt.Sprint(ev.Extensions()["partitionkey"]), "order-42"},
				"aggregatetype":   {fmt.Sprint(ev.Extensions()["aggregatetype"]), "Order"},
				"traceparent":     {fmt.Sprint(ev.Extensions()["traceparent"]), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			}
			for name, c := range checks {
				if c[0] != c[1] {
					t.Errorf("%s = %v, want %v", name, c[0], c[1])
				}
			}
			wantTime := time.Date(2026, 11, 21, 1, 11, 12, 345678000, time.UTC)
			if !ev.Time().Equal(wantTime) {
				t.Errorf("time %s, want %s", ev.Time(), wantTime)
			}
			var data map[string]any
			if err := json.Unmarshal(ev.Data(), &data); err != nil {
				t.Fatalf("data: %v", err)
			}
			if data["total"] != float64(1200) || data["note"] != "한국어" {
				t.Errorf("data %v", data)
			}
			wantCT := map[schema.Format]string{schema.CloudEvents: "application/cloudevents+json", schema.CloudEventsBinary: "application/json"}[format]
			if ct := header(rec, "content-type"); len(ct) < len(wantCT) || ct[:len(wantCT)] != wantCT {
				t.Errorf("content-type header %q, want %s", ct, wantCT)
			}
		})
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// parseCloudEvent reads a record the way the Kafka protocol binding says a
// consumer must: structured mode from the JSON value, binary mode from the
// ce_ headers with the value as data.
func parseCloudEvent(t *testing.T, format schema.Format, r *kgo.Record) cloudevents.Event {
	t.Helper()
	ev := cloudevents.New()
	if format == schema.CloudEvents {
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatalf("sdk-go cannot parse the structured event: %v\n%s", err, r.Value)
		}
		return ev
	}
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case "ce_specversion":
			ev.SetSpecVersion(v)
		case "ce_id":
			ev.SetID(v)
		case "ce_source":
			ev.SetSource(v)
		case "ce_type":
			ev.SetType(v)
		case "ce_time":
			tm, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				t.Fatalf("ce_time %q: %v", v, err)
			}
			ev.SetTime(tm)
		case "content-type":
			ev.SetDataContentType(v)
		default:
			if len(h.Key) > 3 && h.Key[:3] == "ce_" {
				ev.SetExtension(h.Key[3:], v)
			}
		}
	}
	if err := ev.SetData(ev.DataContentType(), r.Value); err != nil {
		t.Fatal(err)
	}
	return ev
}

// Concurrent writers interleave transactions of several events each for
// aggregates they lock, so the commit order of one aggregate's events is
// known; some transactions roll back. Every committed event arrives once,
// each aggregate's events arrive in commit order, and nothing of a
// rolled-back transaction is published (check fails on any event that was
// never committed).
func TestOrderPerAggregateAndRollback(t *testing.T) {
	e := testenv.New(t)
	cfg := e.Config()
	e.Setup(cfg)
	e.Start(cfg)
	load := e.StartLoad(t, 6)
	time.Sleep(2 * time.Second)
	committed := load.Finish()
	if load.RolledBack() == 0 {
		t.Fatal("no transaction rolled back; the test needs some")
	}
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	t.Logf("%v; %d transactions rolled back", rep, load.RolledBack())
	if rep.Lost != 0 || rep.Duplicates != 0 || rep.OrderViolations != 0 {
		t.Fatalf("without faults: lost %d, duplicates %d, order violations %d", rep.Lost, rep.Duplicates, rep.OrderViolations)
	}
}
