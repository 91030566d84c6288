package test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A Kafka Connect connector JSON and a Debezium Server application.properties
// with Kafka Connect's transforms chained after the Outbox Event Router
// (which pgoutbox refused before) drive real runs, `pgoutbox run --config
// FILE` as a user starts it, on a table that already holds rows: the
// struct value's schema is named behind TopicNameMatches, a RegexRouter
// renames the routed topics, InsertHeader adds a header, and Filter drops
// the audit events, whose rows are confirmed all the same. The rows
// already in the table go through the chain too, in the snapshot
// Debezium's default (snapshot.mode initial) takes.
func TestTransformsFromDebeziumConfigs(t *testing.T) {
	for _, form := range []string{"connect", "server"} {
		t.Run(form, func(t *testing.T) {
			e := testenv.NewBare(t, outboxEventTable)
			old := insertEvents(t, e, testenv.NewRow("order", "o-0", "OrderCreated", `{"old": true}`), testenv.NewRow("audit", "a-0", "Viewed", `{}`))
			host, port, user, db := testenv.DebeziumDB(t, e)
			chain := map[string]string{
				"transforms":             "outbox,meta,rename,tag,drop",
				"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
				"transforms.outbox.table.fields.additional.placement": "type:envelope:eventType",
				"transforms.meta.type":                                "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
				"transforms.meta.schema.name":                         "com.example.OrderEvent",
				"transforms.meta.predicate":                           "orders",
				"transforms.rename.type":                              "org.apache.kafka.connect.transforms.RegexRouter",
				"transforms.rename.regex":                             `outbox\\.event\\.(.*)`,
				"transforms.rename.replacement":                       "$1.v1",
				"transforms.tag.type":                                 "org.apache.kafka.connect.transforms.InsertHeader",
				"transforms.tag.header":                               "source",
				"transforms.tag.value.literal":                        "ledger-service",
				"transforms.drop.type":                                "org.apache.kafka.connect.transforms.Filter",
				"transforms.drop.predicate":                           "audit",
				"predicates":                                          "orders,audit",
				"predicates.orders.type":                              "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
				"predicates.orders.pattern":                           `outbox\\.event\\.order`,
				"predicates.audit.type":                               "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
				"predicates.audit.pattern":                            `audit\\.v1`,
			}
			dir := t.TempDir()
			var path, wantHeader string
			args := []string{"run", "--log-format", "json", "--status-interval", "100ms"}
			if form == "connect" {
				path = filepath.Join(dir, "outbox-connector.json")
				conf := `{"name": "outbox-connector", "config": {
  "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "database.hostname": "` + host + `", "database.port": "` + port + `",
  "database.user": "` + user + `", "database.dbname": "` + db + `",
  "topic.prefix": "shop", "plugin.name": "pgoutput", "slot.name": "shop",
  "table.include.list": "public.outboxevent",
  "key.converter": "org.apache.kafka.connect.storage.StringConverter",
  "value.converter": "org.apache.kafka.connect.json.JsonConverter"`
				for k, v := range chain {
					conf += ",\n  \"" + k + "\": \"" + v + "\""
				}
				if err := os.WriteFile(path, []byte(conf+"}}\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				// Kafka Connect's brokers are the worker's: a user gives them.
				args = append(args, "--config", path, "--kafka-brokers", strings.Join(e.Brokers, ","))
				wantHeader = "ledger-service" // SimpleHeaderConverter, Connect's default
			} else {
				path = filepath.Join(dir, "application.properties")
				props := testenv.DebeziumServerKafka(t, e) + `debezium.source.topic.prefix=shop
debezium.source.plugin.name=pgoutput
debezium.source.slot.name=shop
debezium.source.table.include.list=public.outboxevent
debezium.format.key=simplestring
`
				for k, v := range chain {
					props += "debezium." + k + "=" + v + "\n" // the same escapes in Properties as in JSON
				}
				if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
				wantHeader = `{"schema":{"type":"string","optional":false},"payload":"ledger-service"}` // Debezium Server's json headers
			}
			p := testenv.StartBinaryEnv(t, nil, args...)
			e.AwaitSlotActive(t, "shop")
			ids := insertEvents(t, e, testenv.NewRow("order", "o-1", "OrderCreated", `{"n": 1}`), testenv.NewRow("audit", "a-1", "Viewed", `{"n": 2}`))
			ids = append(ids, insertEvents(t, e, testenv.NewRow("audit", "a-2", "Viewed", `{}`))...)
			ids = append(ids, insertEvents(t, e, testenv.NewRow("order", "o-1", "OrderPaid", `{"n": 3}`))...)
			end := e.CurrentLSN()

			want := []string{old[0], ids[0], ids[3]}
			recs := kafkatest.Consume(t, e.Brokers, []string{"order.v1"}, len(want), 20*time.Second)
			for i, r := range recs {
				if k := string(r.Key); k != "o-0" && k != "o-1" {
					t.Errorf("record %d: key %q", i, r.Key)
				}
				if !strings.Contains(string(r.Value), `"optional":false,"name":"com.example.OrderEvent"},"payload":{"payload":`) {
					t.Errorf("record %d: value %s, want its schema named com.example.OrderEvent", i, r.Value)
				}
				if got, _ := testenv.HeaderOf(r, "source"); got != wantHeader {
					t.Errorf("record %d: header source %q, want %q", i, got, wantHeader)
				}
				if id, _ := testenv.HeaderOf(r, "id"); !strings.Contains(id, want[i]) {
					t.Errorf("record %d: header id %q, want event %s", i, id, want[i])
				}
			}
			// The audit rows were read and dropped, and confirmed with the
			// rest: the slot moves past them.
			testenv.Eventually(t, 20*time.Second, "the slot confirmed past the filtered rows", func() bool {
				var s string
				err := e.Conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'shop'").Scan(&s)
				lsn, _ := pglogrepl.ParseLSN(s)
				return err == nil && lsn >= end
			})
			if err := p.Signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("pgoutbox run: %v\n%s", err, p.Out)
			}
			if n := len(testenv.Drain(t, e.Brokers, "order.v1", 0)); n != len(want) {
				t.Errorf("%d records in order.v1, want %d", n, len(want))
			}
			topics, err := kadm.NewClient(kafkatest.NewConsumer(t, e.Brokers)).ListTopics(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if topics.Has("audit.v1") || topics.Has("outbox.event.audit") {
				t.Errorf("the audit events were published: topics %v", topics.Names())
			}
			out := p.Out.String()
			for _, want := range []string{`"transforms":"meta,rename,tag,drop"`, `"msg":"pgoutbox stopped","published":3,"filtered":3`} {
				if !strings.Contains(out, want) {
					t.Errorf("no %s in what pgoutbox printed:\n%s", want, out)
				}
			}
			if strings.Contains(out, `"level":"ERROR"`) {
				t.Errorf("pgoutbox printed:\n%s", out)
			}
		})
	}
}

// outboxEventTable is Debezium's documented outbox table, with an event
// type column: a table of a team moving from Debezium, without pgoutbox's
// polling columns.
const outboxEventTable = `CREATE TABLE public.outboxevent (
  id uuid NOT NULL PRIMARY KEY DEFAULT gen_random_uuid(),
  aggregatetype varchar(255) NOT NULL,
  aggregateid varchar(255) NOT NULL,
  type varchar(255) NOT NULL,
  payload jsonb)`

// insertEvents inserts rows into outboxevent in one transaction and
// returns their ids.
func insertEvents(t *testing.T, e *testenv.Env, rows ...testenv.Row) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := e.Conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		if err := tx.QueryRow(ctx, `INSERT INTO outboxevent (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, $4) RETURNING id::text`,
			r.AggType, r.AggID, r.Type, r.Payload).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// Kafka Connect takes the connector's aliases, but Debezium's task then
// fails loading the class by that name: run refuses them at start, naming
// the class to write, before it touches the database.
func TestConnectorAliasRefused(t *testing.T) {
	for _, class := range []string{"PostgresConnector", "Postgres"} {
		path := testenv.WriteFile(t, "connector.json", `{"name": "outbox-connector", "config": {
  "connector.class": "`+class+`", "topic.prefix": "shop", "plugin.name": "pgoutput",
  "database.hostname": "localhost", "database.dbname": "shop", "database.user": "app",
  "transforms": "outbox", "transforms.outbox.type": "EventRouter"}}`)
		code, out := testenv.RunOnce(t, 30*time.Second, nil, "run", "--config", path)
		if code == 0 || !strings.Contains(out, "connector.class") || !strings.Contains(out, "ClassNotFoundException") ||
			!strings.Contains(out, "io.debezium.connector.postgresql.PostgresConnector") {
			t.Errorf("connector.class %s: exit %d:\n%s", class, code, out)
		}
	}
}
