package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// customersDDL is Debezium's tutorial table of customers, with a version
// the writer counts up, and rows the team already has.
const customersDDL = `CREATE TABLE public.customers (
  id integer NOT NULL PRIMARY KEY,
  first_name varchar(255) NOT NULL,
  last_name varchar(255) NOT NULL,
  email varchar(255) NOT NULL,
  version integer NOT NULL DEFAULT 0);
INSERT INTO public.customers (id, first_name, last_name, email)
  SELECT i, 'first' || i, 'last' || i, 'c' || i || '@example.com' FROM generate_series(1, 100) i`

// customersConfig is a Kafka Connect configuration of the table as
// teams keep one: no router, JsonConverter without schemas.
func customersConfig(t *testing.T, e *testenv.Env) string {
	t.Helper()
	host, port, user, db := testenv.DebeziumDB(t, e)
	return writeConnector(t, map[string]string{
		"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname": host, "database.port": port, "database.user": user, "database.dbname": db,
		"topic.prefix": "shop", "plugin.name": "pgoutput",
		"table.include.list":             "public.customers",
		"key.converter":                  "org.apache.kafka.connect.json.JsonConverter",
		"key.converter.schemas.enable":   "false",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "false",
	})
}

// customerEvent is one change of a customer as the test reads it: the op
// and the version after it ("r:0", "c:0", "u:3", "d:3"), or "tombstone".
func customerEvent(t *testing.T, value []byte) string {
	t.Helper()
	if value == nil {
		return "tombstone"
	}
	var v struct {
		Op            string
		Before, After *struct{ Version int }
	}
	if err := json.Unmarshal(value, &v); err != nil {
		t.Fatalf("change event %s: %v", value, err)
	}
	row := v.After
	if v.Op == "d" {
		row = v.Before
	}
	if row == nil {
		t.Fatalf("change event without its row: %s", value)
	}
	return fmt.Sprintf("%s:%d", v.Op, row.Version)
}

// A Debezium configuration of an ordinary table, whose rows are already
// there, run through the binary: the snapshot reads them (op r), then
// inserts, updates and deletes stream while pgoutbox is killed (SIGKILL)
// twice and started again. Every committed change of every customer
// arrives, in its commit order (copies sent again after a kill aside),
// nothing arrives that was not committed, each delete is followed by its
// tombstone, and the last record of each key is the table's final state. The delete's before, under the
// default replica identity, holds the key and the NOT NULL columns'
// fallbacks (version 0).
//
// Under exactly-once delivery, on Apache Kafka, a read_committed consumer
// reads each change once: no copy. (Exactly-once takes no snapshot: the
// rows already there are not read.)
func TestChangeEventsThroughKills(t *testing.T) {
	t.Run("at-least-once", func(t *testing.T) {
		copies := changeEventsThroughKills(t, testenv.NewBare(t, customersDDL), true)
		t.Logf("%d copies sent again after a kill", copies)
	})
	t.Run("exactly-once", func(t *testing.T) {
		e := testenv.NewKafka(t)
		e.Exec(customersDDL)
		if copies := changeEventsThroughKills(t, e, false, append([]string{"--snapshot-mode", "no_data"}, eosArgs...)...); copies != 0 {
			t.Errorf("%d copies under exactly-once, want none", copies)
		}
	})
}

