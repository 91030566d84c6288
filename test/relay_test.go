package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// An insert becomes a CloudEvent; cloudevents/sdk-go, an independent
// implementation of the spec, parses it and every attribute is checked, in
// both content modes.
func TestInsertBecomesCloudEvent(t *testing.T) {
	for _, format := range []schema.Format{schema.CloudEvents, schema.CloudEventsBinary} {
		t.Run(string(format), func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config()
			cfg.Encoder.Format = format
			e.start(cfg)
			eventually(t, 10*time.Second, "slot", func() bool {
				var n int
				e.conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE active").Scan(&n)
				return n == 1
			})
			var id string
			err := e.conn.QueryRow(context.Background(), `
INSERT INTO outbox (aggregatetype, aggregateid, type, payload, headers, created_at)
VALUES ('Order', 'order-42', 'OrderPlaced', '{"total": 1200, "items": ["a", "b"], "note": "한국어"}',
        '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}',
        '2026-11-21 10:11:12.345678+09')
RETURNING id::text`).Scan(&id)
			if err != nil {
				t.Fatal(err)
			}
			recs := kafkatest.Consume(t, e.brokers, []string{"outbox.event.Order"}, 1, 15*time.Second)
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
// rolled-back transaction is published.
func TestOrderPerAggregateAndRollback(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, `CREATE TABLE account (id text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO account (id) SELECT 'acct-' || g FROM generate_series(0, 9) g`); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	e.setup(cfg)
	e.start(cfg)

	const writers, txPerWriter, eventsPerTx = 6, 40, 3
	var (
		mu         sync.Mutex
		committed  = map[string]bool{} // event id -> committed
		rolledBack = map[string]bool{}
	)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := e.connect()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < txPerWriter; i++ {
				acct := fmt.Sprintf("acct-%d", rng.IntN(10))
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				// Lock the aggregate and take its next version: the order
				// in which versions are taken is the aggregate's commit order.
				var version int
				if err := tx.QueryRow(ctx, "UPDATE account SET version = version + 1 WHERE id = $1 RETURNING version", acct).Scan(&version); err != nil {
					t.Error(err)
					return
				}
				var ids []string
				for j := 0; j < eventsPerTx; j++ {
					var id string
					payload := fmt.Sprintf(`{"version": %d, "n": %d}`, version, j)
					if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('account', $1, 'Posted', $2) RETURNING id::text`,
						acct, payload).Scan(&id); err != nil {
						t.Error(err)
						return
					}
					ids = append(ids, id)
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond) // interleave with other writers
				}
				rollback := rng.IntN(8) == 0
				mu.Lock()
				if rollback {
					err = tx.Rollback(ctx)
					for _, id := range ids {
						rolledBack[id] = true
					}
				} else {
					err = tx.Commit(ctx)
					for _, id := range ids {
						committed[id] = true
					}
				}
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(rolledBack) == 0 {
		t.Fatal("no transaction rolled back; the test needs some")
	}

	recs := kafkatest.Consume(t, e.brokers, []string{"outbox.event.account"}, len(committed), 30*time.Second)
	// Everything in the topic: anything beyond the committed events is a defect.
	total := len(drain(t, e.brokers, "outbox.event.account", 0))
	if total != len(committed) {
		t.Errorf("topic holds %d records, %d events were committed", total, len(committed))
	}

	last := map[string][2]int{} // key -> (version, n) last seen
	seen := map[string]bool{}
	for _, r := range recs {
		ev := decodeEvent(t, r)
		if rolledBack[ev.ID] {
			t.Errorf("event %s of a rolled-back transaction was published", ev.ID)
		}
		if !committed[ev.ID] {
			t.Errorf("unknown event %s", ev.ID)
		}
		if seen[ev.ID] {
			t.Errorf("event %s published twice in a run without faults", ev.ID)
		}
		seen[ev.ID] = true
		var p struct{ Version, N int }
		if err := json.Unmarshal(ev.Data, &p); err != nil {
			t.Fatal(err)
		}
		key := string(r.Key)
		prev, ok := last[key]
		if ok && (p.Version < prev[0] || (p.Version == prev[0] && p.N <= prev[1])) {
			t.Errorf("aggregate %s: event (version %d, n %d) after (version %d, n %d)", key, p.Version, p.N, prev[0], prev[1])
		}
		last[key] = [2]int{p.Version, p.N}
	}
	t.Logf("%d committed events in order, %d rolled back and absent", len(committed), len(rolledBack))
}

func pollCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
