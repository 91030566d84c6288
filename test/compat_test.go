package test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
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

// One file of pgoutbox's own settings, run's included, serves migrate,
// slot create, status, dlq and run; a setting no command has is still
// refused.
func TestOneConfigEveryCommand(t *testing.T) {
	e := testenv.NewBare(t, "")
	conf := testenv.WriteFile(t, "pgoutbox.conf", `# run's settings, and every command's
database-url = `+e.URL+`
kafka-brokers = `+strings.Join(e.Brokers, ",")+`
table = public.outbox
slot = one_file
publication = one_file
format = debezium-outbox
key-converter = string
mode = wal
status-interval = 100ms
heartbeat-interval = 200ms
log-format = json
`)
	for _, cmd := range [][]string{{"migrate"}, {"slot", "create"}, {"status"}, {"dlq", "list"}} {
		if out, ok := testenv.CLIOutput(t, append(cmd, "--config", conf)...); !ok {
			t.Fatalf("%v --config failed:\n%s", cmd, out)
		}
	}
	p := testenv.StartBinary(t, "run", "--config", conf)
	e.AwaitSlotActive(t, "one_file")
	if _, err := e.Conn.Exec(context.Background(), `INSERT INTO public.outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-1', 'Created', '{"a": 1}')`); err != nil {
		t.Fatal(err)
	}
	if r := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 1, 30*time.Second)[0]; string(r.Key) != "o-1" || string(r.Value) != `"{\"a\": 1}"` {
		t.Errorf("record key %q value %s", r.Key, r.Value)
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("run: %v\n%s", err, p.Out)
	}
	typo := testenv.WriteFile(t, "typo.conf", "database-url = "+e.URL+"\nkafka-broker = x:1\n")
	if out, ok := testenv.CLIOutput(t, "migrate", "--config", typo); ok || !strings.Contains(out, `unknown setting "kafka-broker"`) {
		t.Errorf("a setting no command has: exit 0 %v\n%s", ok, out)
	}
}

