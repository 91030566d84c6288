package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/test/compat"
)

func runFlagSet() (*flag.FlagSet, *relay.Config) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var cfg relay.Config
	var c common
	c.register(fs)
	var brokers, format, snapshot string
	fs.StringVar(&brokers, "kafka-brokers", "", "")
	fs.StringVar(&snapshot, "snapshot-mode", "no_data", "")
	fs.StringVar(&format, "format", "cloudevents", "")
	fs.StringVar(&cfg.Router.Topic, "topic", "outbox.event.{aggregatetype}", "")
	fs.DurationVar(&cfg.Replication.HeartbeatInterval, "heartbeat-interval", 10*time.Second, "")
	fs.Duration("linger", 0, "")
	registerMappingFlags(fs, &cfg)
	return fs, &cfg
}

func loadConfig(t *testing.T, name, text string) (*flag.FlagSet, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, _ := runFlagSet()
	var stderr bytes.Buffer
	err := parseFlags(fs, []string{"--config", path}, io.Discard, &stderr)
	return fs, stderr.String(), err
}

func flagValue(fs *flag.FlagSet, name string) string { return fs.Lookup(name).Value.String() }

func TestDebeziumServerProperties(t *testing.T) {
	fs, warn, err := loadConfig(t, "application.properties", `
debezium.sink.type=kafka
debezium.sink.kafka.producer.bootstrap.servers=kafka-1:9092,kafka-2:9092
debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.sink.kafka.producer.linger.ms=5
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.offset.flush.interval.ms=0
debezium.source.database.hostname=db
debezium.source.database.port=5433
debezium.source.database.user=relay
debezium.source.database.password=s3cr:t@
debezium.source.database.dbname=shop
debezium.source.topic.prefix=shop
debezium.source.plugin.name=pgoutput
debezium.source.slot.name=dbz_shop
debezium.source.publication.name=dbz_pub
debezium.source.table.include.list=public\\.outbox_event
debezium.source.heartbeat.interval.ms=5000
debezium.source.snapshot.mode=no_data
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.route.by.field=aggregate_type
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.table.fields.additional.placement=event_type:header:eventType
debezium.transforms.outbox.route.topic.replacement=${routedByValue}.events
debezium.format.value.schemas.enable=false
`)
	if err != nil {
		t.Fatal(err)
	}
	for flagName, want := range map[string]string{
		"database-url": "postgres://relay:s3cr%3At%40@db:5433/shop", "kafka-brokers": "kafka-1:9092,kafka-2:9092",
		"slot": "dbz_shop", "publication": "dbz_pub", "table": "public.outbox_event", "heartbeat-interval": "5s",
		"format": "debezium-outbox", "topic-prefix": "shop", "column-aggregate-type": "aggregate_type",
		"column-aggregate-id": "aggregate_id", "column-additional": "event_type:header:eventType",
		"route-topic-replacement": "${routedByValue}.events", "key-converter": "json-schemas",
		"value-converter": "json", "header-converter": "json-schemas", "snapshot-mode": "no_data",
		"linger": "5ms",
	} {
		if got := flagValue(fs, flagName); got != want {
			t.Errorf("--%s = %q, want %q", flagName, got, want)
		}
	}
	want := "ignoring Debezium options pgoutbox does not use: debezium.source.offset.flush.interval.ms, debezium.source.offset.storage.file.filename"
	if !strings.Contains(warn, want) || strings.Count(warn, "\n") != 1 {
		t.Errorf("warning:\n%s\nwant one line containing %q", warn, want)
	}
}

