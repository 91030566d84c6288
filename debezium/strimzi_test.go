package debezium

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A Strimzi KafkaConnector resource reads as the connector JSON of the
// same options: spec.class is connector.class, numbers and booleans their
// text; a KafkaConnect resource in the same file gives its worker's
// converters, which the connector's own override.
func TestReadStrimzi(t *testing.T) {
	const strimzi = `apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaConnect
metadata:
  name: my-connect
spec:
  config:
    group.id: connect-cluster
    key.converter: org.apache.kafka.connect.storage.StringConverter
    value.converter: org.apache.kafka.connect.json.JsonConverter
    value.converter.schemas.enable: false
---
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaConnector
metadata:
  name: outbox
  labels:
    strimzi.io/cluster: my-connect
spec:
  class: io.debezium.connector.postgresql.PostgresConnector
  tasksMax: 1
  config:
    database.hostname: db
    database.port: 5432
    database.user: app
    database.dbname: shop
    topic.prefix: shop
    table.include.list: public.outbox
    snapshot.mode: no_data
    transforms: outbox
    transforms.outbox.type: io.debezium.transforms.outbox.EventRouter
    transforms.outbox.table.expand.json.payload: true
`
	const connect = `{"name": "outbox", "config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "tasks.max": "1",
  "database.hostname": "db", "database.port": "5432", "database.user": "app", "database.dbname": "shop", "topic.prefix": "shop",
  "table.include.list": "public.outbox", "snapshot.mode": "no_data", "transforms": "outbox",
  "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "transforms.outbox.table.expand.json.payload": "true",
  "key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": "org.apache.kafka.connect.json.JsonConverter",
  "value.converter.schemas.enable": "false"}}`
	got, ok, err := Read([]byte(strimzi))
	if err != nil || !ok || got.Form != StrimziConnector {
		t.Fatalf("%v %v %q", ok, err, got.Form)
	}
	want, _, err := Read([]byte(connect))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Settings, want.Settings) {
		t.Errorf("settings\n%v\nwant those of the connector JSON\n%v", got.Settings, want.Settings)
	}

	// The connector's own converter wins over the worker's.
	own := strings.Replace(strimzi, "    snapshot.mode: no_data\n", "    snapshot.mode: no_data\n    key.converter: org.apache.kafka.connect.json.JsonConverter\n", 1)
	tr, _, err := Read([]byte(own))
	if err != nil || !slices.Contains(tr.Settings, Setting{"key-converter", "json-schemas"}) {
		t.Errorf("the connector's key converter: %v, %v", tr.Settings, err)
	}
	for name, bad := range map[string]string{
		"two connectors": strimzi + "---\nkind: KafkaConnector\nmetadata:\n  name: other\nspec:\n  class: x\n",
		"a secret":       strings.Replace(strimzi, "database.user: app", "database.user: ${secrets:shop/db:user}", 1),
		"a list":         strings.Replace(strimzi, "database.user: app", "database.user: [a, b]", 1),
	} {
		if _, ok, err := Read([]byte(bad)); !ok || err == nil {
			t.Errorf("%s: ok %v, err %v", name, ok, err)
		}
	}
	if _, ok, _ := Read([]byte("kafka-brokers = k:9092\n# KafkaConnector\n")); ok {
		t.Error("pgoutbox's own file read as a Strimzi resource")
	}
}

// Kafka Connect standalone's connector file, in properties, reads as the
// connector's JSON: the same settings.
func TestReadConnectProperties(t *testing.T) {
	const props = `# connect-standalone.sh worker.properties outbox.properties
name=outbox-connector
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
database.hostname=db.internal
database.port=5432
database.user=app
database.dbname=shop
topic.prefix=shop
table.include.list=public.outbox
transforms=outbox
transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
transforms.outbox.route.topic.replacement=events.${routedByValue}
key.converter=org.apache.kafka.connect.storage.StringConverter
`
	tr, ok, err := Read([]byte(props))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if tr.Form != ConnectProperties {
		t.Errorf("form %q", tr.Form)
	}
	js, err := translateConnect(t, `{"name": "outbox-connector", "config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "tasks.max": "1", "database.hostname": "db.internal", "database.port": "5432", "database.user": "app", "database.dbname": "shop",
  "topic.prefix": "shop", "table.include.list": "public.outbox", "transforms": "outbox",
  "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "transforms.outbox.route.topic.replacement": "events.${routedByValue}",
  "key.converter": "org.apache.kafka.connect.storage.StringConverter"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tr.Settings) != fmt.Sprint(js.Settings) {
		t.Errorf("properties give %v\nJSON gives %v", tr.Settings, js.Settings)
	}
	// pgoutbox's own file, without connector.class, is not one.
	if _, ok, _ := Read([]byte("slot = x\ntopic = y\n")); ok {
		t.Errorf("pgoutbox's own file read as a connector's")
	}
}

// A Kafka Connect worker's file given in the connector's place is refused
// with what to give instead.
func TestReadConnectWorker(t *testing.T) {
	const worker = `bootstrap.servers=localhost:9092
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
offset.storage.file.filename=/tmp/connect.offsets
offset.flush.interval.ms=10000
plugin.path=/opt/connectors
`
	_, ok, err := Read([]byte(worker))
	if !ok || err == nil || !strings.Contains(err.Error(), "a Kafka Connect worker's configuration, not a connector's") {
		t.Errorf("worker file: ok %v, %v", ok, err)
	}
}

// A connector kept in YAML reads as its JSON: a {name, config} document, or
// the one connector of a chart's values; two are refused, named.
func TestReadConnectorYAML(t *testing.T) {
	js, err := translateConnect(t, `{"name": "outbox", "config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "database.hostname": "db", "database.port": "5432", "database.dbname": "shop", "topic.prefix": "shop", "tasks.max": "1",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "transforms.outbox.table.expand.json.payload": "true"}}`)
	if err != nil {
		t.Fatal(err)
	}
	const config = `    connector.class: io.debezium.connector.postgresql.PostgresConnector
    database.hostname: db
    database.port: 5432
    database.dbname: shop
    topic.prefix: shop
    tasks.max: 1
    transforms: outbox
    transforms.outbox.type: io.debezium.transforms.outbox.EventRouter
    transforms.outbox.table.expand.json.payload: true
`
	for name, doc := range map[string]string{
		"document": "name: outbox\nconfig:\n" + strings.ReplaceAll(config, "    ", "  "),
		"values":   "bootstrap:\n  enabled: true\n  connectors:\n  - name: outbox\n    config:\n" + strings.ReplaceAll(config, "    ", "      "),
	} {
		tr, ok, err := Read([]byte(doc))
		if !ok || err != nil {
			t.Fatalf("%s: %v %v", name, ok, err)
		}
		if tr.Form != ConnectYAML {
			t.Errorf("%s: form %q", name, tr.Form)
		}
		if fmt.Sprint(tr.Settings) != fmt.Sprint(js.Settings) {
			t.Errorf("%s: %v\nJSON gives %v", name, tr.Settings, js.Settings)
		}
	}
	two := "connectors:\n- name: a\n  config:\n    connector.class: x\n- name: b\n  config:\n    connector.class: y\n"
	if _, ok, err := Read([]byte(two)); !ok || err == nil || !strings.Contains(err.Error(), `2 connectors in the file ("a", "b")`) {
		t.Errorf("two connectors: %v %v", ok, err)
	}
}
