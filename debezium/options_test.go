package debezium

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/debezium.md's option table")

// docs/debezium.md's "Every option" is the table itself: written from it,
// so that the two cannot drift.
func TestDocTable(t *testing.T) {
	path := filepath.Join("..", "docs", "debezium.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, DocBegin), strings.Index(doc, DocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no option table between %q and %q", path, DocBegin, DocEnd)
	}
	got, want := doc[i:j+len(DocEnd)+1], DocTable()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i]+want+doc[j+len(DocEnd)+1:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's option table is not the table's: go test ./debezium -run TestDocTable -update", path)
}

// translateConnect reads a Kafka Connect config object.
func translateConnect(t *testing.T, conf string) (Translation, error) {
	t.Helper()
	tr, ok, err := Read([]byte(conf))
	if !ok {
		t.Fatalf("%s: not read as a Debezium configuration", conf)
	}
	return tr, err
}

func settingOf(tr Translation, flag string) (string, bool) {
	v, ok := "", false
	for _, s := range tr.Settings {
		if s.Flag == flag {
			v, ok = s.Value, true // the last one wins, as flags applied in order
		}
	}
	return v, ok
}

// Every row of the table is the one its key is read by: a connector or
// router option that names a setting gives it, one the table ignores is
// named in the warning, and no other is.
func TestEveryRowIsRead(t *testing.T) {
	samples := map[string]string{
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "heartbeat.interval.ms": "500",
		"plugin.name": "pgoutput", "table.include.list": "public.outbox", "table.whitelist": "public.outbox",
		"snapshot.mode": "initial", "table.fields.additional.placement": "kind:header",
		"table.field.additional.missing": "ignore", "table.fields.additional.error.on.missing": "false",
		"table.op.invalid.behavior": "warn", "route.tombstone.on.empty.payload": "true", "table.expand.json.payload": "true",
		"converters": " ", "column.include.list": ".*", "column.whitelist": ".*",
		"database.initial.statements": " ; ",
	}
	for _, o := range Options() {
		if o.Part != Connector && o.Part != Router || strings.HasSuffix(o.Key, ".") || o.Key == "transforms" || o.Key == "predicates" {
			continue
		}
		if strings.HasPrefix(o.Key, connectProducer) {
			continue // read together: TestProducerSettings
		}
		t.Run(o.Key, func(t *testing.T) {
			v := samples[o.Key]
			if v == "" {
				v = o.Default
			}
			if v == "" {
				v = "x"
			}
			conf := `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "` + o.Key + `": "` + v + `"}`
			if o.Key == "database.hostname" {
				// Debezium requires the database with a host.
				conf = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.dbname": "shop", "` + o.Key + `": "` + v + `"}`
			}
			if o.Key == "heartbeat.action.query" || strings.HasPrefix(o.Key, "topic.heartbeat.") {
				// Run only with the heartbeat.
				conf = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "heartbeat.interval.ms": "500", "` + o.Key + `": "` + v + `"}`
			}
			if strings.HasPrefix(o.Key, "column.") {
				// Column filters are taken with the router (which reads
				// none of column x).
				conf = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox",
  "transforms": "outbox", "transforms.outbox.type": "` + EventRouterClass + `", "` + o.Key + `": "` + v + `"}`
			}
			if strings.HasPrefix(o.Key, "message.prefix.") {
				// Message prefixes are read with the messages' decoding.
				conf = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox",
  "transforms": "decode,outbox", "transforms.decode.type": "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
  "transforms.outbox.type": "` + EventRouterClass + `", "` + o.Key + `": "` + v + `"}`
			}
			key := o.Key
			if o.Part == Router {
				key = "transforms.outbox." + o.Key
				conf = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "transforms": "outbox",
  "transforms.outbox.type": "` + EventRouterClass + `", "` + key + `": "` + v + `"}`
			}
			tr, err := translateConnect(t, conf)
			if err != nil {
				t.Fatalf("%s=%s refused: %v", key, v, err)
			}
			named := slices.ContainsFunc(tr.Ignored, func(s string) bool { return s == key || strings.HasPrefix(s, key+" ") })
			if named != (o.Setting == Ignored) {
				t.Errorf("%s: named among the ignored %v: %v, the table says %q", key, tr.Ignored, named, o.Setting)
			}
			if o.Setting != "" && o.Setting != Ignored && o.Setting != "database-url" {
				if _, ok := settingOf(tr, o.Setting); !ok {
					t.Errorf("%s=%s gives no --%s", key, v, o.Setting)
				}
			}
		})
	}
}