func TestKafkaConnectJSON(t *testing.T) {
	fs, warn, err := loadConfig(t, "connector.json", `{"name": "outbox-connector", "config": {
  "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "tasks.max": "1", "database.hostname": "db", "database.port": 5432, "database.user": "u",
  "database.dbname": "shop", "topic.prefix": "dbserver1", "plugin.name": "pgoutput",
  "table.include.list": "public.outbox", "tombstones.on.delete": false, "snapshot.mode": "initial",
  "max.queue.size": 8192, "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "transforms.outbox.table.expand.json.payload": "true",
  "key.converter": "org.apache.kafka.connect.storage.StringConverter",
  "value.converter": "org.apache.kafka.connect.json.JsonConverter",
  "value.converter.schemas.enable": "false"}}`)
	if err != nil {
		t.Fatal(err)
	}
	for flagName, want := range map[string]string{
		"database-url": "postgres://u@db:5432/shop", "table": "public.outbox", "format": "debezium-outbox",
		"expand-json-payload": "true", "key-converter": "string", "value-converter": "json", "header-converter": "string",
		"route-topic-replacement": "outbox.event.${routedByValue}", "heartbeat-interval": "10s",
		"snapshot-mode": "initial", "tombstones-on-delete": "false",
	} {
		if got := flagValue(fs, flagName); got != want {
			t.Errorf("--%s = %q, want %q", flagName, got, want)
		}
	}
	if !strings.Contains(warn, ": max.queue.size (see") {
		t.Errorf("warning %q does not name max.queue.size", warn)
	}
}

// Every router option Debezium 3.6 reads becomes a setting, and the
// converters users run map to pgoutbox's (their options included).
func TestDebeziumRouterOptions(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		want       map[string]string
	}{
		{"options", `{"config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "transforms.outbox.table.field.event.timestamp": "ts",
  "transforms.outbox.table.field.event.schema.version": "ver",
  "transforms.outbox.table.fields.additional.placement": "part:PARTITION,ver:Envelope:v",
  "transforms.outbox.table.field.additional.missing": "IGNORE",
  "transforms.outbox.route.tombstone.on.empty.payload": "true",
  "transforms.outbox.table.op.invalid.behavior": " Fatal ",
  "transforms.outbox.tracing.span.context.field": "trace_ctx"}}`, map[string]string{
			"column-time": "ts", "column-schema-version": "ver", "column-additional": "part:PARTITION,ver:Envelope:v",
			"column-additional-missing": "ignore", "tombstone-on-empty-payload": "true", "on-update": "fatal",
			"column-trace": "trace_ctx", "debezium-context-headers": "true"}},
		{"without context headers", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "extended.headers.enabled": "false"}`,
			map[string]string{"debezium-context-headers": "false"}},
		{"the 2.5-3.5 missing option", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "transforms.outbox.table.fields.additional.error.on.missing": "false"}`, map[string]string{"column-additional-missing": "ignore"}},
		{"byte arrays", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "key.converter": "io.debezium.converters.BinaryDataConverter",
  "key.converter.delegate.converter.type": "org.apache.kafka.connect.storage.StringConverter",
  "value.converter": "io.debezium.converters.BinaryDataConverter",
  "value.converter.delegate.converter.type": "org.apache.kafka.connect.json.JsonConverter",
  "value.converter.delegate.converter.type.schemas.enable": "false",
  "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`, map[string]string{
			"key-converter": "binary:string", "value-converter": "binary:json", "header-converter": "bytearray"}},
		{"binary without a delegate", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "value.converter": "io.debezium.converters.BinaryDataConverter",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`, map[string]string{"value-converter": "binary"}},
		{"Debezium Server formats", "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.format.key=simplestring\ndebezium.format.value=binary\ndebezium.format.header=jsonbytearray\n" +
			"debezium.transforms=outbox\ndebezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n",
			map[string]string{"key-converter": "string", "value-converter": "binary", "header-converter": "json-schemas"}},
		{"Debezium Server's options for every converter", "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.format.schemas.enable=false\ndebezium.format.value.schemas.enable=true\n" +
			"debezium.transforms=outbox\ndebezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n",
			map[string]string{"key-converter": "json", "value-converter": "json-schemas", "header-converter": "json"}},
		{"Debezium Server's binary format with a delegate", "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.format.value=binary\ndebezium.format.value.delegate.converter.type=org.apache.kafka.connect.json.JsonConverter\n" +
			"debezium.transforms=outbox\ndebezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n",
			map[string]string{"value-converter": "binary:json-schemas"}},
		{"a header converter's delegate, which Kafka Connect never configures", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "header.converter": "io.debezium.converters.BinaryDataConverter",
  "header.converter.delegate.converter.type": "org.apache.kafka.connect.json.JsonConverter",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`, map[string]string{"header-converter": "binary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "c.json"
			if !strings.HasPrefix(tc.conf, "{") {
				name = "application.properties"
			}
			fs, _, err := loadConfig(t, name, tc.conf)
			if err != nil {
				t.Fatal(err)
			}
			for flagName, want := range tc.want {
				if got := flagValue(fs, flagName); got != want {
					t.Errorf("--%s = %q, want %q", flagName, got, want)
				}
			}
		})
	}
}

