package debezium

import (
	"strings"
	"testing"
)

// templateConf is an OpenShift Template of a KafkaConnector as teams keep
// one: its state, tasks, heartbeat and database from parameters.
const templateConf = `apiVersion: template.openshift.io/v1
kind: Template
metadata:
  name: kafka-connector
objects:
- apiVersion: kafka.strimzi.io/v1beta2
  kind: KafkaConnector
  metadata:
    name: outbox-connector
    labels:
      strimzi.io/cluster: ${KAFKA_CONNECT_INSTANCE}
  spec:
    state: ${CONNECTOR_STATE}
    class: io.debezium.connector.postgresql.PostgresConnector
    tasksMax: ${{MAX_TASKS}}
    config:
      database.hostname: ${DB_HOST}
      database.dbname: inventory
      topic.prefix: inventory-${ENV_NAME}
      table.include.list: public.outbox
      heartbeat.interval.ms: ${DEBEZIUM_HEARTBEAT_INTERVAL_MS}
      database.password: ${secrets:app/db:password}
      transforms: outbox
      transforms.outbox.type: io.debezium.transforms.outbox.EventRouter
parameters:
- name: KAFKA_CONNECT_INSTANCE
  value: connect
- name: CONNECTOR_STATE
  value: stopped
- name: MAX_TASKS
  value: "1"
- name: DB_HOST
  required: true
- name: ENV_NAME
  value: stage
- name: DEBEZIUM_HEARTBEAT_INTERVAL_MS
  value: "300000"
`

// An OpenShift Template is processed as oc process does, each parameter
// as given (--template-param), else its value; a stopped connector, which
// Strimzi runs no task of, is read with a warning; a required parameter
// without a value is refused.
func TestReadOpenShiftTemplate(t *testing.T) {
	read := func(conf string, params map[string]string) (Translation, error) {
		tr, _, err := ReadWith([]byte(conf), Inputs{TemplateParams: params})
		return tr, err
	}
	if _, err := read(templateConf, nil); err == nil || !strings.Contains(err.Error(), "parameters DB_HOST have no value: give each with --template-param") {
		t.Errorf("without DB_HOST: %v", err)
	}
	// The environment is not read, as oc process does not read it.
	t.Setenv("DB_HOST", "from-the-environment")
	if _, err := read(templateConf, nil); err == nil {
		t.Errorf("DB_HOST taken from the environment")
	}
	// Stopped, as a team stops it in the cluster to hand over: read, with
	// a warning. ${secrets:…} is Strimzi's, given here.
	conf := strings.Replace(templateConf, "${secrets:app/db:password}", "s3cret", 1)
	tr, err := read(conf, map[string]string{"DB_HOST": "db.internal"})
	if err != nil || !strings.Contains(strings.Join(tr.Warnings, "\n"), "KafkaConnector outbox-connector is stopped") {
		t.Errorf("stopped: %v, warnings %q", err, tr.Warnings)
	}
	tr, err = read(conf, map[string]string{"DB_HOST": "db.internal", "CONNECTOR_STATE": "running", "ENV_NAME": "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Form != StrimziConnector {
		t.Errorf("form %q", tr.Form)
	}
	for flag, want := range map[string]string{"topic-prefix": "inventory-prod", "heartbeat-interval": "300000ms"} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
	if u, _ := settingOf(tr, "database-url"); !strings.Contains(u, "db.internal") {
		t.Errorf("--database-url %q lacks the parameter's host", u)
	}
	if len(tr.Warnings) != 0 {
		t.Errorf("running: warnings %q", tr.Warnings)
	}
	// Strimzi's enum is lower case.
	if _, err := read(conf, map[string]string{"DB_HOST": "db.internal", "CONNECTOR_STATE": "Running"}); err == nil || !strings.Contains(err.Error(), "spec.state") {
		t.Errorf("state Running: %v", err)
	}
	// ${{NAME}} is a whole value; within a longer string it stays as
	// written, as oc leaves it.
	props, err := processTemplate([]byte(`kind: Template
objects:
- kind: KafkaConnector
  spec:
    tasksMax: ${{MAX}}
    config:
      a: x${{MAX}}
      b: x${MAX}
parameters:
- {name: MAX, value: "3"}
`), nil)
	if err != nil || !strings.Contains(string(props), "tasksMax: 3\n") || !strings.Contains(string(props), "a: x${{MAX}}") || !strings.Contains(string(props), "b: x3") {
		t.Errorf("processed %s, %v", props, err)
	}
}

// spec.state wins over the older spec.pause, as Strimzi takes them.
func TestStrimziStateAndPause(t *testing.T) {
	for _, tt := range []struct{ spec, warning string }{
		{"state: running\n  pause: true\n", ""},
		{"pause: true\n", "is paused"},
		{"state: paused\n", "is paused"},
		{"state: stopped\n  pause: false\n", "is stopped"},
		{"", ""},
	} {
		conf := "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnector\nmetadata:\n  name: c\nspec:\n  " + tt.spec +
			"  class: io.debezium.connector.postgresql.PostgresConnector\n  config:\n    database.hostname: db\n    database.dbname: shop\n    topic.prefix: shop\n"
		tr, _, err := Read([]byte(conf))
		if err != nil {
			t.Errorf("%q: %v", tt.spec, err)
			continue
		}
		w := strings.Join(tr.Warnings, "\n")
		if tt.warning == "" && strings.Contains(w, "Strimzi runs no task") || tt.warning != "" && !strings.Contains(w, tt.warning) {
			t.Errorf("%q: warnings %q, want %q", tt.spec, tr.Warnings, tt.warning)
		}
	}
}
