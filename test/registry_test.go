package test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/registrytest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A Kafka Connect configuration with Apicurio's AvroConverter for keys and
// values, given to pgoutbox run --config, against a table that already
// holds rows (snapshot.mode initial), with the registry down at first: the
// relay publishes nothing and confirms nothing, and readiness, the
// kafka_problem metric and status name the registry; once the registry is
// back, the rows already there and one written after the start go out in
// Avro after a magic byte and the schema's global id, the schemas
// registered under <topic>-key and <topic>-value, and the problem clears.
func TestDebeziumAvroRegistry(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE public.outbox_avro (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL,
  aggregateid text NOT NULL, type text NOT NULL, payload jsonb, seq bigint GENERATED ALWAYS AS IDENTITY)`)
	payloads := []string{`{"n": 1}`, `{"n": 2}`, `{"n": 3}`}
	for i, p := range payloads[:2] {
		e.Exec(`INSERT INTO public.outbox_avro (aggregatetype, aggregateid, type, payload) VALUES ('Order', 'o-` + strconv.Itoa(i) + `', 'OrderCreated', '` + p + `')`)
	}
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Stop()
	api := reg.URL + "/apis/registry/v2"
	host, port, user, db := testenv.DebeziumDB(t, e)
	conf := map[string]any{"name": "orders", "config": map[string]string{
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "plugin.name": "pgoutput",
		"database.hostname": host, "database.port": port, "database.user": user, "database.dbname": db,
		"topic.prefix": "shop", "table.include.list": "public.outbox_avro", "snapshot.mode": "initial",
		"extended.headers.enabled": "false",
		"transforms":               "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"key.converter": "io.apicurio.registry.utils.converter.AvroConverter", "key.converter.apicurio.registry.url": api,
		"key.converter.apicurio.registry.auto-register": "true", "key.converter.apicurio.registry.headers.enabled": "false",
		"value.converter": "io.apicurio.registry.utils.converter.AvroConverter", "value.converter.apicurio.registry.url": api,
		"value.converter.apicurio.registry.auto-register": "true", "value.converter.apicurio.registry.headers.enabled": "false",
	}}
	data, _ := json.Marshal(conf)
	path := filepath.Join(t.TempDir(), "connector.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	p := e.Run(t, "--config", path, "--metrics-addr", addr)
	const topic = "outbox.event.Order"

	// Down: nothing published, the problem named everywhere.
	testenv.Eventually(t, 30*time.Second, "the pipeline's state", func() bool {
		var n int
		return e.Conn.QueryRow(ctx, "SELECT count(*) FROM pgoutbox_state WHERE pipeline = 'debezium'").Scan(&n) == nil && n == 1
	})
	testenv.Eventually(t, 60*time.Second, "status naming the registry", func() bool {
		st, _ := e.Status(t, "--slot", "debezium")
		return strings.Contains(st.KafkaProblem, "schema registry") && strings.Contains(st.KafkaProblem, reg.URL)
	})
	if m := testenv.Scrape(t, "http://"+addr); m["pgoutbox_kafka_problem"] != 1 {
		t.Errorf("pgoutbox_kafka_problem = %v while the registry is down", m["pgoutbox_kafka_problem"])
	}
	if code := testenv.HTTPStatus("http://" + addr + "/readyz"); code == http.StatusOK {
		t.Error("/readyz is 200 while the registry is down")
	}
	if recs := testenv.Drain(t, e.Brokers, topic, 0); len(recs) != 0 {
		t.Fatalf("%d records published while the registry was down", len(recs))
	}
	var pending bool
	if err := e.Conn.QueryRow(ctx, "SELECT snapshot_pending FROM pgoutbox_state WHERE pipeline = 'debezium'").Scan(&pending); err != nil || !pending {
		t.Fatalf("the snapshot is recorded done while none of it was published (pending %v, %v)", pending, err)
	}

	// Back: everything goes out.
	reg.Restart(t)
	e.AwaitSlotActive(t, "debezium")
	e.Exec(`INSERT INTO public.outbox_avro (aggregatetype, aggregateid, type, payload) VALUES ('Order', 'o-2', 'OrderCreated', '` + payloads[2] + `')`)
	recs := kafkatest.Consume(t, e.Brokers, []string{topic}, 3, 90*time.Second)
	got := map[string]bool{}
	for _, r := range recs {
		for _, part := range []struct {
			name, schema string
			data         []byte
		}{{"key", `"string"`, r.Key}, {"value", `["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}]`, r.Value}} {
			if len(part.data) < 9 || part.data[0] != 0 {
				t.Fatalf("%s %x: no magic byte and id", part.name, part.data)
			}
			id := binary.BigEndian.Uint64(part.data[1:9])
			if s := registryGet(t, api+"/ids/globalIds/"+strconv.FormatUint(id, 10)); s != part.schema {
				t.Errorf("%s schema %d = %s, want %s", part.name, id, s, part.schema)
			}
		}
		// The value: union branch 1, then the string's length and text.
		v := r.Value[9:]
		n, size := binary.Uvarint(v[1:])
		got[string(v[1+size:1+size+int(n/2)])] = true
	}
	for _, p := range payloads {
		if !got[p] {
			t.Errorf("payload %s not published; got %v", p, got)
		}
	}
	if s := registryGet(t, api+"/groups/default/artifacts/"+topic+"-value"); !strings.Contains(s, "io.debezium.data.Json") {
		t.Errorf("subject %s-value: %s", topic, s)
	}
	testenv.Eventually(t, 30*time.Second, "the problem cleared in status", func() bool {
		st, _ := e.Status(t, "--slot", "debezium")
		return st.KafkaKnown && st.KafkaProblem == ""
	})
	p.Stop(t)
}

func registryGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Avro after transforms, as a team keeps it: the connector's change events
// flattened by ExtractNewRecordState (with add.fields), a RegexRouter
// after it and Apicurio's AvroConverter for values, given to run --config
// against a table that already holds a row (snapshot.mode initial): each
// row is published after a magic byte and its schema's global id, the
// row's record registered under the renamed topic, its fields and the
// added __op in it.
func TestDebeziumAvroAfterTransforms(t *testing.T) {
	e := testenv.New(t)
	e.Exec(`CREATE TABLE public.outbox_flat (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL,
  aggregateid text NOT NULL, type text NOT NULL, payload jsonb)`)
	e.Exec(`INSERT INTO public.outbox_flat (aggregatetype, aggregateid, type, payload) VALUES ('Order', 'o-1', 'OrderCreated', '{"n": 1}')`)
	reg := registrytest.Start(t, registrytest.Options{})
	api := reg.URL + "/apis/registry/v2"
	host, port, user, db := testenv.DebeziumDB(t, e)
	conf := map[string]any{"name": "orders", "config": map[string]string{
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "plugin.name": "pgoutput",
		"database.hostname": host, "database.port": port, "database.user": user, "database.dbname": db,
		"topic.prefix": "shop", "table.include.list": "public.outbox_flat", "snapshot.mode": "initial",
		"transforms": "unwrap,rename", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
		"transforms.unwrap.add.fields": "op",
		"transforms.rename.type":       "org.apache.kafka.connect.transforms.RegexRouter",
		"transforms.rename.regex":      `shop\.public\.(.*)`, "transforms.rename.replacement": "rows.$1",
		"key.converter":   "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "io.apicurio.registry.utils.converter.AvroConverter", "value.converter.apicurio.registry.url": api,
		"value.converter.apicurio.registry.auto-register": "true", "value.converter.apicurio.registry.headers.enabled": "false",
	}}
	data, _ := json.Marshal(conf)
	path := filepath.Join(t.TempDir(), "connector.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--config", path)
	e.AwaitSlotActive(t, "debezium")
	e.Exec(`INSERT INTO public.outbox_flat (aggregatetype, aggregateid, type, payload) VALUES ('Order', 'o-2', 'OrderCreated', '{"n": 2}')`)
	const topic = "rows.outbox_flat"
	recs := kafkatest.Consume(t, e.Brokers, []string{topic}, 2, 90*time.Second)
	ops := map[string]bool{}
	for _, r := range recs {
		if !strings.HasPrefix(string(r.Key), "Struct{id=") {
			t.Errorf("key %q, want the Struct text", r.Key)
		}
		if len(r.Value) < 9 || r.Value[0] != 0 {
			t.Fatalf("value %x: no magic byte and id", r.Value)
		}
		id := binary.BigEndian.Uint64(r.Value[1:9])
		s := registryGet(t, api+"/ids/globalIds/"+strconv.FormatUint(id, 10))
		for _, want := range []string{`"name":"Value","namespace":"shop.public.outbox_flat"`, `{"name":"aggregateid","type":"string"}`,
			`{"name":"__op","type":["null","string"],"default":null}`} {
			if !strings.Contains(s, want) {
				t.Errorf("schema %d = %s, want %s in it", id, s, want)
			}
		}
		// The datum ends with __op: its union's branch 1, then "r" or "c".
		v := r.Value[len(r.Value)-3:]
		if v[0] != 2 || v[1] != 2 {
			t.Fatalf("datum ends %x", v)
		}
		ops[string(v[2:])] = true
	}
	if !ops["r"] || !ops["c"] {
		t.Errorf("ops %v, want the snapshot's r and the insert's c", ops)
	}
	p.Stop(t)
}

// Avro is refused at start where pgoutbox does not write it: to NATS
// JetStream (--sink nats-jetstream with an avro value converter), naming
// both settings, and nothing is created in a database that already holds
// the table and its rows.
func TestDebeziumAvroRefusedForNATS(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL,
  aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('Order', 'o-1', 'OrderCreated', '{"n": 1}')`)
	const api = "http://127.0.0.1:1/apis/registry/v2" // never reached
	out, err := refusedAtStart(t, "run", "--database-url", e.URL, "--sink", "nats-jetstream", "--nats-url", "nats://127.0.0.1:1",
		"--format", "debezium-outbox", "--value-converter", "avro", "--value-registry-url", api)
	for _, w := range []string{"--sink nats-jetstream", "--value-converter avro", "written for Kafka only"} {
		if err != nil || !strings.Contains(out, w) {
			t.Errorf("%v, want a message containing %q:\n%s", err, w, out)
		}
	}
	testenv.NothingCreated(t, e, "public.outbox")
	var n int
	if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM public.outbox").Scan(&n); err != nil || n != 1 {
		t.Errorf("the outbox holds %d rows (%v), want its 1", n, err)
	}
}

// refusedAtStart runs the binary, which should stop at once with an
// error; err says how it did not (exit 0, or still running after 30s:
// killed).
func refusedAtStart(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := testenv.Bin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return string(out), errors.New("still running after 30s")
	case err == nil:
		return string(out), errors.New("exit 0")
	case !errors.As(err, &exit):
		t.Fatalf("pgoutbox %s: %v", args[0], err)
	}
	return string(out), nil
}
