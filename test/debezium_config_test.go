package test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// debeziumDB returns the database.* options of the test's server, as a
// Debezium configuration would name it.
func (e *env) debeziumDB(t *testing.T) (host, port, user, dbname string) {
	t.Helper()
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/")
}

// awaitSlotActive waits until a process streams from the slot, so that
// rows inserted afterwards are in its stream.
func (e *env) awaitSlotActive(t *testing.T, slot string) {
	t.Helper()
	eventually(t, 30*time.Second, "slot "+slot+" active", func() bool {
		var active bool
		err := e.conn.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		return err == nil && active
	})
}

// A Debezium Server application.properties with the Outbox Event Router
// drives a real run: its slot and publication are created under its names,
// the router selects debezium-outbox, and the records are what Debezium
// Server writes with its default formats (json with schemas for key and
// headers) and value schemas off. Its ignored options are named in one
// warning.
func TestDebeziumServerPropertiesEndToEnd(t *testing.T) {
	e := newEnv(t)
	host, port, user, db := e.debeziumDB(t)
	path := filepath.Join(t.TempDir(), "application.properties")
	props := `# Debezium Server
debezium.sink.type=kafka
debezium.sink.kafka.producer.bootstrap.servers=` + strings.Join(e.brokers, ",") + `
debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.sink.kafka.producer.value.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.offset.flush.interval.ms=0
debezium.source.database.hostname=` + host + `
debezium.source.database.port=` + port + `
debezium.source.database.user=` + user + `
debezium.source.database.dbname=` + db + `
debezium.source.topic.prefix=shop
debezium.source.plugin.name=pgoutput
debezium.source.slot.name=dbz_shop
debezium.source.publication.name=dbz_publication
debezium.source.table.include.list=public\\.outbox
debezium.source.snapshot.mode=no_data
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.table.fields.additional.placement=type:header:eventType
debezium.format.value.schemas.enable=false
`
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.runProcess(t, "--config", path)
	e.awaitSlotActive(t, "dbz_shop")
	ids := e.insert(row{"account", "acct-7", "Withdrawn", `{"amount": 5000, "currency": "KRW"}`})

	r := kafkatest.Consume(t, e.brokers, []string{"outbox.event.account"}, 1, 20*time.Second)[0]
	if want := `{"schema":{"type":"string","optional":false},"payload":"acct-7"}`; string(r.Key) != want {
		t.Errorf("key %s, want %s", r.Key, want)
	}
	if want := `"{\"amount\": 5000, \"currency\": \"KRW\"}"`; string(r.Value) != want {
		t.Errorf("value %s, want %s", r.Value, want)
	}
	wantID := `{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"` + ids[0] + `"}`
	if got, _ := headerOf(r, "id"); got != wantID {
		t.Errorf("header id %s, want %s", got, wantID)
	}
	if got, _ := headerOf(r, "eventType"); got != `{"schema":{"type":"string","optional":false},"payload":"Withdrawn"}` {
		t.Errorf("header eventType %s", got)
	}
	p.signal(t, 15)
	out := p.out.String()
	if !strings.Contains(out, "ignoring Debezium options pgoutbox does not use: debezium.source.offset.flush.interval.ms, debezium.source.offset.storage.file.filename") {
		t.Errorf("no warning naming the ignored options:\n%s", out)
	}
}

// A Kafka Connect connector JSON with the Outbox Event Router, an expanded
// payload, a string key, a custom route.topic.replacement and its
// credentials behind config provider placeholders drives a real run.
func TestKafkaConnectJSONEndToEnd(t *testing.T) {
	e := newEnv(t)
	host, port, user, db := e.debeziumDB(t)
	// The user and the database come from the worker's config providers,
	// as a deployment keeps its credentials out of the connector's JSON.
	dir := t.TempDir()
	path := filepath.Join(dir, "outbox-connector.json")
	secrets := filepath.Join(dir, "secrets.properties")
	if err := os.WriteFile(secrets, []byte("# the relay's role\ndb.user = "+user+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dbname"), []byte(db), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := `{
  "name": "outbox-connector",
  "config": {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "tasks.max": "1",
    "database.hostname": "` + host + `",
    "database.port": "` + port + `",
    "database.user": "${file:` + secrets + `:db.user}",
    "database.dbname": "${directory:` + dir + `:dbname}",
    "topic.prefix": "dbserver1",
    "plugin.name": "pgoutput",
    "slot.name": "outbox_slot",
    "table.include.list": "public.outbox",
    "heartbeat.interval.ms": "1000",
    "transforms": "outbox",
    "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
    "transforms.outbox.route.topic.replacement": "${routedByValue}.events",
    "transforms.outbox.table.expand.json.payload": "true",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false"
  }
}`
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.runProcess(t, "--config", path)
	e.awaitSlotActive(t, "outbox_slot")
	// The start names the routing in force, not the unused template.
	if out := p.out.String(); !strings.Contains(out, `"topic":"${routedByValue}.events"`) {
		t.Errorf("the start does not name the route.topic.replacement in force:\n%s", out)
	}
	ids := e.insert(row{"order", "order-1", "OrderCreated", `{"id": 1, "lines": [{"sku": "a", "qty": 2, "price": 9.5}], "note": null}`})

	r := kafkatest.Consume(t, e.brokers, []string{"order.events"}, 1, 20*time.Second)[0]
	if string(r.Key) != "order-1" {
		t.Errorf("key %q", r.Key)
	}
	// Expanded as JsonConverter writes Debezium's inferred struct: compact,
	// null fields dropped, members in the order of the jsonb text both
	// Debezium and pgoutbox read (jsonb sorts keys by length, then bytes).
	if want := `{"id":1,"lines":[{"qty":2,"sku":"a","price":9.5}]}`; string(r.Value) != want {
		t.Errorf("value %s, want %s", r.Value, want)
	}
	if got, _ := headerOf(r, "id"); got != ids[0] {
		t.Errorf("header id %q, want %q", got, ids[0])
	}
}
