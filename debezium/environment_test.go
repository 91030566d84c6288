package debezium

import (
	"maps"
	"strings"
	"testing"
)

// The DEBEZIUM_* variables are read as Debezium Server's SmallRye Config
// reads them (checked with the distribution's jars): over the file's key
// they spell, else as a key of their own, '_' a '.'.
func TestServerEnvironment(t *testing.T) {
	env := ServerEnvironment([]string{
		"DEBEZIUM_SINK_NATS_JETSTREAM_URL=nats://env:4222",
		"DEBEZIUM_SOURCE_DATABASE_HOSTNAME=db.env",
		"DEBEZIUM_TRANSFORMS_OUTBOX_ROUTE_BY_FIELD=kind",
		"PGOUTBOX_SLOT=other", "DEBEZIUM=alone", "DEBEZIUM_SINK_TYPE=nats-jetstream", "HOME=/root",
		"debezium_source_topic_prefix=lower", "DEBEZIUM_SOURCE_TOPIC_PREFIX=upper",
	})
	if len(env) != 6 {
		t.Fatalf("variables %v, want the six DEBEZIUM_* of a property's shape, in any case", env)
	}
	props := map[string]string{"debezium.sink.nats-jetstream.url": "nats://file:4222", "debezium.source.topic.prefix": "app"}
	own := withEnvironment(props, env)
	want := map[string]string{
		"debezium.sink.nats-jetstream.url":          "nats://env:4222",
		"debezium.source.topic.prefix":              "lower", // the lower-case spelling first, as SmallRye looks it up
		"debezium.source.database.hostname":         "db.env",
		"debezium.transforms.outbox.route.by.field": "kind",
		"debezium.sink.type":                        "nats-jetstream",
	}
	if !maps.Equal(props, want) {
		t.Errorf("properties %v, want %v", props, want)
	}
	if _, ok := own["debezium.sink.nats.jetstream.url"]; ok || len(own) != 3 {
		t.Errorf("keys of the variables' own %v, want the three the file does not spell", own)
	}
}

// A configuration of the environment alone: the engine's options and a
// sink's of a plain name are read; a sink option of a name with a '-'
// cannot be spelled, which Debezium Server does not read either, and a
// warning says so.
func TestReadEnvironmentAlone(t *testing.T) {
	env := ServerEnvironment([]string{
		"DEBEZIUM_SINK_TYPE=nats-jetstream",
		"DEBEZIUM_SINK_NATS_JETSTREAM_URL=nats://x:4222",
		"DEBEZIUM_SOURCE_CONNECTOR_CLASS=io.debezium.connector.postgresql.PostgresConnector",
		"DEBEZIUM_SOURCE_TOPIC_PREFIX=shop",
		"DEBEZIUM_SOURCE_SLOT_NAME=shop_slot",
	})
	tr, ok, err := ReadWith(nil, Inputs{Env: env})
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	for flag, want := range map[string]string{"sink": "nats-jetstream", "topic-prefix": "shop", "slot": "shop_slot"} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
	if _, ok := settingOf(tr, "nats-url"); ok {
		t.Errorf("--nats-url set from a variable Debezium Server does not read")
	}
	if w := strings.Join(tr.Warnings, "\n"); !strings.Contains(w, "DEBEZIUM_SINK_NATS_JETSTREAM_URL is read as debezium.sink.nats.jetstream.url, not as debezium.sink.nats-jetstream.url") {
		t.Errorf("warnings %q", tr.Warnings)
	}
	// A file of pgoutbox's own takes nothing of the environment; nor does
	// nothing at all without a Debezium Server variable.
	if _, ok, _ := ReadWith([]byte("slot = x\n"), Inputs{Env: env}); ok {
		t.Errorf("pgoutbox's own file read as a Debezium Server configuration")
	}
	if _, ok, _ := ReadWith(nil, Inputs{}); ok {
		t.Errorf("no file and no variable read as a configuration")
	}
}

// A file of DEBEZIUM_* variables (docker's --env-file) reads as Debezium
// Server's environment form.
func TestReadEnvFile(t *testing.T) {
	tr, ok, err := Read([]byte(`DEBEZIUM_SINK_TYPE=kafka
DEBEZIUM_SOURCE_CONNECTOR_CLASS=io.debezium.connector.postgresql.PostgresConnector
DEBEZIUM_SOURCE_DATABASE_HOSTNAME=db
DEBEZIUM_SOURCE_DATABASE_DBNAME=shop
DEBEZIUM_SOURCE_TOPIC_PREFIX=shop
DEBEZIUM_TRANSFORMS=outbox
DEBEZIUM_TRANSFORMS_OUTBOX_TYPE=io.debezium.transforms.outbox.EventRouter
`))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	for flag, want := range map[string]string{"topic-prefix": "shop", "format": "debezium-outbox"} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
	if u, _ := settingOf(tr, "database-url"); !strings.Contains(u, "db/shop") {
		t.Errorf("--database-url %q", u)
	}
}