func TestDebeziumConfigWithoutRouterIsChangeEvents(t *testing.T) {
	fs, _, err := loadConfig(t, "c.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "p"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := flagValue(fs, "format"); got != "debezium" {
		t.Errorf("format = %q, want debezium", got)
	}
}

func TestDebeziumConfigRefusals(t *testing.T) {
	_, _, err := loadConfig(t, "c.json", `{"config": {
  "connector.class": "io.debezium.connector.mysql.MySqlConnector",
  "snapshot.mode": "custom", "slot.drop.on.stop": "yes",
  "table.include.list": "public.outbox,public.other", "schema.include.list": "inventory",
  "transforms": "outbox,logical",
  "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
  "transforms.outbox.table.fields.additional.placement": "",
  "transforms.outbox.table.op.invalid.behavior": "invalidOption",
  "transforms.outbox.table.field.additional.missing": "maybe",
  "transforms.logical.type": "io.debezium.transforms.ByLogicalTableRouter",
  "transforms.logical.topic.regex": ".*", "transforms.logical.topic.replacement": "all",
  "value.converter": "io.confluent.connect.protobuf.ProtobufConverter"}}`)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, key := range []string{"connector.class", "snapshot.mode", "slot.drop.on.stop", "schema.include.list",
		"transforms.logical.type", "transforms.outbox.table.fields.additional.placement", "transforms.outbox.table.op.invalid.behavior",
		"transforms.outbox.table.field.additional.missing", "value.converter"} {
		if !strings.Contains(err.Error(), key+":") {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}
}

// Kafka Connect's aliases are read as their classes, but for the
// connector's own, on which Debezium's task fails.
func TestDebeziumConfigAliases(t *testing.T) {
	fs, _, err := loadConfig(t, "c.json", `{"config": {
  "connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop",
  "transforms": "outbox", "transforms.outbox.type": "EventRouter",
  "key.converter": "String", "value.converter": "Json", "value.converter.schemas.enable": "false"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if f, k, v := flagValue(fs, "format"), flagValue(fs, "key-converter"), flagValue(fs, "value-converter"); f != "debezium-outbox" || k != "string" || v != "json" {
		t.Errorf("format %q, key converter %q, value converter %q", f, k, v)
	}
	for _, class := range []string{"PostgresConnector", "Postgres"} {
		_, _, err := loadConfig(t, "c.json", `{"config": {"connector.class": "`+class+`", "topic.prefix": "shop"}}`)
		if err == nil || !strings.Contains(err.Error(), "connector.class:") || !strings.Contains(err.Error(), "ClassNotFoundException") {
			t.Errorf("connector.class %s: %v", class, err)
		}
	}
}

// Command-line flags win over the file.
func TestDebeziumConfigCommandLineWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.properties")
	os.WriteFile(path, []byte("debezium.source.slot.name=from_file\ndebezium.sink.type=kafka\n"), 0o600)
	fs, _ := runFlagSet()
	if err := parseFlags(fs, []string{"--config", path, "--slot", "from_flag"}, io.Discard, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got := flagValue(fs, "slot"); got != "from_flag" {
		t.Errorf("slot = %q", got)
	}
}

// table.include.list names tables as --table does (schema-qualified names
// the relay accepts, dots optionally escaped, several comma-separated);
// anything else is a pattern, passed to --table-include-list and matched
// against the database's tables at start.
func TestDebeziumConfigTableIncludeList(t *testing.T) {
	long := strings.Repeat("t", 64) // one byte over Postgres's identifier limit
	for _, tt := range []struct {
		list, table, include string
	}{
		{`public\\.outbox_event`, "public.outbox_event", ""},
		{"Sales.OutboxEvents", "Sales.OutboxEvents", ""},
		{"app.outbox$2", "app.outbox$2", ""},
		{"public.orders_outbox,billing.outbox", "public.orders_outbox,billing.outbox", ""},
		{"outbox", "public.outbox", "outbox"},
		{"public.out.box", "public.outbox", "public.out.box"},
		{"public.out-box", "public.out-box", ""},
		{"my-app.OutboxMessage", "my-app.OutboxMessage", ""},
		{"public." + long, "public.outbox", "public." + long},
		{`public\\.outbox.*`, "public.outbox", `public\\.outbox.*`},
	} {
		fs, _, err := loadConfig(t, "c.json", `{"config": {"table.include.list": "`+tt.list+`"}}`)
		if err != nil {
			t.Errorf("%s: %v", tt.list, err)
			continue
		}
		want := strings.ReplaceAll(tt.include, `\\`, `\`)
		if got, gotInc := flagValue(fs, "table"), flagValue(fs, "table-include-list"); got != tt.table || gotInc != want {
			t.Errorf("%s: --table %q --table-include-list %q, want %q and %q", tt.list, got, gotInc, tt.table, want)
		}
	}
}

// An envelope field in a CloudEvents format becomes an extension attribute:
// a name the encoder would refuse on every row is refused at start instead,
// a context attribute's name included.
func TestAdditionalEnvelopeExtensionName(t *testing.T) {
	for _, tt := range []struct {
		additional string
		ok         bool
	}{
		{"tenant:envelope", true},
		{"tenant_id:envelope:tenantid", true},
		{"tenant_id:envelope", false},     // '_' is not allowed
		{"region:envelope:Region", false}, // upper case
		{"src:envelope:source", false},    // a context attribute
		{"origin:envelope:partitionkey", false},
		{"tenant_id:header", true}, // headers are not extensions
	} {
		for _, format := range []schema.Format{schema.CloudEvents, schema.CloudEventsBinary} {
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			var cfg relay.Config
			m := registerMappingFlags(fs, &cfg)
			if err := fs.Parse([]string{"--column-additional", tt.additional}); err != nil {
				t.Fatal(err)
			}
			cfg.Encoder.Format = format
			err := m.apply(context.Background(), fs, &cfg, &common{}, []string{"public.outbox"})
			if (err == nil) != tt.ok {
				t.Errorf("%s, %s: err %v", tt.additional, format, err)
			}
		}
	}
}

// Every case of the differential corpus is a configuration pgoutbox
// takes, in each form the case gives: none of its options is refused,
// unless the case says pgoutbox refuses it (and then with its words).
func TestCompatCasesAccepted(t *testing.T) {
	cases, err := compat.LoadCases(filepath.Join("..", "..", "test", "compat", "testdata", "cases"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		refuses := ""
		for _, d := range c.Differences {
			refuses += d.PgoutboxRefuses
		}
		refused := func(err error) bool { return err != nil && refuses != "" && strings.Contains(err.Error(), refuses) }
		// Without the router, the connector's change events; so too with
		// an ExtractNewRecordState before it, which leaves it nothing to
		// route.
		format := "debezium"
		conf := c.DebeziumConfig()
		for _, alias := range strings.Split(conf["transforms"], ",") {
			typ := conf["transforms."+strings.TrimSpace(alias)+".type"]
			if typ == "io.debezium.transforms.ExtractNewRecordState" && conf["transforms."+strings.TrimSpace(alias)+".predicate"] == "" {
				break
			}
			if typ == "io.debezium.transforms.outbox.EventRouter" || typ == "EventRouter" { // or Kafka Connect's alias
				format = "debezium-outbox"
				break
			}
		}
		if len(c.Connect) > 0 {
			conf := map[string]string{"database.hostname": "db", "database.dbname": "shop", "topic.prefix": "dbz"}
			for k, v := range c.Connect {
				conf[k] = v
			}
			// The registry's URL is the harness's to set.
			for _, part := range []string{"key", "value"} {
				for _, p := range []string{part + ".converter", part + ".converter.delegate.converter.type"} {
					if conf[p] == "io.apicurio.registry.utils.converter.AvroConverter" || conf[p] == "io.apicurio.registry.utils.converter.ExtJsonConverter" {
						conf[p+".apicurio.registry.url"] = "http://registry:8080/apis/registry/v2"
					}
				}
			}
			if c.UsesCloudEventsAvro() {
				conf["value.converter.avro.apicurio.registry.url"] = "http://registry:8080/apis/registry/v2"
			}
			data, err := json.Marshal(map[string]any{"name": c.Name, "config": conf})
			if err != nil {
				t.Fatal(err)
			}
			if fs, warn, err := loadConfig(t, "c.json", string(data)); !refused(err) && (err != nil || flagValue(fs, "format") != format) {
				t.Errorf("%s (connect): %v %s", c.Name, err, warn)
			}
		}
		if c.Server != "" {
			if fs, warn, err := loadConfig(t, "application.properties", c.Server+"debezium.source.topic.prefix=dbz\n"); !refused(err) && (err != nil || flagValue(fs, "format") != format) {
				t.Errorf("%s (server): %v %s", c.Name, err, warn)
			}
		}
	}
}

// Debezium Server refuses to start with a header format other than json,
// jsonbytearray, connect or clientprovided (DebeziumSerializationProducer):
// so does pgoutbox, rather than guess what such a file meant.
func TestDebeziumServerHeaderFormats(t *testing.T) {
	_, _, err := loadConfig(t, "application.properties", "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n"+
		"debezium.format.header=simplestring\n"+
		"debezium.transforms=outbox\ndebezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n")
	if err == nil || !strings.Contains(err.Error(), "debezium.format.header: \"simplestring\" is not a header format of Debezium Server") {
		t.Fatalf("simplestring headers: %v", err)
	}
}

// A snapshot SELECT of the configuration's own restricts what Debezium's
// snapshot sends; pgoutbox cannot run it, and a snapshot without it would
// send every row again, so it is refused when the snapshot runs.
func TestDebeziumSnapshotSelectOverrides(t *testing.T) {
	conf := func(mode string) string {
		return `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "p",
  "table.include.list": "public.outbox", "snapshot.mode": "` + mode + `",
  "snapshot.select.statement.overrides": "public.outbox",
  "snapshot.select.statement.overrides.public.outbox": "SELECT * FROM public.outbox WHERE id > 1000"}`
	}
	_, _, err := loadConfig(t, "c.json", conf("initial"))
	if err == nil {
		t.Fatal("a snapshot with a SELECT of its own accepted")
	}
	for _, want := range []string{"snapshot.select.statement.overrides.public.outbox:", "--snapshot-after"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if _, _, err := loadConfig(t, "c.json", conf("no_data")); err != nil {
		t.Errorf("without a snapshot the SELECT does not matter: %v", err)
	}
	for _, mode := range []string{"always", "initial_only", `configuration_based", "snapshot.mode.configuration.based.snapshot.data": "true", "snapshot.mode.configuration.based.start.stream": "true`} {
		if _, _, err := loadConfig(t, "c.json", conf(mode)); err == nil || !strings.Contains(err.Error(), "snapshot.select.statement.overrides.public.outbox:") {
			t.Errorf("snapshot.mode %s: a snapshot with a SELECT of its own: %v", mode, err)
		}
	}
	based := `configuration_based", "snapshot.mode.configuration.based.start.stream": "true`
	if _, _, err := loadConfig(t, "c.json", conf(based)); err != nil {
		t.Errorf("configuration_based without snapshot.data takes no snapshot, and the SELECT does not matter: %v", err)
	}
}

// snapshot.mode maps to --snapshot-mode, unset as Debezium's default
// (initial); the modes pgoutbox cannot keep are refused by name.
func TestDebeziumSnapshotMode(t *testing.T) {
	const based = "snapshot.mode.configuration.based."
	for _, tc := range []struct {
		mode string // "" for unset
		// with: configuration_based's options, as JSON members
		with string
		want string // the flag's value, or "" for refused
		// key the refusal names; snapshot.mode unless said
		key string
	}{
		{mode: "", want: "initial"}, {mode: "initial", want: "initial"}, {mode: "when_needed", want: "when_needed"},
		{mode: "no_data", want: "no_data"}, {mode: "never", want: "no_data"},
		{mode: "always", want: "always"}, {mode: " Always ", want: "always"}, {mode: "initial_only", want: "initial_only"},
		{mode: "custom", with: `"snapshot.mode.custom.name": "mine"`}, {mode: "sometimes"},
		{mode: "configuration_based", with: `"` + based + `snapshot.data": "true", "` + based + `snapshot.schema": "true", "` + based + `start.stream": "true"`, want: "always"},
		{mode: "configuration_based", with: `"` + based + `snapshot.data": "false", "` + based + `start.stream": "true", "` + based + `snapshot.on.data.error": "true"`, want: "no_data"},
		{mode: "configuration_based", key: based + "start.stream"},
		{mode: "configuration_based", with: `"` + based + `snapshot.data": "true"`, want: "always_only"},
		{mode: "configuration_based", with: `"` + based + `snapshot.data": "true", "` + based + `start.stream": "false"`, want: "always_only"},
		{mode: "configuration_based", with: `"` + based + `snapshot.data": "true", "` + based + `start.stream": "true", "` + based + `snapshot.on.schema.error": "true"`, key: based + "snapshot.on.schema.error"},
		{mode: "configuration_based", with: `"` + based + `snapshot.data": "yes", "` + based + `start.stream": "true"`, key: based + "snapshot.data"},
		// Debezium reads them with configuration_based only.
		{mode: "initial", with: `"` + based + `start.stream": "false"`, want: "initial"},
	} {
		t.Run(cmp.Or(strings.TrimSpace(tc.mode), "unset")+"/"+tc.with, func(t *testing.T) {
			mode := ""
			if tc.mode != "" {
				mode = `, "snapshot.mode": "` + tc.mode + `"`
			}
			if tc.with != "" {
				mode += ", " + tc.with
			}
			fs, _, err := loadConfig(t, "c.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "p",
  "table.include.list": "public.outbox"`+mode+`}`)
			key := cmp.Or(tc.key, "snapshot.mode")
			switch {
			case tc.want == "" && (err == nil || !strings.Contains(err.Error(), key+":")):
				t.Errorf("want a refusal naming %s, got %v", key, err)
			case tc.want != "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && flagValue(fs, "snapshot-mode") != tc.want:
				t.Errorf("--snapshot-mode = %q, want %q", flagValue(fs, "snapshot-mode"), tc.want)
			}
		})
	}
	// A snapshot SELECT of the configuration's own is refused with the
	// default too, as the snapshot runs.
	_, _, err := loadConfig(t, "c.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "p",
  "table.include.list": "public.outbox", "snapshot.select.statement.overrides.public.outbox": "SELECT 1"}`)
	if err == nil || !strings.Contains(err.Error(), "snapshot.select.statement.overrides.public.outbox:") {
		t.Errorf("a snapshot SELECT under the default snapshot.mode: %v", err)
	}
}

// loadServerFile parses run's flags from a Debezium Server file of text,
// returning the flags, the warnings and the refusal.
func loadServerFile(t *testing.T, text string) (*flag.FlagSet, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "application.properties")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	(&relayFlags{}).register(fs)
	var stderr bytes.Buffer
	err := parseFlags(fs, []string{"--config", path}, io.Discard, &stderr)
	return fs, stderr.String(), err
}

// Debezium Server's NATS JetStream sink: its keys become the --nats-*
// flags, sync.* is ignored, a keystore is refused.
func TestDebeziumServerNATS(t *testing.T) {
	base := `
