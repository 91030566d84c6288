package test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// seedShape is an outbox table of a shape teams already run (from
// ../shared/seeds), with the column mapping that relays it unchanged.
type seedShape struct {
	name    string
	ddl     string // the seed's table, in Postgres types
	table   string
	columns schema.Columns
	// insert adds one event and returns its id, aggregate id and payload
	// as the table holds them (text).
	insert string
	args   []any
	// wantHeader / wantExt: additional columns carried as a Kafka header
	// and as a CloudEvents extension.
	wantHeader, wantHeaderValue string
	wantExt, wantExtValue       string
	wantTime                    string // RFC 3339 of the time column, "" for the commit time
}

var seedShapes = []seedShape{
	{
		// 000: a ledger's outbox_event (MySQL in the seed: BIGINT
		// AUTO_INCREMENT ids, aggregate_id BIGINT, payload JSON,
		// DATETIME(6) created_at, a status column).
		name: "outbox_event",
		ddl: `CREATE TABLE public.outbox_event (
  id BIGSERIAL PRIMARY KEY,
  aggregate_type VARCHAR(50) NOT NULL,
  aggregate_id BIGINT NOT NULL,
  event_type VARCHAR(100) NOT NULL,
  payload JSON NOT NULL,
  status VARCHAR(20) NOT NULL DEFAULT 'PENDING',
  retry_count INT NOT NULL DEFAULT 0,
  created_at TIMESTAMP(6) NOT NULL,
  processed_at TIMESTAMP(6) NULL)`,
		table: "public.outbox_event",
		columns: schema.Columns{AggregateType: "aggregate_type", AggregateID: "aggregate_id", Type: "event_type",
			Additional: []schema.AdditionalField{{Column: "status", Placement: schema.PlaceHeader}}},
		insert: `INSERT INTO public.outbox_event (aggregate_type, aggregate_id, event_type, payload, created_at)
VALUES ('TRANSACTION', 9007199254740993, 'LEDGER_POSTED', '{"transactionId": 9007199254740993, "amount": "10.00"}', '2025-12-26 09:30:00.123456')
RETURNING id::text, aggregate_id::text, payload::text`,
		wantHeader: "status", wantHeaderValue: "PENDING",
		wantTime: "2025-12-26T09:30:00.123456Z",
	},
	{
		// 001: a commerce outbox with its own uuid in event_id (the
		// bigserial id is a cursor), and a source column.
		name: "outbox_event_id_source",
		ddl: `CREATE SCHEMA shop; CREATE TABLE shop.outbox (
  id BIGSERIAL PRIMARY KEY,
  event_id VARCHAR(36) NOT NULL,
  event_type VARCHAR(100) NOT NULL,
  source VARCHAR(100) NOT NULL,
  aggregate_type VARCHAR(100) NOT NULL,
  aggregate_id VARCHAR(255) NOT NULL,
  payload JSONB NOT NULL,
  created_at TIMESTAMPTZ NOT NULL DEFAULT NOW())`,
		table: "shop.outbox",
		columns: schema.Columns{ID: "event_id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", Type: "event_type",
			Additional: []schema.AdditionalField{
				{Column: "source", Placement: schema.PlaceHeader},
				{Column: "source", Placement: schema.PlaceEnvelope, Alias: "producer"},
			}},
		insert: `INSERT INTO shop.outbox (event_id, event_type, source, aggregate_type, aggregate_id, payload, created_at)
VALUES ('5b1c0a4e-8f0e-4b8a-9d55-3f1c2f7e6a01', 'loopers.order.created.v1', 'commerce-api', 'Order', 'order-77', '{"orderId": "order-77", "total": 12000}', '2026-01-05 10:00:00+09')
RETURNING event_id, aggregate_id, payload::text`,
		wantHeader: "source", wantHeaderValue: "commerce-api",
		wantExt: "producer", wantExtValue: "commerce-api",
		wantTime: "2026-01-05T01:00:00.000000Z",
	},
	{
		// 004: transfer_events, ids in event_id (BIGSERIAL), payload and
		// headers as TEXT, TIMESTAMP created_at.
		name: "transfer_events",
		ddl: `CREATE TABLE public.transfer_events (
  event_id BIGSERIAL PRIMARY KEY,
  aggregate_type VARCHAR(50) NOT NULL,
  aggregate_id VARCHAR(100) NOT NULL,
  event_type VARCHAR(50) NOT NULL,
  payload TEXT NOT NULL,
  headers TEXT,
  status VARCHAR(20) NOT NULL DEFAULT 'PENDING',
  attempt_count INT NOT NULL DEFAULT 0,
  next_retry_at TIMESTAMP NOT NULL DEFAULT NOW(),
  created_at TIMESTAMP NOT NULL DEFAULT NOW(),
  updated_at TIMESTAMP NOT NULL DEFAULT NOW(),
  published_at TIMESTAMP,
  last_error TEXT)`,
		table: "public.transfer_events",
		// A text headers column is the table's own metadata: read as
		// extensions only when named.
		columns: schema.Columns{ID: "event_id", AggregateType: "aggregate_type", AggregateID: "aggregate_id", Type: "event_type", Headers: "headers"},
		insert: `INSERT INTO public.transfer_events (aggregate_type, aggregate_id, event_type, payload, headers, created_at)
VALUES ('Transfer', 'tx-0001', 'TransferCompleted', '{"from": "acct-1", "to": "acct-2", "amount": 5000}', '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}', '2026-02-01 12:00:00')
RETURNING event_id::text, aggregate_id, payload`,
		wantExt: "traceparent", wantExtValue: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		wantTime: "2026-02-01T12:00:00.000000Z",
	},
}

