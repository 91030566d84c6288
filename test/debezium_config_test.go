package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A Debezium Server application.properties with the Outbox Event Router
// drives a real run: its slot and publication are created under its names,
// the router selects debezium-outbox, and the records are what Debezium
// Server writes with its default formats (json with schemas for key and
// headers) and value schemas off. Its ignored options are named in one
// warning.
func TestDebeziumServerPropertiesEndToEnd(t *testing.T) {
	e := testenv.New(t)
	path := filepath.Join(t.TempDir(), "application.properties")
	props := "# Debezium Server\n" + testenv.DebeziumServerKafka(t, e) + `debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.sink.kafka.producer.value.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.offset.flush.interval.ms=0
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
debezium.sink.kafka.producer.acks=1
`
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--config", path)
	e.AwaitSlotActive(t, "dbz_shop")
	ids := e.Insert(testenv.NewRow("account", "acct-7", "Withdrawn", `{"amount": 5000, "currency": "KRW"}`))

	r := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.account"}, 1, 20*time.Second)[0]
	if want := `{"schema":{"type":"string","optional":false},"payload":"acct-7"}`; string(r.Key) != want {
		t.Errorf("key %s, want %s", r.Key, want)
	}
	if want := `"{\"amount\": 5000, \"currency\": \"KRW\"}"`; string(r.Value) != want {
		t.Errorf("value %s, want %s", r.Value, want)
	}
	// The id column's DEFAULT gen_random_uuid() is in its schema as
	// Debezium Server writes it: the zero UUID (corpus case
	// server-doc-table-defaults).
	wantID := `{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1,"default":"00000000-0000-0000-0000-000000000000"},"payload":"` + ids[0] + `"}`
	if got, _ := testenv.HeaderOf(r, "id"); got != wantID {
		t.Errorf("header id %s, want %s", got, wantID)
	}
	if got, _ := testenv.HeaderOf(r, "eventType"); got != `{"schema":{"type":"string","optional":false},"payload":"Withdrawn"}` {
		t.Errorf("header eventType %s", got)
	}
	p.Signal(t, 15)
	out := p.Out.String()
	if !strings.Contains(out, "ignoring Debezium options pgoutbox does not use: debezium.source.offset.flush.interval.ms, debezium.source.offset.storage.file.filename") {
		t.Errorf("no warning naming the ignored options:\n%s", out)
	}
	// acks=1, which a team set for speed, runs with pgoutbox's acks=all.
	if !strings.Contains(out, "debezium.sink.kafka.producer.acks=1 runs as acks=all") {
		t.Errorf("no warning that acks=1 runs as acks=all:\n%s", out)
	}
}

// A Kafka Connect connector JSON with the Outbox Event Router, an expanded
// payload, a string key, a custom route.topic.replacement and its
// credentials behind config provider placeholders drives a real run.
func TestKafkaConnectJSONEndToEnd(t *testing.T) {
	e := testenv.New(t)
	host, port, user, db := testenv.DebeziumDB(t, e)
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
	p := e.Run(t, "--config", path)
	e.AwaitSlotActive(t, "outbox_slot")
	// The start names the routing in force, not the unused template.
	if out := p.Out.String(); !strings.Contains(out, `"topic":"${routedByValue}.events"`) {
		t.Errorf("the start does not name the route.topic.replacement in force:\n%s", out)
	}
	ids := e.Insert(testenv.NewRow("order", "order-1", "OrderCreated", `{"id": 1, "lines": [{"sku": "a", "qty": 2, "price": 9.5}], "note": null}`))

	r := kafkatest.Consume(t, e.Brokers, []string{"order.events"}, 1, 20*time.Second)[0]
	if string(r.Key) != "order-1" {
		t.Errorf("key %q", r.Key)
	}
	// Expanded as JsonConverter writes Debezium's inferred struct: compact,
	// null fields dropped, members in the order of the jsonb text both
	// Debezium and pgoutbox read (jsonb sorts keys by length, then bytes).
	if want := `{"id":1,"lines":[{"qty":2,"sku":"a","price":9.5}]}`; string(r.Value) != want {
		t.Errorf("value %s, want %s", r.Value, want)
	}
	if got, _ := testenv.HeaderOf(r, "id"); got != ids[0] {
		t.Errorf("header id %q, want %q", got, ids[0])
	}
}

