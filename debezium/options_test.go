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
	}
	for _, o := range Options() {
		if o.Part != Connector && o.Part != Router || strings.HasSuffix(o.Key, ".") || o.Key == "transforms" {
			continue
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
		{"snapshot.mode", "always"},
		{"slot.drop.on.stop", "true"},
		{"provide.transaction.metadata", "true"},
		{"decimal.handling.mode", "fancy"},
		{"time.precision.mode", "fancy"},
		{"binary.handling.mode", "fancy"},
		{"transforms.outbox.table.fields.additional.placement", ""},
		{"transforms.outbox.table.field.additional.missing", "maybe"},
		{"transforms.outbox.table.op.invalid.behavior", "sometimes"},
		{"transforms.outbox.table.json.payload.null.behavior", "optional_bytes"},
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
