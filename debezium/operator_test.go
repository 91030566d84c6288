package debezium

import (
	"strings"
	"testing"
)

// operatorConf is a DebeziumServer resource as the Debezium Operator's
// examples write one, with the outbox router, a predicate and formats.
const operatorConf = `apiVersion: debezium.io/v1alpha1
kind: DebeziumServer
metadata:
  name: outbox
spec:
  image: quay.io/debezium/server:3.6.1.Final
  quarkus:
    config:
      log.console.json: false
  sink:
    type: nats-jetstream
    config:
      url: nats://nats:4222
      create-stream: true
  source:
    class: io.debezium.connector.postgresql.PostgresConnector
    offset:
      memory: { }
    config:
      database.hostname: postgresql
      database.port: 5432
      database.user: ${POSTGRES_USER}
      database.dbname: shop
      topic.prefix: shop
      table.include.list: public.outbox
      tombstones.on.delete: false
  format:
    value:
      type: json
      config:
        schemas.enable: false
  transforms:
    - type: io.debezium.transforms.outbox.EventRouter
      predicate: isOutbox
      config:
        route.topic.replacement: events.${routedByValue}
    - type: org.apache.kafka.connect.transforms.InsertHeader
      config:
        header: origin
        value.literal: shop
  predicates:
    isOutbox:
      type: org.apache.kafka.connect.transforms.predicates.TopicNameMatches
      config:
        pattern: shop\.public\.outbox
`

// A DebeziumServer resource is the application.properties the operator
// writes of it (DebeziumServerSpec.asConfiguration): the same settings.
func TestReadOperatorServer(t *testing.T) {
	props, ok, err := operatorServer([]byte(operatorConf))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	want := map[string]string{
		"debezium.source.connector.class":                "io.debezium.connector.postgresql.PostgresConnector",
		"debezium.source.database.hostname":              "postgresql",
		"debezium.source.database.port":                  "5432",
		"debezium.source.database.user":                  "${POSTGRES_USER}",
		"debezium.source.database.dbname":                "shop",
		"debezium.source.topic.prefix":                   "shop",
		"debezium.source.table.include.list":             "public.outbox",
		"debezium.source.tombstones.on.delete":           "false",
		"debezium.sink.type":                             "nats-jetstream",
		"debezium.sink.nats-jetstream.url":               "nats://nats:4222",
		"debezium.sink.nats-jetstream.create-stream":     "true",
		"debezium.format.value":                          "json",
		"debezium.format.value.schemas.enable":           "false",
		"debezium.transforms":                            "t0,t1",
		"debezium.transforms.t1.type":                    "org.apache.kafka.connect.transforms.InsertHeader",
		"debezium.transforms.t1.negate":                  "false",
		"debezium.transforms.t1.header":                  "origin",
		"debezium.transforms.t1.value.literal":           "shop",
		"debezium.transforms.t0.type":                    "io.debezium.transforms.outbox.EventRouter",
		"debezium.transforms.t0.predicate":               "isOutbox",
		"debezium.transforms.t0.negate":                  "false",
		"debezium.transforms.t0.route.topic.replacement": "events.${routedByValue}",
		"debezium.predicates":                            "isOutbox",
		"debezium.predicates.isOutbox.type":              "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
		"debezium.predicates.isOutbox.pattern":           `shop\.public\.outbox`,
	}
	equalProps(t, props, want, "the operator's")
	t.Setenv("POSTGRES_USER", "app")
	tr, ok, err := Read([]byte(operatorConf))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if tr.Form != OperatorServer {
		t.Errorf("form %q", tr.Form)
	}
	for flag, want := range map[string]string{"sink": "nats-jetstream", "nats-url": "nats://nats:4222", "nats-create-stream": "true",
		"topic-prefix": "shop", "route-topic-replacement": "events.${routedByValue}", "value-converter": "json"} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
	if u, _ := settingOf(tr, "database-url"); !strings.Contains(u, "app@postgresql") {
		t.Errorf("--database-url %q: the user from the environment", u)
	}
}

// A DebeziumServer resource of the wrong shape is named, not taken for
// another form.
func TestReadOperatorServerMalformed(t *testing.T) {
	_, ok, err := Read([]byte("apiVersion: debezium.io/v1alpha1\nkind: DebeziumServer\nspec:\n  transforms: [a, b]\n"))
	if !ok || err == nil || !strings.Contains(err.Error(), "DebeziumServer resource") {
		t.Errorf("ok %v, %v", ok, err)
	}
}