// A Kafka Connect configuration pgoutbox used to refuse although Debezium
// runs it: Debezium 1.x's ByteBufferConverter for the bytea payload a team
// serialises itself, time.precision.mode=connect,
// decimal.handling.mode=string and slot.drop.on.stop=true. Against a
// database that already holds the table and rows (the snapshot publishes
// them) and one written afterwards (the stream), run --config starts,
// warns once for the converter and once for the slot, and publishes what
// Debezium 3.6.1 wrote in the corpus cases converter-bytebuffer,
// decimal-string and time-connect-string-headers: the payload's bytes as
// they are, the numeric as its plain text and the timestamp and date as
// SimpleHeaderConverter's text of a java.util.Date. Stopped, it keeps its
// slot, which the command the warning names then drops.
func TestDebeziumValueOptionsEndToEnd(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.ledger_outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,
  payload bytea, amount numeric(12,2), booked_at timestamp(6), value_date date, seq bigserial);
INSERT INTO public.ledger_outbox VALUES
  ('406c07f3-26f0-4eea-a50c-109940064b8f', 'ledger', 'acct-1', '\x0a0b0c', 129.90, '2026-11-21 18:37:59.123456', '2026-11-21'),
  ('506c07f3-26f0-4eea-a50c-109940064b8f', 'ledger', 'acct-1', NULL, -0.05, '1969-12-31 23:59:59.9999', '2020-01-02')`)
	host, port, user, db := testenv.DebeziumDB(t, e)
	conf := `{"name": "ledger-outbox", "config": {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "` + host + `", "database.port": "` + port + `",
    "database.user": "` + user + `", "database.dbname": "` + db + `",
    "topic.prefix": "ledger", "plugin.name": "pgoutput", "slot.name": "ledger_slot",
    "table.include.list": "public.ledger_outbox", "snapshot.mode": "initial",
    "time.precision.mode": "connect", "decimal.handling.mode": "string", "slot.drop.on.stop": "true",
    "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
    "transforms.outbox.table.fields.additional.placement": "amount:header,booked_at:header,value_date:header",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "io.debezium.converters.ByteBufferConverter"}}`
	path := testenv.WriteFile(t, "ledger-outbox.json", conf)
	p := testenv.StartBinary(t, "run", "--config", path, "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
	e.AwaitSlotActive(t, "ledger_slot")
	if _, err := e.Conn.Exec(context.Background(), `INSERT INTO public.ledger_outbox VALUES
  ('606c07f3-26f0-4eea-a50c-109940064b8f', 'ledger', 'acct-1', '', 0, '2020-01-02 00:00:00', '1969-12-31')`); err != nil {
		t.Fatal(err)
	}
	type want struct {
		value                           []byte
		amount, bookedAt, valueDate, id string
	}
	wants := map[string]want{
		"406c07f3-26f0-4eea-a50c-109940064b8f": {[]byte{0x0a, 0x0b, 0x0c}, "129.90", "2026-11-21T18:37:59.123Z", "2026-11-21", ""},
		"506c07f3-26f0-4eea-a50c-109940064b8f": {nil, "-0.05", "23:59:59.999Z", "2020-01-02", ""},
		"606c07f3-26f0-4eea-a50c-109940064b8f": {[]byte{}, "0.00", "2020-01-02", "00:00:00.000Z", ""},
	}
	for _, r := range kafkatest.Consume(t, e.Brokers, []string{"outbox.event.ledger"}, 3, 30*time.Second) {
		id, _ := testenv.HeaderOf(r, "id")
		w, ok := wants[id]
		if !ok {
			t.Errorf("record of id %q", id)
			continue
		}
		delete(wants, id)
		if string(r.Key) != "acct-1" || !bytes.Equal(r.Value, w.value) || (r.Value == nil) != (w.value == nil) {
			t.Errorf("%s: key %q value %x, want acct-1 and %x", id, r.Key, r.Value, w.value)
		}
		for k, v := range map[string]string{"amount": w.amount, "booked_at": w.bookedAt, "value_date": w.valueDate} {
			if got, _ := testenv.HeaderOf(r, k); got != v {
				t.Errorf("%s: header %s %q, want %q", id, k, got, v)
			}
		}
	}
	if len(wants) > 0 {
		t.Errorf("not published: %v", wants)
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("run: %v", err)
	}
	out := p.Out.String()
	for _, w := range []string{
		"value.converter=io.debezium.converters.ByteBufferConverter: Debezium 2.0 renamed it io.debezium.converters.BinaryDataConverter",
		"slot.drop.on.stop=true: pgoutbox keeps the slot ledger_slot when it stops",
	} {
		if strings.Count(out, w) != 1 {
			t.Errorf("the output does not say once %q:\n%s", w, out)
		}
	}
	slotExists := func() bool {
		var n int
		if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'ledger_slot'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if !slotExists() {
		t.Fatal("the slot was dropped at the stop")
	}
	drop := testenv.StartBinary(t, "slot", "drop", "--config", path, "--keep-publication")
	if err := drop.Err(); err != nil {
		t.Fatalf("slot drop: %v\n%s", err, drop.Out.String())
	}
	if slotExists() {
		t.Error("pgoutbox slot drop --config FILE --keep-publication kept the slot")
	}
}

// A Strimzi KafkaConnector resource, as teams on Kubernetes keep their
// connector, in one file with the KafkaConnect resource whose worker sets
// the converters, given to run --config against a table that already
// holds a row: Debezium's default snapshot publishes it, then the stream
// the row written after the start, both with the worker's StringConverter
// keys and schemaless JSON values.
func TestStrimziKafkaConnectorEndToEnd(t *testing.T) {
	e := testenv.New(t)
	existing := e.Insert(testenv.NewRow("order", "order-0", "OrderCreated", `{"id": 0}`))
	host, port, user, db := testenv.DebeziumDB(t, e)
	conf := `apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaConnect
metadata:
  name: my-connect
spec:
  replicas: 1
  config:
    group.id: connect-cluster
    key.converter: org.apache.kafka.connect.storage.StringConverter
    value.converter: org.apache.kafka.connect.json.JsonConverter
    value.converter.schemas.enable: false
---
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaConnector
metadata:
  name: outbox-connector
  labels:
    strimzi.io/cluster: my-connect
spec:
  class: io.debezium.connector.postgresql.PostgresConnector
  tasksMax: 1
  config:
    database.hostname: ` + host + `
    database.port: ` + port + `
    database.user: ` + user + `
    database.dbname: ` + db + `
    topic.prefix: shop
    plugin.name: pgoutput
    slot.name: strimzi_outbox
    table.include.list: public.outbox
    transforms: outbox
    transforms.outbox.type: io.debezium.transforms.outbox.EventRouter
`
	path := filepath.Join(t.TempDir(), "outbox-connector.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--config", path)
	e.AwaitSlotActive(t, "strimzi_outbox")
	ids := append(existing, e.Insert(testenv.NewRow("order", "order-1", "OrderCreated", `{"id": 1}`))...)
	recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 2, 30*time.Second)
	for i, r := range recs {
		if want := "order-" + strconv.Itoa(i); string(r.Key) != want {
			t.Errorf("record %d: key %q, want %q", i, r.Key, want)
		}
		if want := strconv.Quote(`{"id": ` + strconv.Itoa(i) + `}`); string(r.Value) != want {
			t.Errorf("record %d: value %s, want %s", i, r.Value, want)
		}
		if got, _ := testenv.HeaderOf(r, "id"); got != ids[i] {
			t.Errorf("record %d: header id %q, want %q", i, got, ids[i])
		}
	}
	p.Signal(t, 15)
}

// A Debezium configuration naming its tables by schema: with
// schema.include.list alone, pgoutbox takes the tables of that schema
// (there, a table of the application's, which migrate leaves as it is,
// whose inserts, updates and deletes become change events on
// dbserver1.inventory.customers); with the
// router, no list at all and no public.outbox, the error says the table was
// the default and how to name one, and creates nothing; without either,
// every table of the application's is captured.
func TestDebeziumTableListsByTheBinary(t *testing.T) {
	e := testenv.New(t)
	host, port, user, db := testenv.DebeziumDB(t, e)
	e.Exec(`CREATE SCHEMA inventory; CREATE TABLE inventory.customers (id serial PRIMARY KEY, email text NOT NULL)`)
	write := func(lists string) string {
		path := filepath.Join(t.TempDir(), "connector.json")
		conf := `{"name": "inventory", "config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "database.hostname": "` + host + `", "database.port": "` + port + `", "database.user": "` + user + `", "database.dbname": "` + db + `",
  "topic.prefix": "dbserver1", "plugin.name": "pgoutput"` + lists + `}}`
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// migrate leaves the application's table as it is: its change events
	// carry its columns, and polling, which added columns serve, reads
	// no update nor delete.
	if out, ok := testenv.CLIOutput(t, "migrate", "--config", write(`, "schema.include.list": "INVENTORY"`)); !ok || !strings.Contains(out, "inventory.customers left as they are") {
		t.Errorf("migrate of a change-events configuration (ok %v):%s", ok, out)
	}
	var cols int
	if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'inventory' AND table_name = 'customers'").Scan(&cols); err != nil || cols != 2 {
		t.Errorf("inventory.customers has %d columns after migrate (%v), want its 2", cols, err)
	}
	p := testenv.StartBinary(t, "run", "--config", write(`, "schema.include.list": "INVENTORY"`), "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
	e.AwaitSlotActive(t, "debezium")
	e.Exec(`INSERT INTO inventory.customers (email) VALUES ('a@example.com'); UPDATE inventory.customers SET email = 'b@example.com'; DELETE FROM inventory.customers`)
	recs := kafkatest.Consume(t, e.Brokers, []string{"dbserver1.inventory.customers"}, 4, 30*time.Second)
	var ops []string
	for _, r := range recs {
		var v struct{ Payload struct{ Op string } }
		if r.Value == nil {
			ops = append(ops, "tombstone")
		} else if err := json.Unmarshal(r.Value, &v); err == nil {
			ops = append(ops, v.Payload.Op)
		}
	}
	if strings.Join(ops, ",") != "c,u,d,tombstone" {
		t.Errorf("schema.include.list of an application's table: records %v, want c,u,d,tombstone", ops)
	}
	p.Signal(t, syscall.SIGTERM)
	e.Exec(`SELECT pg_drop_replication_slot('debezium')`)
	e.Exec(`ALTER TABLE public.outbox RENAME TO outbox_kept`)
	router := `, "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"`
	out, err := testenv.RunToExit(t, "run", "--config", write(router), "--kafka-brokers", strings.Join(e.Brokers, ","))
	if err == nil || !strings.Contains(out, "table public.outbox: no such table (--table's default: name the outbox table") {
		t.Errorf("the router, no list and no public.outbox: %v\n%s", err, out)
	}
	var slots int
	if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()").Scan(&slots); err != nil || slots != 0 {
		t.Errorf("%d slots after the refusal (%v), want none", slots, err)
	}
	// Without the router and without a list, Debezium's connector
	// captures every table: so does pgoutbox, its own tables aside.
	p = testenv.StartBinary(t, "run", "--config", write(`, "slot.name": "everything"`), "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
	e.AwaitSlotActive(t, "everything")
	if m := p.Logged("tables matched --table-include-list"); len(m) == 0 || !strings.Contains(p.Out.String(), `"tables":"inventory.customers,public.outbox_kept"`) {
		t.Errorf("no list, no router: want every table of the application's matched:\n%s", p.Out.String())
	}
	e.Exec(`INSERT INTO inventory.customers (email) VALUES ('c@example.com')`)
	kafkatest.Consume(t, e.Brokers, []string{"dbserver1.inventory.customers"}, 5, 30*time.Second)
	p.Signal(t, syscall.SIGTERM)
}

// An OpenShift Template of a KafkaConnector, as teams apply it with oc
// process: its parameters come from --template-param (oc process -p),
// else their values.
// Its default state, stopped, as a team keeps it in the cluster while
// pgoutbox runs, gives a warning; the row already in the table and a new
// one are published.
func TestOpenShiftTemplateEndToEnd(t *testing.T) {
	e := testenv.New(t)
	existing := e.Insert(testenv.NewRow("order", "order-0", "OrderCreated", `{"id": 0}`))
	host, port, user, db := testenv.DebeziumDB(t, e)
	conf := `apiVersion: template.openshift.io/v1