// A row that refuses values names the key in the refusal.
func TestRefusalsNameTheKey(t *testing.T) {
	for _, tt := range []struct{ key, value string }{
		{"connector.class", "io.debezium.connector.mysql.MySqlConnector"},
		{"publication.autocreate.mode", "no_tables"},
		{"heartbeat.interval.ms", "-1"},
		{"snapshot.mode", "custom"},
		{"snapshot.mode", "sometimes"},
		{"slot.drop.on.stop", "maybe"},
		{"provide.transaction.metadata", "maybe"},
		{"decimal.handling.mode", "fancy"},
		{"time.precision.mode", "fancy"},
		{"binary.handling.mode", "base32"},
		{"transforms.outbox.table.fields.additional.placement", ""},
		{"transforms.outbox.table.field.additional.missing", "maybe"},
		{"transforms.outbox.table.op.invalid.behavior", "sometimes"},
		{"transforms.outbox.table.json.payload.null.behavior", "optional_nulls"},
		{"column.mask.with.0.chars", "public.outbox.email"},
		{"column.mask.hash.SHA-3-256.with.salt.CzQMA0cB5K", "public.outbox.email"},
		{"column.truncate.to.0.chars", "public.outbox.note"},
		{"converters", "isbn"},
		{"database.sslmode", "verify_full"},
		{"database.sslfactory", "org.postgresql.ssl.DefaultJavaSSLFactory"},
		{"database.tcpKeepAlive", "yes"},
	} {
		conf := `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "transforms": "outbox",
  "transforms.outbox.type": "` + EventRouterClass + `", "` + tt.key + `": "` + tt.value + `"}`
		if tt.key == "connector.class" {
			conf = `{"connector.class": "` + tt.value + `"}`
		}
		_, err := translateConnect(t, conf)
		if err == nil || !strings.Contains(err.Error(), tt.key+": ") {
			t.Errorf("%s=%q: %v", tt.key, tt.value, err)
		}
	}
}

// The converter table says what connectConverter does with each class.
func TestConverterClasses(t *testing.T) {
	for _, c := range ConverterClasses() {
		got, ok, why := connectConverter("value", c.Class, nil)
		if !ok || got != c.Value {
			t.Errorf("%s: %q %v %s, the table says %q", c.Class, got, ok, why, c.Value)
		}
	}
}

// pgoutbox's own flag = value file is not a Debezium configuration.
func TestReadOwnConfigFile(t *testing.T) {
	if _, ok, err := Read([]byte("kafka-brokers = k:9092\ntable = public.outbox\n")); ok || err != nil {
		t.Errorf("read as Debezium's: %v %v", ok, err)
	}
}