debezium.sink.type=nats-jetstream
debezium.sink.nats-jetstream.url=nats://n1:4222,nats://n2:4222
debezium.sink.nats-jetstream.create-stream=true
debezium.sink.nats-jetstream.stream-name=Outbox
debezium.sink.nats-jetstream.subjects=outbox.>
debezium.sink.nats-jetstream.storage=disk
debezium.sink.nats-jetstream.auth.user=relay
debezium.sink.nats-jetstream.auth.password=pa55
debezium.sink.nats-jetstream.async.enabled=false
debezium.sink.nats-jetstream.async.timeout.ms=1500
debezium.sink.nats-jetstream.sync.retries=3
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`
	load := func(text string) (*flag.FlagSet, string, error) { return loadServerFile(t, text) }
	fs, warn, err := load(base)
	if err != nil {
		t.Fatal(err)
	}
	for flagName, want := range map[string]string{
		"sink": "nats-jetstream", "nats-url": "nats://n1:4222,nats://n2:4222", "nats-create-stream": "true",
		"nats-stream-name": "Outbox", "nats-subjects": "outbox.>", "nats-storage": "memory", // Debezium Server: only "file" is file
		"nats-user": "relay", "nats-password": "pa55", "nats-sync": "true", "nats-ack-timeout": "1.5s",
	} {
		if got := flagValue(fs, flagName); got != want {
			t.Errorf("--%s = %q, want %q", flagName, got, want)
		}
	}
	if !strings.Contains(warn, "debezium.sink.nats-jetstream.sync.retries (pgoutbox sends again") || strings.Contains(warn, "pa55") {
		t.Errorf("warning:\n%s\nwant sync.retries named, no password", warn)
	}
	// A key store is the TLS flags' (debezium.TestSinkStores), unused
	// with auth.user as Debezium Server leaves it; another auth.tls key is
	// refused.
	_, _, err = load(base + "debezium.sink.nats-jetstream.auth.tls.keystore=/etc/ks.jks\n")
	if err != nil {
		t.Errorf("a keystore with auth.user: %v", err)
	}
	_, _, err = load(base + "debezium.sink.nats-jetstream.auth.tls.protocol=TLSv1.2\n")
	if err == nil || !strings.Contains(err.Error(), "debezium.sink.nats-jetstream.auth.tls.protocol: not a key") {
		t.Errorf("an unknown auth.tls key: %v, want it refused by name", err)
	}
	_, _, err = load(strings.Replace(base, "sink.type=nats-jetstream", "sink.type=eventhubs", 1))
	if err == nil || !strings.Contains(err.Error(), `debezium.sink.type: "eventhubs"`) {
		t.Errorf("eventhubs: %v, want it refused by name", err)
	}
}

// Debezium Server's RabbitMQ sink: its keys become the --rabbitmq-*
// flags, the amqp-client connection keys the server's parts, a keystore
// and RabbitMQ Streams are refused by name.
func TestDebeziumServerRabbitMQ(t *testing.T) {
	base := `
