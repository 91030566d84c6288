package test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Debezium's documented table with a Debezium Server configuration: one
// file serves migrate, slot create, status, dlq and run; no type column is
// needed; a NULL payload and a NULL aggregate id pass as Debezium passes
// them. The same table under CloudEvents, which needs a type, and a
// timestamp column of the wrong type, are refused by run, migrate and
// slot create before anything is created.
func TestDebeziumDocumentationTable(t *testing.T) {
	e := testenv.NewBare(t, testenv.DebeziumDocTable)
	base := testenv.DebeziumServerKafka(t, e) + `debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outboxevent
debezium.source.snapshot.mode=no_data
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.key=simplestring
debezium.format.value.schemas.enable=false
`
	// Mappings that cannot work: each command says why, and creates nothing.
	ceConf := testenv.WriteFile(t, "ce.conf", "database-url = "+e.URL+"\nkafka-brokers = "+strings.Join(e.Brokers, ",")+"\ntable = public.outboxevent\nformat = cloudevents\n")
	badTS := testenv.WriteFile(t, "bad-ts.properties", base+"debezium.transforms.outbox.table.field.event.timestamp=payload\n")
	for _, tc := range []struct{ conf, want string }{
		{ceConf, "--column-type: a CloudEvent needs a type"},
		{badTS, "payload: the Kafka timestamp column (table.field.event.timestamp) must be a timestamp"},
	} {
		for _, cmd := range [][]string{{"migrate"}, {"slot", "create"}, {"run"}} {
			out, ok := testenv.CLIOutput(t, append(cmd, "--config", tc.conf)...)
			if ok || !strings.Contains(out, tc.want) || strings.Count(out, "\npgoutbox: the outbox table") != 1 {
				t.Errorf("%v --config %s: exit 0 %v, want one message containing %q:\n%s", cmd, filepath.Base(tc.conf), ok, tc.want, out)
			}
		}
		testenv.NothingCreated(t, e, "public.outboxevent")
	}

	// The configuration Debezium runs with serves every command.
	good := testenv.WriteFile(t, "application.properties", base)
	for _, cmd := range [][]string{{"migrate"}, {"slot", "create"}, {"status"}, {"dlq", "list"}} {
		if out, ok := testenv.CLIOutput(t, append(cmd, "--config", good)...); !ok {
			t.Fatalf("%v --config application.properties failed:\n%s", cmd, out)
		}
	}
	p := e.Run(t, "--config", good)
	e.AwaitSlotActive(t, "debezium")
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outboxevent VALUES
  ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '1', '{"id": 1, "customerId": 123}'),
  ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '1', NULL),
  ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', NULL, '{"id": 3}')`); err != nil {
		t.Fatal(err)
	}
	recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.Order"}, 3, 30*time.Second)
	// As Debezium 3.6.1 wrote the same rows (schema/testdata/debezium/
	// observed.golden): a NULL payload under JsonConverter is the JSON
	// null, not a tombstone; a NULL key is a null key under StringConverter.
	// The null key's record may be on another partition: matched by id.
	want := map[string]struct {
		key   []byte
		value string
	}{
		"406c07f3-26f0-4eea-a50c-109940064b8f": {[]byte("1"), `"{\"id\": 1, \"customerId\": 123}"`},
		"506c07f3-26f0-4eea-a50c-109940064b8f": {[]byte("1"), "null"},
		"606c07f3-26f0-4eea-a50c-109940064b8f": {nil, `"{\"id\": 3}"`},
	}
	for _, r := range recs {
		h, _ := testenv.HeaderOf(r, "id")
		id := strings.TrimSuffix(strings.TrimPrefix(h, `{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"`), `"}`)
		w, ok := want[id]
		if !ok || !bytes.Equal(r.Key, w.key) || (r.Key == nil) != (w.key == nil) || string(r.Value) != w.value {
			t.Errorf("record id header %s: key %q value %s; want %q %s", h, r.Key, r.Value, w.key, w.value)
		}
		delete(want, id)
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("run: %v\n%s", err, p.Out)
	}
}

// Debezium's own publication carries every operation. An UPDATE of the
// outbox under table.op.invalid.behavior=fatal stops the relay at it, as
// Debezium's router stops, after what was written before it is published;
// under warn it is logged and skipped.
func TestUpdateUnderFatal(t *testing.T) {
	e := testenv.NewBare(t, testenv.DebeziumDocTable+"; CREATE PUBLICATION dbz_publication FOR TABLE public.outboxevent")
	ctx := context.Background()
	args := []string{"--table", "public.outboxevent", "--format", "debezium-outbox", "--mode", "wal",
		"--slot", "dbz", "--publication", "dbz_publication"}
	p := e.Run(t, append(args, "--on-update", "fatal")...)
	e.AwaitSlotActive(t, "dbz")
	// One transaction: the insert is still in the stream's hand when the
	// update comes.
	if _, err := e.Conn.Exec(ctx, `BEGIN;
INSERT INTO public.outboxevent VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '1', '{}');
UPDATE public.outboxevent SET payload = '{"changed": true}';
COMMIT`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
		out := p.Out.String()
		if err := p.Err(); err == nil || !strings.Contains(out, "an UPDATE of the outbox table public.outboxevent at") || !strings.Contains(out, "table.op.invalid.behavior=fatal") {
			t.Fatalf("run ended with %v:\n%s", err, out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not stop at the update:\n%s", p.Out)
	}
	// What it read before the update was published before it stopped,
	// as Debezium publishes it before its task fails.
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.Order"}, 1, 10*time.Second)
	p = e.Run(t, append(args, "--on-update", "warn")...)
	e.AwaitSlotActive(t, "dbz")
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.Order"}, 1, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "the update's warning", func() bool {
		return strings.Contains(p.Out.String(), `"msg":"an UPDATE of the outbox table was ignored"`)
	})
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// Debezium's default publication is FOR ALL TABLES
// (publication.autocreate.mode=all_tables): it publishes the updates of
// pgoutbox's own tables too, and PostgreSQL refuses an update of a
// published table without a replica identity. pgoutbox taking over
// Debezium's configuration creates its tables and relays there, and a
// database migrated by an older pgoutbox, whose version table had no
// primary key, migrates further.
func TestDebeziumAllTablesPublication(t *testing.T) {
	e := testenv.NewBare(t, testenv.DebeziumDocTable+"; CREATE PUBLICATION dbz_publication FOR ALL TABLES")
	conf := testenv.WriteFile(t, "application.properties", testenv.DebeziumServerKafka(t, e)+`debezium.source.topic.prefix=dbserver1
debezium.source.table.include.list=public.outboxevent
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`)
	p := e.Run(t, "--config", conf)
	e.AwaitSlotActive(t, "debezium")
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outboxevent VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', '1', '{}')`); err != nil {
		t.Fatal(err)
	}
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.Order"}, 1, 30*time.Second)
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("run: %v\n%s", err, p.Out)
	}
	// As an older pgoutbox left it: version 14, no primary key.
	if _, err := e.Conn.Exec(ctx, `ALTER TABLE pgoutbox_schema_version DROP CONSTRAINT pgoutbox_schema_version_pkey;
TRUNCATE pgoutbox_schema_version; INSERT INTO pgoutbox_schema_version VALUES (14)`); err != nil {
		t.Fatal(err)
	}
	if out, ok := testenv.CLIOutput(t, "migrate", "--config", conf); !ok {
		t.Fatalf("migrate after an older pgoutbox:\n%s", out)
	}
}