// changeEventsThroughKills is TestChangeEventsThroughKills on e, whose
// database holds customersDDL's table, with pgoutbox's extra flags, its
// snapshot taken or not: the number of copies read.
func changeEventsThroughKills(t *testing.T, e *testenv.Env, snapshot bool, extra ...string) int {
	conf := customersConfig(t, e)
	args := append([]string{"--config", conf}, extra...)
	const topic = "shop.public.customers"
	ctx := context.Background()

	// committed is each customer's changes in commit order.
	committed := map[int][]string{}
	if snapshot {
		for id := 1; id <= 100; id++ {
			committed[id] = []string{"r:0"}
		}
	}
	p := e.Run(t, args...)
	if extra == nil {
		// Auto mode, the default, streams change events only: polling
		// reads no update nor delete.
		e.AwaitSlotActive(t, "debezium")
		if !strings.Contains(p.Out.String(), `"msg":"change events: streaming the WAL only (--mode wal)`) || !strings.Contains(p.Out.String(), `"mode":"wal"`) {
			t.Errorf("auto mode did not say it streams change events only:\n%s", p.Out.String())
		}
	}
	cl := kafkatest.NewConsumer(t, e.Brokers, topic)
	got := map[int][]string{}
	read := func(want func() bool, what string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !want() {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not arrive within 90s; pgoutbox:\n%s", what, p.Out.String())
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fetches := cl.PollFetches(pctx)
			cancel()
			for _, r := range fetches.Records() {
				var key struct{ ID int }
				if err := json.Unmarshal(r.Key, &key); err != nil || key.ID == 0 {
					t.Fatalf("key %s: %v", r.Key, err)
				}
				got[key.ID] = append(got[key.ID], customerEvent(t, r.Value))
			}
		}
	}
	if snapshot {
		read(func() bool { return len(got) == 100 }, "the snapshot of 100 customers")
	} else {
		e.AwaitSlotActive(t, "debezium")
	}

	rng := rand.New(rand.NewPCG(7, 11))
	version := map[int]int{}
	exists := map[int]bool{}
	for id := 1; id <= 100; id++ {
		exists[id] = true
	}
	const changes = 1500
	for i := 0; i < changes; i++ {
		if i == changes/3 || i == 2*changes/3 {
			p.Signal(t, syscall.SIGKILL)
			p = e.Run(t, args...)
		}
		id := 1 + rng.IntN(150)
		var sql string
		switch {
		case !exists[id]:
			sql = fmt.Sprintf("INSERT INTO public.customers (id, first_name, last_name, email) VALUES (%d, 'f', 'l', 'c%d@example.com')", id, id)
			exists[id], version[id] = true, 0
			committed[id] = append(committed[id], "c:0")
		case rng.IntN(10) == 0:
			sql = fmt.Sprintf("DELETE FROM public.customers WHERE id = %d", id)
			exists[id] = false
			// The default identity sends the key alone: the before's
			// version is the NOT NULL column's default.
			committed[id] = append(committed[id], "d:0", "tombstone")
		default:
			version[id]++
			sql = fmt.Sprintf("UPDATE public.customers SET version = %d, email = 'v%d-%d@example.com' WHERE id = %d", version[id], version[id], id, id)
			committed[id] = append(committed[id], fmt.Sprintf("u:%d", version[id]))
		}
		if _, err := e.Conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	final := func() bool {
		for id, want := range committed {
			g := got[id]
			if len(g) == 0 || g[len(g)-1] != want[len(want)-1] || len(g) < len(want) {
				return false
			}
		}
		return true
	}
	read(final, "every customer's last change")
	time.Sleep(time.Second) // a late copy would show
	read(func() bool { return true }, "")

	copies := 0
	for id, want := range committed {
		g := got[id]
		if !isSubsequence(want, g) {
			t.Errorf("customer %d: committed %v, read %v: a change lost or out of order", id, want, g)
			continue
		}
		for _, ev := range g {
			if !slices.Contains(want, ev) {
				t.Errorf("customer %d: read %q, which was never committed (%v)", id, ev, want)
			}
		}
		copies += len(g) - len(want)
	}
	t.Logf("%d changes of %d customers read", changes, len(committed))
	if !strings.Contains(p.Out.String(), `"msg":"streaming"`) {
		t.Errorf("the last run did not stream:\n%s", p.Out.String())
	}
	return copies
}

// isSubsequence tells whether want's items appear in got in order.
func isSubsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// A Debezium configuration without a table list, as Debezium's tutorial
// keeps one, run through the binary: the publication pgoutbox creates
// (slot create's as run's) publishes all tables, as Debezium's default
// publication.autocreate.mode creates it, so a table created while
// pgoutbox runs (in the transaction of its first row) is captured from
// that row, keyed by its own primary key, and one created while pgoutbox
// is stopped is captured at the next start from its first row too; one
// dropped before its row is read neither stops the stream nor loses the
// row. Where a table of the database has no replica identity, whose UPDATE
// and DELETE PostgreSQL would refuse under a publication of all tables,
// the publication names the matched tables and a warning says why; a role
// that may not create a publication of all tables is told what to run, or
// to ask for the tables of today.
func TestChangeEventsTablesCreatedLater(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE public.customers (id integer PRIMARY KEY, name text NOT NULL); INSERT INTO public.customers VALUES (1, 'Kim');
CREATE TYPE public.mood AS ENUM ('ok', 'meh'); CREATE TABLE public.moods (id integer PRIMARY KEY, m public.mood, tags text[])`)
	host, port, user, db := testenv.DebeziumDB(t, e)
	connector := func(slot string) string {
		return writeConnector(t, map[string]string{
			"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
			"database.hostname": host, "database.port": port, "database.user": user, "database.dbname": db,
			"topic.prefix": "shop", "plugin.name": "pgoutput", "slot.name": slot, "publication.name": slot,
			"snapshot.mode":                  "no_data",
			"key.converter":                  "org.apache.kafka.connect.json.JsonConverter",
			"key.converter.schemas.enable":   "false",
			"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
			"value.converter.schemas.enable": "false",
		})
	}
	allTables := func(pub string) bool {
		t.Helper()
		var all bool
		if err := e.Conn.QueryRow(ctx, "SELECT puballtables FROM pg_publication WHERE pubname = $1", pub).Scan(&all); err != nil {
			t.Fatalf("publication %s: %v", pub, err)
		}
		return all
	}
	// says waits up to ten seconds for p's output to hold text: the test
	// reads the output as the process writes it, a moment behind.
	says := func(p *testenv.Proc, text string) bool {
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(p.Out.String(), text) {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(50 * time.Millisecond)
		}
		return true
	}
	// keys reads n records of topic and their keys and ops.
	keys := func(topic string, n int) []string {
		t.Helper()
		var out []string
		for _, r := range kafkatest.Consume(t, e.Brokers, []string{topic}, n, 30*time.Second) {
			var v struct{ Op string }
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("%s: %s: %v", topic, r.Value, err)
			}
			out = append(out, string(r.Key)+" "+v.Op)
		}
		return out
	}
	conf := connector("later")
	// slot create makes the publication run would.
	if out, err := testenv.RunToExit(t, "slot", "create", "--config", conf); err != nil || !allTables("later") {
		t.Fatalf("slot create for no table list: %v, publication of all tables %v:\n%s", err, err == nil && allTables("later"), out)
	}
	p := testenv.StartBinary(t, "run", "--config", conf, "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
	e.AwaitSlotActive(t, "later")
	// Columns of types pgoutbox does not map yet are named, not dropped
	// silently.
	if !says(p, `public.moods: m (mood), tags (text[])`) {
		t.Errorf("the enum and array columns left out are not named:\n%s", p.Out.String())
	}
	e.Exec(`BEGIN; CREATE TABLE public.refunds (refund_no integer PRIMARY KEY, amount numeric(10,2) NOT NULL);
INSERT INTO public.refunds VALUES (501, 9.99); COMMIT`)
	e.Exec(`UPDATE public.refunds SET amount = 10 WHERE refund_no = 501`)
	if got := keys("shop.public.refunds", 2); !slices.Equal(got, []string{`{"refund_no":501} c`, `{"refund_no":501} u`}) {
		t.Errorf("a table created while pgoutbox runs: %v, want its insert and update keyed by its primary key", got)
	}
	if !says(p, `"msg":"capturing a table created since start"`) {
		t.Errorf("the capture of public.refunds is not logged:\n%s", p.Out.String())
	}
	// A staging table created, filled and dropped in one transaction is
	// gone from the catalog when its row is read: keyed by the replica
	// identity the stream gives, and the stream goes on.
	e.Exec(`BEGIN; CREATE TABLE public.staging (batch integer PRIMARY KEY, n integer NOT NULL); INSERT INTO public.staging VALUES (1, 10);
DROP TABLE public.staging; COMMIT`)
	e.Exec(`INSERT INTO public.refunds VALUES (502, 1)`)
	if got := keys("shop.public.staging", 1); !slices.Equal(got, []string{`{"batch":1} c`}) {
		t.Errorf("a table dropped before its row was read: %v", got)
	}
	if got := keys("shop.public.refunds", 3); len(got) != 3 || got[2] != `{"refund_no":502} c` {
		t.Errorf("after the dropped table: %v, want the next insert of public.refunds", got)
	}
	p.Signal(t, syscall.SIGTERM)
	e.Exec(`CREATE TABLE public.credits (credit_id integer PRIMARY KEY); INSERT INTO public.credits VALUES (7), (8)`)
	p = testenv.StartBinary(t, "run", "--config", conf, "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
	e.AwaitSlotActive(t, "later")
	if got := keys("shop.public.credits", 2); !slices.Equal(got, []string{`{"credit_id":7} c`, `{"credit_id":8} c`}) {
		t.Errorf("a table created while pgoutbox was stopped: %v, want both its rows", got)
	}
	p.Signal(t, syscall.SIGTERM)

	// A table without a replica identity: a publication of all tables
	// would make PostgreSQL refuse its UPDATE and DELETE (as the one just
	// created does for a table created from now on).
	e.Exec(`SELECT pg_drop_replication_slot('later'); DROP PUBLICATION later`)
	e.Exec(`CREATE TABLE public.log_lines (line text)`)
	p = testenv.StartBinary(t, "run", "--config", connector("named"), "--kafka-brokers", strings.Join(e.Brokers, ","), "--log-format", "json")
	e.AwaitSlotActive(t, "named")
	if allTables("named") || !says(p, "publication named publishes the pipeline's tables, not all tables: public.log_lines has no replica identity") {
		t.Errorf("with public.log_lines without a replica identity: want the matched tables published and a warning:\n%s", p.Out.String())
	}
	e.Exec(`UPDATE public.log_lines SET line = 'still updatable'`)
	p.Signal(t, syscall.SIGTERM)
	e.Exec(`DROP TABLE public.log_lines`)

	// A role that may not create a publication of all tables.
	role := fmt.Sprintf("later_app_%d", rand.IntN(1<<30))
	e.Exec(fmt.Sprintf(`CREATE ROLE %[1]s LOGIN REPLICATION; GRANT CREATE ON DATABASE %[2]s TO %[1]s; ALTER TABLE public.customers OWNER TO %[1]s;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO %[1]s; GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO %[1]s; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO %[1]s;
`, role, `"`+db+`"`) + testenv.GrantHeartbeatSQL(role))
	args := []string{"run", "--database-url", e.AppURL(role), "--kafka-brokers", strings.Join(e.Brokers, ","), "--format", "debezium",
		"--table-include-list", `public\.customers`, "--slot", "app", "--publication", "app", "--snapshot-mode", "no_data", "--mode", "wal"}
	out, err := testenv.RunToExit(t, args...)
	if err == nil || !strings.Contains(out, "CREATE PUBLICATION app FOR ALL TABLES") || !strings.Contains(out, "--publication-all-tables=false") {
		t.Errorf("a role that may not create a publication of all tables: %v\n%s", err, out)
	}
	p = testenv.StartBinary(t, append(args, "--publication-all-tables=false", "--log-format", "json")...)
	e.AwaitSlotActive(t, "app")
	if allTables("app") {
		t.Errorf("--publication-all-tables=false created a publication of all tables")
	}
	p.Signal(t, syscall.SIGTERM)
}