// The value options are read as Debezium reads them, trimmed and in any
// case; a value Debezium refuses is refused naming the option.
func TestValueModes(t *testing.T) {
	for _, tt := range []struct {
		key, value, flag, want, refusal string
	}{
		{"time.precision.mode", "connect", "time-precision-mode", "connect", ""},
		{"time.precision.mode", " Adaptive_Time_Microseconds ", "time-precision-mode", "adaptive_time_microseconds", ""},
		{"time.precision.mode", "NanoSeconds", "time-precision-mode", "nanoseconds", ""},
		{"time.precision.mode", "isostring", "time-precision-mode", "isostring", ""},
		{"time.precision.mode", "millis", "", "", "not a value Debezium takes either"},
		{"decimal.handling.mode", "STRING", "decimal-handling-mode", "string", ""},
		{"decimal.handling.mode", "double", "decimal-handling-mode", "double", ""},
		{"binary.handling.mode", "base64-url-safe", "binary-handling-mode", "base64-url-safe", ""},
		{"binary.handling.mode", "hex", "binary-handling-mode", "hex", ""},
		{"binary.handling.mode", "base64url", "", "", "not a value Debezium takes either"},
	} {
		tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "`+tt.key+`": "`+tt.value+`"}`)
		if tt.refusal != "" {
			if err == nil || !strings.Contains(err.Error(), tt.key+": ") || !strings.Contains(err.Error(), tt.refusal) {
				t.Errorf("%s=%q: %v, want a refusal saying %q", tt.key, tt.value, err, tt.refusal)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s=%q: %v", tt.key, tt.value, err)
			continue
		}
		if got, _ := settingOf(tr, tt.flag); got != tt.want {
			t.Errorf("%s=%q: --%s %q, want %q", tt.key, tt.value, tt.flag, got, tt.want)
		}
	}
}

// slot.drop.on.stop=true, a development setting, is read as false: one
// warning says the slot is kept and how to drop it, naming the key as the
// file writes it.
func TestSlotDropOnStop(t *testing.T) {
	for _, tt := range []struct {
		conf, warning string
	}{
		{`{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "slot.drop.on.stop": "TRUE", "slot.name": "orders"}`,
			"slot.drop.on.stop=true: pgoutbox keeps the slot orders when it stops"},
		{"debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\ndebezium.source.slot.drop.on.stop=true\n",
			"debezium.source.slot.drop.on.stop=true: pgoutbox keeps the slot debezium when it stops"},
	} {
		tr, ok, err := Read([]byte(tt.conf))
		if !ok || err != nil {
			t.Fatalf("%s: %v %v", tt.conf, ok, err)
		}
		if len(tr.Warnings) != 1 || !strings.HasPrefix(tr.Warnings[0], tt.warning) || !strings.Contains(tr.Warnings[0], "pgoutbox slot drop") {
			t.Errorf("warnings %q, want one starting %q", tr.Warnings, tt.warning)
		}
	}
	tr, _, _ := Read([]byte(`{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "slot.drop.on.stop": "false"}`))
	if len(tr.Warnings) != 0 {
		t.Errorf("false warns: %q", tr.Warnings)
	}
}

// Debezium's converter classes: ByteBufferConverter, which 3.6 no longer
// ships, is written as its successor with one warning naming it; 3.x's
// ByteArrayConverter goes through its delegate (none for headers).
func TestDebeziumConverterNames(t *testing.T) {
	tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "key.converter": "io.debezium.converters.ByteBufferConverter",
  "key.converter.delegate.converter.type": "org.apache.kafka.connect.storage.StringConverter",
  "value.converter": "io.debezium.converters.ByteArrayConverter",
  "value.converter.delegate.converter.type": "org.apache.kafka.connect.json.JsonConverter",
  "value.converter.delegate.converter.type.schemas.enable": "false",
  "header.converter": "io.debezium.converters.ByteArrayConverter",
  "header.converter.delegate.converter.type": "org.apache.kafka.connect.json.JsonConverter"}`)
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"key-converter": "binary:string", "value-converter": "debezium-bytearray:json", "header-converter": "debezium-bytearray"} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
	if len(tr.Warnings) != 1 || !strings.Contains(tr.Warnings[0], "key.converter=io.debezium.converters.ByteBufferConverter") ||
		!strings.Contains(tr.Warnings[0], "io.debezium.converters.BinaryDataConverter") {
		t.Errorf("warnings %q, want one naming the successor", tr.Warnings)
	}
	if s, ok := Successor("io.debezium.converters.ByteBufferConverter"); !ok || s != "io.debezium.converters.BinaryDataConverter" {
		t.Errorf("Successor: %q %v", s, ok)
	}
	if _, err := translateConnect(t, `{"value.converter": "io.debezium.converters.BinaryDataConverter",
  "value.converter.delegate.converter.type": "io.debezium.converters.ByteBufferConverter"}`); err == nil {
		t.Error("a binary delegate accepted")
	}
}

// database.initial.statements passes to --database-initial-statements as
// written: the flag reads Debezium's ';' and ';;' itself.
func TestInitialStatementsSetting(t *testing.T) {
	const stmts = `SET search_path = app; DO $$BEGIN PERFORM 1;; END$$;`
	conf := `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "database.initial.statements": "` + stmts + `"}`
	tr, err := translateConnect(t, conf)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := settingOf(tr, "database-initial-statements"); got != stmts {
		t.Errorf("--database-initial-statements %q, want %q", got, stmts)
	}
}