// A team's own poller marked its rows by status, and the rows it had not
// published yet were written before migrate added seq: polling by seq
// cannot order them. The relay says so, with how many, and what to run,
// and stops (it used to retry `strconv.ParseInt: parsing ""` forever while
// new events waited). The UPDATE it prints numbers them before every
// other row, in the table's insertion order, and the relay then publishes
// them first.
func TestPollRowsWithoutOrder(t *testing.T) {
	e := testenv.ExistingLedger(t, 50)
	ctx := context.Background()
	if out, err := testenv.Migrate(t, e, "public.outbox_event"); err != nil {
		t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
	}
	if _, err := e.Conn.Exec(ctx, `INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload) VALUES ('TRANSACTION', 7, 'LEDGER_POSTED', '{"new": true}')`); err != nil {
		t.Fatal(err)
	}
	status := []string{"--column-status", "status", "--status-pending", "PENDING", "--status-published", "PUBLISHED"}
	args := append(append([]string{"run", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","),
		"--mode", "poll", "--poll-interval", "50ms", "--log-format", "json"}, testenv.LedgerFlags...), status...)
	out, ok := testenv.CLIOutput(t, args...)
	const want = `poll: 5 rows of public.outbox_event that polling must publish have no seq ("seq" IS NULL AND ("status" = 'PENDING'))`
	if ok || !strings.Contains(out, want) || !strings.Contains(out, "--column-order id") {
		t.Fatalf("run: exit 0 %v; want it to stop with %q and --column-order id:\n%s", ok, want, out)
	}
	update := out[strings.Index(out, "UPDATE "):]
	update = strings.TrimSpace(strings.SplitN(update, "\n", 2)[0])
	update = strings.TrimSuffix(strings.TrimSuffix(update, `"}`), `"`)
	if _, err := e.Conn.Exec(ctx, strings.ReplaceAll(update, `\"`, `"`)); err != nil {
		t.Fatalf("the UPDATE it printed: %v\n%s", err, update)
	}
	p := testenv.StartBinary(t, args...)
	recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.TRANSACTION"}, 6, 30*time.Second)
	var ids []string
	for _, r := range recs {
		ids = append(ids, testenv.DecodeEvent(t, r).ID)
	}
	slices.Sort(ids)
	// Rows 10, 20, ... 50 were pending; 51 was written after migrate.
	if got := strings.Join(ids, ","); got != "10,20,30,40,50,51" {
		t.Errorf("published %s, want the pending rows and the new one", got)
	}
	var order string
	if err := e.Conn.QueryRow(ctx, "SELECT string_agg(id::text, ',' ORDER BY seq) FROM outbox_event WHERE seq IS NOT NULL").Scan(&order); err != nil {
		t.Fatal(err)
	}
	if order != "10,20,30,40,50,51" {
		t.Errorf("rows by seq: %s, want the pending rows in insertion order before the new one", order)
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// A table and columns named as EF Core and MassTransit name them, in a
// schema with a dash: migrate, slot create, run in WAL and in poll mode,
// and status, with names written as in SQL.
func TestQuotedNames(t *testing.T) {
	e := testenv.NewBare(t, `CREATE SCHEMA "my-app";
CREATE TABLE "my-app"."OutboxMessage" (
  "SequenceNumber" bigserial PRIMARY KEY,
  "MessageId" uuid NOT NULL DEFAULT gen_random_uuid(),
  "AggregateType" text NOT NULL,
  "AggregateId" text NOT NULL,
  "MessageType" text NOT NULL,
  "Body" jsonb NOT NULL,
  "SentTime" timestamptz NOT NULL DEFAULT now())`)
	ctx := context.Background()
	conf := testenv.WriteFile(t, "pgoutbox.conf", `database-url = `+e.URL+`
kafka-brokers = `+strings.Join(e.Brokers, ",")+`
table = "my-app"."OutboxMessage"
slot = ef_outbox
publication = ef_outbox
column-id = MessageId
column-aggregate-type = AggregateType
column-aggregate-id = AggregateId
column-type = MessageType
column-payload = Body
column-time = SentTime
poll-interval = 50ms
status-interval = 100ms
heartbeat-interval = 200ms
log-format = json
`)
	for _, cmd := range [][]string{{"migrate"}, {"slot", "create"}} {
		if out, ok := testenv.CLIOutput(t, append(cmd, "--config", conf)...); !ok {
			t.Fatalf("%v: %s", cmd, out)
		}
	}
	insert := func(agg string) string {
		var id string
		if err := e.Conn.QueryRow(ctx, `INSERT INTO "my-app"."OutboxMessage" ("AggregateType", "AggregateId", "MessageType", "Body")
VALUES ('Order', $1, 'OrderSubmitted', '{"n": 1}') RETURNING "MessageId"::text`, agg).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	n := 0
	for _, mode := range []string{"wal", "poll"} {
		p := testenv.StartBinary(t, "run", "--config", conf, "--mode", mode)
		if mode == "wal" {
			e.AwaitSlotActive(t, "ef_outbox")
		}
		id := insert("o-" + mode)
		n++
		found := false
		for _, r := range kafkatest.Consume(t, e.Brokers, []string{"outbox.event.Order"}, n, 30*time.Second) {
			ev := testenv.DecodeEvent(t, r)
			found = found || ev.ID == id && ev.Source == "/pgoutbox/my-app.OutboxMessage" && ev.PartitionKey == "o-"+mode
		}
		if !found {
			t.Errorf("%s: event %s not published", mode, id)
		}
		// Polling publishes again what the WAL published since its last
		// floor: the next mode may find one more.
		n = len(testenv.Drain(t, e.Brokers, "outbox.event.Order", 0))
		if err := p.Signal(t, syscall.SIGTERM); err != nil {
			t.Fatalf("run --mode %s: %v\n%s", mode, err, p.Out)
		}
	}
	out, ok := testenv.CLIOutput(t, "status", "--config", conf)
	if !ok || !strings.Contains(out, "pipeline     ef_outbox (my-app.OutboxMessage)") || strings.Contains(out, "problem:") {
		t.Errorf("status (exit 0 %v):\n%s", ok, out)
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

// Two pgoutbox processes starting at once on a fresh database (two
// pipelines, or a relay and its standby) both create pgoutbox's tables and
// the outbox table: the one that loses the race goes on with what the
// other created instead of failing with "already exists" or a duplicate
// key of pg_type.
func TestMigrateConcurrently(t *testing.T) {
	e := testenv.NewBare(t, "")
	ctx := context.Background()
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		db := fmt.Sprintf("race%d", i)
		if _, err := e.Conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + db
		var wg sync.WaitGroup
		outs := make([]string, 2)
		oks := make([]bool, 2)
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[j], oks[j] = testenv.CLIOutput(t, "migrate", "--database-url", u.String())
			}()
		}
		wg.Wait()
		for j := range 2 {
			if !oks[j] {
				t.Errorf("round %d: a concurrent migrate failed:%s", i, outs[j])
			}
		}
	}
}
