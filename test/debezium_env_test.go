package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// ledgerServerEnv is a Debezium Server configuration of the ledger's
// outbox into e's Kafka as environment variables, as a container is given
// it.
func ledgerServerEnv(t *testing.T, e *testenv.Env) []string {
	t.Helper()
	host, port, user, db := testenv.DebeziumDB(t, e)
	return []string{
		"DEBEZIUM_SINK_TYPE=kafka",
		"DEBEZIUM_SINK_KAFKA_PRODUCER_BOOTSTRAP_SERVERS=" + strings.Join(e.Brokers, ","),
		"DEBEZIUM_SOURCE_CONNECTOR_CLASS=io.debezium.connector.postgresql.PostgresConnector",
		"DEBEZIUM_SOURCE_DATABASE_HOSTNAME=" + host,
		"DEBEZIUM_SOURCE_DATABASE_PORT=" + port,
		"DEBEZIUM_SOURCE_DATABASE_USER=" + user,
		"DEBEZIUM_SOURCE_DATABASE_DBNAME=" + db,
		"DEBEZIUM_SOURCE_TOPIC_PREFIX=ledger",
		"DEBEZIUM_SOURCE_PLUGIN_NAME=pgoutput",
		"DEBEZIUM_SOURCE_TABLE_INCLUDE_LIST=public.outbox_event",
		"DEBEZIUM_TRANSFORMS=outbox",
		"DEBEZIUM_TRANSFORMS_OUTBOX_TYPE=io.debezium.transforms.outbox.EventRouter",
		"DEBEZIUM_TRANSFORMS_OUTBOX_TABLE_FIELD_EVENT_KEY=aggregate_id",
		"DEBEZIUM_TRANSFORMS_OUTBOX_TABLE_FIELD_EVENT_TYPE=event_type",
		"DEBEZIUM_TRANSFORMS_OUTBOX_ROUTE_BY_FIELD=aggregate_type",
	}
}

// Debezium Server configured by its environment alone, as a container
// runs it: pgoutbox run without --config reads the DEBEZIUM_* variables as
// Debezium Server does, and publishes the rows a table already holds and
// those written after.
func TestDebeziumServerFromEnvironment(t *testing.T) {
	e := testenv.ExistingLedger(t, 50)
	p := testenv.StartBinaryEnv(t, ledgerServerEnv(t, e), "run", "--log-format", "json", "--heartbeat-interval", "200ms")
	e.AwaitSlotActive(t, "debezium")
	want := <-testenv.WriteLedger(t, e, 5)
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.TRANSACTION"}, 50+len(want), 30*time.Second)
	p.Stop(t)
}

// Over a Debezium Server file, a variable overrides the key it spells, as
// Debezium Server's environment overrides its application.properties; $$
// in it is a '$', as SmallRye Config reads it.
func TestDebeziumServerEnvironmentOverridesFile(t *testing.T) {
	e := testenv.ExistingLedger(t, 20)
	var file []string
	for _, kv := range ledgerServerEnv(t, e) {
		name, value, _ := strings.Cut(kv, "=")
		file = append(file, strings.ToLower(strings.ReplaceAll(name, "_", "."))+"="+value)
	}
	file = append(file, "debezium.transforms.outbox.route.topic.replacement=file.${routedByValue}")
	path := filepath.Join(t.TempDir(), "application.properties")
	if err := os.WriteFile(path, []byte(strings.Join(file, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testenv.StartBinaryEnv(t, []string{"DEBEZIUM_TRANSFORMS_OUTBOX_ROUTE_TOPIC_REPLACEMENT=env.$${routedByValue}"},
		"run", "--config", path, "--log-format", "json", "--heartbeat-interval", "200ms")
	kafkatest.Consume(t, e.Brokers, []string{"env.TRANSACTION"}, 20, 30*time.Second)
	p.Stop(t)
}

// Debezium Server's config/application.yaml, nested as its
// application.yaml.example is, runs through --config; the database and the
// broker here come from the environment, over the file, as Debezium
// Server reads them.
func TestDebeziumServerApplicationYAML(t *testing.T) {
	e := testenv.ExistingLedger(t, 30)
	var env []string
	for _, kv := range ledgerServerEnv(t, e) {
		if strings.HasPrefix(kv, "DEBEZIUM_SINK_") || strings.HasPrefix(kv, "DEBEZIUM_SOURCE_DATABASE_") {
			env = append(env, kv)
		}
	}
	yaml := `debezium:
  source:
    connector:
      class: io.debezium.connector.postgresql.PostgresConnector
    plugin:
      name: pgoutput
    topic:
      prefix: ledger
    table:
      include:
        list: public.outbox_event
  transforms:
    ~: outbox
    outbox:
      type: io.debezium.transforms.outbox.EventRouter
      route:
        by:
          field: aggregate_type
        topic:
          replacement: yaml.$${routedByValue}
      table:
        field:
          event:
            key: aggregate_id
            type: event_type
`
	path := filepath.Join(t.TempDir(), "application.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testenv.StartBinaryEnv(t, env, "run", "--config", path, "--log-format", "json", "--heartbeat-interval", "200ms")
	e.AwaitSlotActive(t, "debezium")
	want := <-testenv.WriteLedger(t, e, 5)
	kafkatest.Consume(t, e.Brokers, []string{"yaml.TRANSACTION"}, 30+len(want), 30*time.Second)
	p.Stop(t)
}

// A DebeziumServer resource of the Debezium Operator runs as the
// application.properties the operator writes of it; its password from the
// environment, as the operator's examples take it from a secret.
func TestDebeziumOperatorResourceEndToEnd(t *testing.T) {
	e := testenv.ExistingLedger(t, 20)
	host, port, user, db := testenv.DebeziumDB(t, e)
	conf := `apiVersion: debezium.io/v1alpha1
kind: DebeziumServer
metadata:
  name: ledger-outbox
spec:
  quarkus:
    config:
      log.console.json: false
  sink:
    type: kafka
    config:
      producer.bootstrap.servers: ` + strings.Join(e.Brokers, ",") + `
      producer.key.serializer: org.apache.kafka.common.serialization.StringSerializer
      producer.value.serializer: org.apache.kafka.common.serialization.StringSerializer
  source:
    class: io.debezium.connector.postgresql.PostgresConnector
    offset:
      memory: { }
    config:
      database.hostname: ` + host + `
      database.port: ` + port + `
      database.user: ${LEDGER_DB_USER}
      database.dbname: ` + db + `
      topic.prefix: ledger
      plugin.name: pgoutput
      table.include.list: public.outbox_event
  transforms:
    - type: io.debezium.transforms.outbox.EventRouter
      config:
        table.field.event.key: aggregate_id
        table.field.event.type: event_type
        route.by.field: aggregate_type
        route.topic.replacement: operator.${routedByValue}
`
	path := filepath.Join(t.TempDir(), "debezium-server.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testenv.StartBinaryEnv(t, []string{"LEDGER_DB_USER=" + user}, "run", "--config", path, "--log-format", "json", "--heartbeat-interval", "200ms")
	e.AwaitSlotActive(t, "debezium")
	want := <-testenv.WriteLedger(t, e, 5)
	kafkatest.Consume(t, e.Brokers, []string{"operator.TRANSACTION"}, 20+len(want), 30*time.Second)
	p.Stop(t)
}