debezium.sink.type=rabbitmq
debezium.sink.rabbitmq.connection.host=rmq1
debezium.sink.rabbitmq.connection.port=5673
debezium.sink.rabbitmq.connection.username=relay
debezium.sink.rabbitmq.connection.password=pa55
debezium.sink.rabbitmq.connection.virtual.host=ledger
debezium.sink.rabbitmq.connection.connection.timeout=5000
debezium.sink.rabbitmq.exchange=outbox
debezium.sink.rabbitmq.routingKey=events
debezium.sink.rabbitmq.routingKey.source=key
debezium.sink.rabbitmq.routingKeyFromTopicName=true
debezium.sink.rabbitmq.autoCreateRoutingKey=true
debezium.sink.rabbitmq.routingKeyDurable=false
debezium.sink.rabbitmq.deliveryMode=1
debezium.sink.rabbitmq.ackTimeout=1500
debezium.sink.rabbitmq.null.value=gone
debezium.format.header=jsonbytearray
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`
	load := func(text string) (*flag.FlagSet, string, error) { return loadServerFile(t, text) }
	fs, warn, err := load(base)
	if err != nil {
		t.Fatal(err)
	}
	for flagName, want := range map[string]string{
		"sink": "rabbitmq", "rabbitmq-host": "rmq1", "rabbitmq-port": "5673", "rabbitmq-user": "relay", "rabbitmq-password": "pa55",
		"rabbitmq-vhost": "ledger", "rabbitmq-exchange": "outbox", "rabbitmq-routing-key": "events", "rabbitmq-routing-key-source": "key",
		"rabbitmq-auto-create-routing-key": "true", "rabbitmq-routing-key-durable": "false", "rabbitmq-delivery-mode": "1",
		"rabbitmq-ack-timeout": "1.5s", "rabbitmq-null-value": "gone", "rabbitmq-header-bytes": "true",
	} {
		if got := flagValue(fs, flagName); got != want {
			t.Errorf("--%s = %q, want %q", flagName, got, want)
		}
	}
	if !strings.Contains(warn, "debezium.sink.rabbitmq.routingKeyFromTopicName (deprecated") ||
		!strings.Contains(warn, "debezium.sink.rabbitmq.connection.connection.timeout (pgoutbox connects again") || strings.Contains(warn, "pa55") {
		t.Errorf("warning:\n%s\nwant routingKeyFromTopicName and connection.connection.timeout named, no password", warn)
	}
	var r rabbitmqFlags
	r.host, r.port, r.user, r.password, r.vhost = "rmq1", 5673, "relay", "pa55", "ledger"
	if u, err := r.serverURL(false); err != nil || u != "amqp://relay:pa55@rmq1:5673/ledger" {
		t.Errorf("server URL %q (%v)", u, err)
	}
	r = rabbitmqFlags{url: "amqp://a:b@h/v", vhost: "w"}
	if u, err := r.serverURL(true); err != nil || u != "amqps://a:b@h/w" {
		t.Errorf("server URL under TLS %q (%v)", u, err)
	}
	for key, why := range map[string]string{
		"debezium.sink.rabbitmq.connection.ssl.algorithm=TLSv1.1": "debezium.sink.rabbitmq.connection.ssl.algorithm: pgoutbox speaks TLS 1.2",
		"debezium.sink.rabbitmq.routingKey.source=header":         `debezium.sink.rabbitmq.routingKey.source: "header"`,
		"debezium.sink.rabbitmq.deliveryMode=3":                   `debezium.sink.rabbitmq.deliveryMode: "3"`,
	} {
		if _, _, err := load(base + key + "\n"); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want it refused by name", key, err)
		}
	}
}

// message.key.columns as Debezium's CustomKeyMapper reads it: each
// table:column pattern in the order given, matched in any case; the
// primary key (nil) for a table none names.
func TestMessageKey(t *testing.T) {
	cols := []string{"id", "aggregatetype", "aggregateid", "payload"}
	table := outbox.Table{Schema: "public", Name: "outbox"}
	for _, tt := range []struct {
		spec string
		want []string
	}{
		{"public.outbox:aggregateid", []string{"aggregateid"}},
		{"public.outbox:aggregateid,AGGREGATETYPE", []string{"aggregateid", "aggregatetype"}},
		{"billing.invoices:number; public\\.out.*:aggregate.*", []string{"aggregatetype", "aggregateid"}},
		{"billing.invoices:number", nil},
	} {
		got, err := messageKey(tt.spec, table, cols)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v %v, want %v", tt.spec, got, err, tt.want)
		}
	}
	if _, err := messageKey("public.outbox", table, cols); err == nil {
		t.Error("a table without columns accepted")
	}
}

// Placeholders pgoutbox cannot resolve in the database's options only, as
// Strimzi's ${secrets:…}, give way to a database URL from the command line
// or the environment; without one they are refused with that advice.
func TestUnresolvedDatabaseOptionsReplacedByURL(t *testing.T) {
	const strimzi = `apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaConnector
metadata:
  name: outbox
spec:
  class: io.debezium.connector.postgresql.PostgresConnector
  config:
    database.hostname: db
    database.user: ${secrets:shop/db-credentials:username}
    database.password: ${secrets:shop/db-credentials:password}
    database.dbname: shop
    topic.prefix: shop
    table.include.list: public.outbox
    transforms: outbox
    transforms.outbox.type: io.debezium.transforms.outbox.EventRouter
    transforms.outbox.route.topic.replacement: ${secrets:shop/topics:name}
`
	_, _, err := loadConfig(t, "connector.yaml", strimzi)
	if err == nil || !strings.Contains(err.Error(), "transforms.outbox.route.topic.replacement") {
		t.Errorf("a placeholder outside the database's options: %v", err)
	}
	conf := strings.Replace(strimzi, "    transforms.outbox.route.topic.replacement: ${secrets:shop/topics:name}\n", "", 1)
	_, _, err = loadConfig(t, "connector.yaml", conf)
	if err == nil || !strings.Contains(err.Error(), "database.password: ${secrets:shop/db-credentials:password}") ||
		!strings.Contains(err.Error(), "--database-url or PGOUTBOX_DATABASE_URL") {
		t.Errorf("without a URL: %v", err)
	}
	t.Setenv("PGOUTBOX_DATABASE_URL", "postgres://relay:pw@db.internal/shop")
	fs, _, err := loadConfig(t, "connector.yaml", conf)
	if err != nil {
		t.Fatal(err)
	}
	if got := flagValue(fs, "database-url"); got != "postgres://relay:pw@db.internal/shop" {
		t.Errorf("--database-url %q", got)
	}
	if got := flagValue(fs, "topic-prefix"); got != "shop" {
		t.Errorf("--topic-prefix %q: the rest of the file read", got)
	}
}