kind: Template
metadata:
  name: outbox-connector
objects:
- apiVersion: kafka.strimzi.io/v1beta2
  kind: KafkaConnector
  metadata:
    name: outbox-connector
  spec:
    state: ${CONNECTOR_STATE}
    class: io.debezium.connector.postgresql.PostgresConnector
    tasksMax: ${{MAX_TASKS}}
    config:
      database.hostname: ${DB_HOST}
      database.port: ${{DB_PORT}}
      database.user: ${DB_USER}
      database.dbname: ${DB_NAME}
      topic.prefix: shop
      plugin.name: pgoutput
      slot.name: ${SLOT_NAME}
      table.include.list: public.outbox
      transforms: outbox
      transforms.outbox.type: io.debezium.transforms.outbox.EventRouter
      key.converter: org.apache.kafka.connect.storage.StringConverter
      value.converter: org.apache.kafka.connect.json.JsonConverter
      value.converter.schemas.enable: false
parameters:
- {name: CONNECTOR_STATE, value: stopped}
- {name: MAX_TASKS, value: "1"}
- {name: DB_HOST, required: true}
- {name: DB_PORT, value: "5432"}
- {name: DB_USER, required: true}
- {name: DB_NAME, required: true}
- {name: SLOT_NAME, value: template_outbox}
`
	path := filepath.Join(t.TempDir(), "outbox-connector-template.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// The parameters in the environment's PGOUTBOX_TEMPLATE_PARAM, a line
	// each (--template-param NAME=value on the command line, repeated).
	env := []string{"PGOUTBOX_TEMPLATE_PARAM=DB_HOST=" + host + "\nDB_PORT=" + port + "\nDB_USER=" + user + "\nDB_NAME=" + db}
	p := testenv.StartBinaryEnv(t, env, "run", "--config", path, "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json",
		"--heartbeat-interval", "200ms")
	e.AwaitSlotActive(t, "template_outbox")
	e.Insert(testenv.NewRow("order", "order-1", "OrderCreated", `{"id": 1}`))
	recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 2, 30*time.Second)
	for i, r := range recs {
		if want := "order-" + strconv.Itoa(i); string(r.Key) != want {
			t.Errorf("record %d: key %q, want %q", i, r.Key, want)
		}
	}
	if got, _ := testenv.HeaderOf(recs[0], "id"); got != existing[0] {
		t.Errorf("the row already in the table: header id %q, want %q", got, existing[0])
	}
	p.Stop(t)
	if out := p.Out.String(); !strings.Contains(out, "KafkaConnector outbox-connector is stopped") {
		t.Errorf("no warning of the Template's default state, stopped:\n%s", out)
	}
}

// Kafka Connect standalone's connector file (connect-standalone.sh
// worker.properties outbox.properties), and the connector kept in YAML as
// tools and charts post it to Connect's REST API, as teams keep them, run
// as its JSON does: the row already in the table, then a new one.
func TestKafkaConnectPropertiesEndToEnd(t *testing.T) {
	// The YAML form quotes its values, as a team's file often does: read
	// as properties, the quotes would stay in them.
	for _, form := range []struct{ file, sep, indent, head, quote string }{
		{"outbox-connector.properties", "=", "", "name=outbox-connector\n", ""},
		{"outbox-connector.yaml", ": ", "  ", "name: outbox-connector\nconfig:\n", `"`},
	} {
		t.Run(form.file, func(t *testing.T) {
			e := testenv.New(t)
			existing := e.Insert(testenv.NewRow("order", "order-0", "OrderCreated", `{"id": 0}`))
			host, port, user, db := testenv.DebeziumDB(t, e)
			conf := form.head
			for _, kv := range [][2]string{
				{"connector.class", "io.debezium.connector.postgresql.PostgresConnector"}, {"tasks.max", "1"},
				{"database.hostname", host}, {"database.port", port}, {"database.user", user}, {"database.dbname", db},
				{"topic.prefix", "shop"}, {"plugin.name", "pgoutput"}, {"slot.name", "standalone_outbox"},
				{"table.include.list", "public.outbox"}, {"transforms", "outbox"},
				{"transforms.outbox.type", "io.debezium.transforms.outbox.EventRouter"},
				{"key.converter", "org.apache.kafka.connect.storage.StringConverter"},
			} {
				conf += form.indent + kv[0] + form.sep + form.quote + kv[1] + form.quote + "\n"
			}
			path := filepath.Join(t.TempDir(), form.file)
			if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			p := e.Run(t, "--config", path)
			e.AwaitSlotActive(t, "standalone_outbox")
			ids := append(existing, e.Insert(testenv.NewRow("order", "order-1", "OrderCreated", `{"id": 1}`))...)
			recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 2, 30*time.Second)
			for i, r := range recs {
				if want := "order-" + strconv.Itoa(i); string(r.Key) != want {
					t.Errorf("record %d: key %q, want %q", i, r.Key, want)
				}
				if got, _ := testenv.HeaderOf(r, "id"); got != ids[i] {
					t.Errorf("record %d: header id %q, want %q", i, got, ids[i])
				}
			}
			p.Stop(t)
		})
	}
}