// relayModes are the source modes a column-mapping test runs in. Polling
// needs the polling columns, which migrate adds to an existing table.
var relayModes = []struct {
	name string
	poll bool
	set  func(*relay.Config)
}{
	{"wal", false, func(*relay.Config) {}},
	{"poll", true, func(c *relay.Config) { c.Mode = relay.ModePoll; c.PollInterval = 50 * time.Millisecond }},
}

// Each seed table shape relays end to end through the column mapping: the
// CloudEvent's id is the mapped id column (bigint or varchar uuid), the
// key and partitionkey the mapped aggregate id (bigint or text), data the
// payload (json, jsonb or text), time the mapped time column, and the
// additional columns arrive as a header and an extension.
func TestDebeziumColumnMappingSeedShapes(t *testing.T) {
	for _, mode := range relayModes {
		for _, shape := range seedShapes {
			t.Run(mode.name+"/"+shape.name, func(t *testing.T) {
				e := testenv.New(t)
				ctx := context.Background()
				if _, err := e.Conn.Exec(ctx, shape.ddl); err != nil {
					t.Fatal(err)
				}
				cfg := e.Config()
				cfg.Replication.Table = shape.table
				cfg.Columns = shape.columns
				mode.set(&cfg)
				if mode.poll {
					table, err := outbox.ParseTable(shape.table)
					if err != nil {
						t.Fatal(err)
					}
					if err := migrations.AddPollingColumns(ctx, e.Conn, table.Schema, table.Name); err != nil {
						t.Fatal(err)
					}
				} else {
					e.Setup(cfg)
				}
				e.Start(cfg)

				var id, aggID, payload string
				if err := e.Conn.QueryRow(ctx, shape.insert, shape.args...).Scan(&id, &aggID, &payload); err != nil {
					t.Fatal(err)
				}
				var aggType string
				if err := e.Conn.QueryRow(ctx, "SELECT "+shape.columns.AggregateType+" FROM "+shape.table).Scan(&aggType); err != nil {
					t.Fatal(err)
				}
				recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event." + aggType}, 1, 20*time.Second)
				r := recs[0]
				var ev map[string]any
				dec := json.NewDecoder(bytes.NewReader(r.Value))
				dec.UseNumber()
				if err := dec.Decode(&ev); err != nil {
					t.Fatalf("value is not JSON: %v: %s", err, r.Value)
				}
				if ev["id"] != id {
					t.Errorf("id = %v, want the %s column %q", ev["id"], shape.columns.ID, id)
				}
				if string(r.Key) != aggID || ev["partitionkey"] != aggID {
					t.Errorf("key = %q, partitionkey = %v, want %q", r.Key, ev["partitionkey"], aggID)
				}
				data, _ := json.Marshal(ev["data"])
				if !jsonEqual(t, data, []byte(payload)) {
					t.Errorf("data = %s, want %s", data, payload)
				}
				if shape.wantTime != "" && ev["time"] != shape.wantTime {
					t.Errorf("time = %v, want %s", ev["time"], shape.wantTime)
				}
				if shape.wantExt != "" && ev[shape.wantExt] != shape.wantExtValue {
					t.Errorf("extension %s = %v, want %q (value %s)", shape.wantExt, ev[shape.wantExt], shape.wantExtValue, r.Value)
				}
				if shape.wantHeader != "" {
					if got, ok := testenv.HeaderOf(r, shape.wantHeader); !ok || got != shape.wantHeaderValue {
						t.Errorf("header %s = %q (present %v), want %q", shape.wantHeader, got, ok, shape.wantHeaderValue)
					}
				}
			})
		}
	}
}

// The ledger's outbox_event through --format debezium-outbox: bigint id
// and aggregate id become the header "id" and the key as the
// StringConverter/SimpleHeaderConverter write int64 values, the JSON
// payload the value as a JSON string.
func TestDebeziumOutboxFormatBigintIDs(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	shape := seedShapes[0]
	if _, err := e.Conn.Exec(ctx, shape.ddl); err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	cfg.Replication.Table = shape.table
	cfg.Columns = shape.columns
	cfg.Encoder.Format = schema.DebeziumOutbox
	cfg.Router.RouteReplacement = "outbox.event.${routedByValue}"
	e.Setup(cfg)
	e.Start(cfg)
	var id, aggID, payload string
	if err := e.Conn.QueryRow(ctx, shape.insert).Scan(&id, &aggID, &payload); err != nil {
		t.Fatal(err)
	}
	r := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.TRANSACTION"}, 1, 20*time.Second)[0]
	wantValue, _ := json.Marshal(payload)
	if string(r.Key) != "9007199254740993" || string(r.Value) != string(wantValue) {
		t.Errorf("key %q value %s; want 9007199254740993 and %s", r.Key, r.Value, wantValue)
	}
	if got, _ := testenv.HeaderOf(r, "id"); got != id {
		t.Errorf("header id = %q, want %q", got, id)
	}
	if got, _ := testenv.HeaderOf(r, "status"); got != "PENDING" {
		t.Errorf("header status = %q, want PENDING", got)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
