package debezium

import (
	"maps"
	"os"
	"strings"
	"testing"
)

// An application.yaml flattens as SmallRye Config's YAML source of Debezium
// Server 3.6.1 flattens it: the keys and values below are what its
// YamlConfigSource gave for testdata/application.yaml, in a probe against
// the distribution's jars.
func TestServerYAMLFlatten(t *testing.T) {
	data, err := os.ReadFile("testdata/application.yaml")
	if err != nil {
		t.Fatal(err)
	}
	props, ok := serverYAML(data)
	if !ok {
		t.Fatal("not read as Debezium Server's YAML")
	}
	want := map[string]string{
		`"debezium.format.key"`:                                          "simplestring",
		"debezium.format.value":                                          "json",
		"debezium.predicates":                                            "a,b",
		"debezium.predicates[0]":                                         "a",
		"debezium.predicates[1]":                                         "b",
		`debezium.sink.kafka.producer."bootstrap.servers"`:               "localhost:9092",
		`debezium.sink.kafka.producer."key.serializer"`:                  "org.apache.kafka.common.serialization.StringSerializer",
		"debezium.sink.type":                                             "kafka",
		`debezium.source."connector.class"`:                              "io.debezium.connector.postgresql.PostgresConnector",
		`debezium.source."heartbeat.interval.ms"`:                        "1000",
		`debezium.source."tombstones.on.delete"`:                         "false",
		"debezium.source.database.password":                              "pa$$word",
		"debezium.source.database.port":                                  "5432",
		"debezium.source.table.include.list":                             "public.outbox,public.other",
		"debezium.transforms":                                            "outbox,route",
		`debezium.transforms.outbox."route.topic.replacement"`:           "$${routedByValue}.events",
		`debezium.transforms.outbox."table.fields.additional.placement"`: "type:header:eventType",
		"debezium.transforms.outbox.type":                                "io.debezium.transforms.outbox.EventRouter",
		"list":                                                           `x\,y,z`,
		"list[0]":                                                        "x,y",
		"list[1]":                                                        "z",
		"nested[0].name":                                                 "a",
		"nested[0].value":                                                "1",
	}
	equalProps(t, props, want, "SmallRye's")
	// Several documents, a merge key, a list with a backslash, a comma and
	// a null, as the same probe gave them.
	data, err = os.ReadFile("testdata/application-merge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	merged, _ := serverYAML(data)
	wantMerged := map[string]string{"base.host": "h", "base.port": "1", "debezium.db.host": "h", "debezium.db.port": "2",
		"debezium.list": `public\\.outbox,a\,b,c`, "debezium.list[0]": `public\.outbox`, "debezium.list[1]": "a,b", "debezium.list[3]": "c",
		"debezium.second": "x"}
	if !maps.Equal(merged, wantMerged) {
		t.Errorf("merged %v, want %v", merged, wantMerged)
	}
	// YAML 1.1's booleans, keys too; numbers as written; null gives none.
	scalars, _ := serverYAML([]byte("debezium:\n  on: on\n  y: y\n  off: OFF\n  hex: 0x1F\n  oct: 010\n  dot: .5\n  nul: null\n  tilde: ~\n  empty: \"\"\n"))
	wantScalars := map[string]string{"debezium.true": "true", "debezium.y": "y", "debezium.false": "false", "debezium.hex": "0x1F",
		"debezium.oct": "010", "debezium.dot": ".5", "debezium.empty": ""}
	if !maps.Equal(scalars, wantScalars) {
		t.Errorf("scalars %v, want %v", scalars, wantScalars)
	}
}

// Debezium Server's own application.yaml.example form runs; a dotted key
// within a map is named in a warning.
func TestReadServerYAML(t *testing.T) {
	tr, ok, err := Read([]byte(`debezium:
  sink:
    type: nats-jetstream
    nats-jetstream:
      url: nats://localhost:4222
  source:
    connector:
      class: io.debezium.connector.postgresql.PostgresConnector
    database:
      hostname: db
      dbname: shop
    topic:
      prefix: shop
    heartbeat.interval.ms: 1000
  transforms:
    ~: outbox
    outbox:
      type: io.debezium.transforms.outbox.EventRouter
      route:
        topic:
          replacement: events.$${routedByValue}
`))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if tr.Form != ServerYAML {
		t.Errorf("form %q", tr.Form)
	}
	for flag, want := range map[string]string{"sink": "nats-jetstream", "nats-url": "nats://localhost:4222", "topic-prefix": "shop",
		"route-topic-replacement": "events.${routedByValue}"} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
	if _, ok := settingOf(tr, "heartbeat-topic"); ok {
		t.Errorf("a quoted heartbeat.interval.ms read as Debezium's option")
	}
	if w := strings.Join(tr.Warnings, "\n"); !strings.Contains(w, `debezium.source."heartbeat.interval.ms": a YAML key holding a '.'`) {
		t.Errorf("warnings %q", tr.Warnings)
	}
}

// equalProps reports each key of got that differs from want's, and each
// key want lacks, named as not whose.
func equalProps(t *testing.T, got, want map[string]string, whose string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s = %q, not %s", k, v, whose)
		}
	}
}
