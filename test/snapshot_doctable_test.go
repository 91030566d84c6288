package test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// The topics of Debezium's documented table under docConnector: its rows
// are of two aggregate types.
var docTopics = []string{"outbox.event.Order", "outbox.event.Customer"}

// docConnector writes Debezium's documented Kafka Connect configuration
// of the outbox router for e's database, snapshot.mode unset (Debezium's
// default, initial), and returns its path.
func docConnector(t *testing.T, e *testenv.Env) string {
	t.Helper()
	host, port, user, db := testenv.DebeziumDB(t, e)
	conf := map[string]any{"name": "outbox-connector", "config": map[string]string{
		"connector.class":                "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":                      "1",
		"database.hostname":              host,
		"database.port":                  port,
		"database.user":                  user,
		"database.dbname":                db,
		"topic.prefix":                   "dbserver1",
		"plugin.name":                    "pgoutput",
		"table.include.list":             "public.outboxevent",
		"transforms":                     "outbox",
		"transforms.outbox.type":         "io.debezium.transforms.outbox.EventRouter",
		"key.converter":                  "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "false",
	}}
	data, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.WriteFile(t, "outbox-connector.json", string(data))
}

// docRows inserts n rows into Debezium's documented table, in one
// statement, numbered from..from+n-1 (from > 0) in their payload ({"n": i}), for
// aggregates agg-0..agg-19 of types Order (even) and Customer (odd): an
// aggregate's events in the order of their numbers.
func docRows(t *testing.T, e *testenv.Env, from, n int) []string {
	t.Helper()
	rows, err := e.Conn.Query(context.Background(), `INSERT INTO public.outboxevent (id, aggregatetype, aggregateid, payload)
SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN 'Order' ELSE 'Customer' END, 'agg-' || g % 20, jsonb_build_object('n', g)
FROM generate_series($1::int, $2::int) g ORDER BY g RETURNING id::text`, from, from+n-1)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// docWriter inserts n rows, one per transaction, numbered from on, while
// the relay starts: rows committed before, during and after its snapshot.
func docWriter(t *testing.T, e *testenv.Env, from, n int) <-chan []string {
	t.Helper()
	done := make(chan []string, 1)
	conn := e.Connect()
	go func() {
		var ids []string
		for i := from; i < from+n; i++ {
			var id string
			if err := conn.QueryRow(context.Background(), `INSERT INTO public.outboxevent (id, aggregatetype, aggregateid, payload)
VALUES (gen_random_uuid(), CASE WHEN $1 % 2 = 0 THEN 'Order' ELSE 'Customer' END, 'agg-' || $1 % 20, jsonb_build_object('n', $1::int)) RETURNING id::text`, i).Scan(&id); err != nil {
				t.Error(err)
				break
			}
			ids = append(ids, id)
			time.Sleep(2 * time.Millisecond)
		}
		done <- ids
	}()
	return done
}

// docID is a record's event id: the header id, a plain string under the
// connector's default header converter.
func docID(r *kgo.Record) string {
	h, _ := testenv.HeaderOf(r, "id")
	return h
}

// docNumber is the number in a record's payload: under JsonConverter
// without schemas the value is the jsonb column as a JSON string.
func docNumber(t *testing.T, r *kgo.Record) string {
	t.Helper()
	var text string
	var p struct{ N json.Number }
	if err := json.Unmarshal(r.Value, &text); err != nil || json.Unmarshal([]byte(text), &p) != nil {
		t.Fatalf("record value %s is not the payload as a JSON string", r.Value)
	}
	return p.N.String()
}

// awaitDocIDs reads both topics until every id in want has arrived.
func awaitDocIDs(t *testing.T, brokers []string, want []string, timeout time.Duration) {
	t.Helper()
	left := make(map[string]bool, len(want))
	for _, id := range want {
		left[id] = true
	}
	c := kafkatest.NewConsumer(t, brokers, docTopics...)
	deadline := time.Now().Add(timeout)
	for len(left) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never arrived within %s", len(left), len(want), timeout)
		}
		c.PollRecords(testenv.TimeoutContext(t, time.Second), 10000).EachRecord(func(r *kgo.Record) { delete(left, docID(r)) })
	}
}

// drainDoc is every record of both topics.
func drainDoc(t *testing.T, brokers []string) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for _, topic := range docTopics {
		out = append(out, testenv.Drain(t, brokers, topic, 0)...)
	}
	return out
}

// Debezium's documented outbox table (uuid id, no insertion-order column,
// no timestamp) with rows of several aggregates, and Debezium's documented
// Kafka Connect configuration with its defaults (snapshot.mode unset:
// initial): the binary publishes every row already in the table once, then
// the rows written while it starts and after, each once, every aggregate's
// events in order. The rows were written by one session and never updated
// or deleted, so their physical order is their insertion order; the log
// says, once, that the existing rows go out in physical order and that
// this is no promise of per-aggregate order in general.
func TestSnapshotDebeziumDocumentationTable(t *testing.T) {
	e := testenv.NewBare(t, testenv.DebeziumDocTable)
	const old = 3000
	history := docRows(t, e, 1, old)
	conf := docConnector(t, e)
	testenv.Bin(t) // built before the writer starts
	w := docWriter(t, e, 1+old, 300)
	p := e.Run(t, "--config", conf)
	fresh := <-w
	want := append(append([]string{}, history...), fresh...)
	awaitDocIDs(t, e.Brokers, want, 60*time.Second)
	e.AwaitSlotActive(t, "debezium")
	p.Stop(t)
	recs := drainDoc(t, e.Brokers)
	testenv.CheckOnce(t, recs, want, docID)
	checkAggregateOrder(t, recs, func(r *kgo.Record) string { return docNumber(t, r) })
	out := p.Out.String()
	for _, line := range []string{
		`"snapshot":"initial: the rows already in the tables on the pipeline's first start`,
		`"msg":"the rows already in the table go out first, then what commits after the slot, in commit order","table":"public.outboxevent","order":"physical","per_aggregate":"not promised`,
		`"msg":"published the rows already in the table","table":"public.outboxevent","rows":`,
	} {
		if strings.Count(out, line) != 1 {
			t.Errorf("the log has %d lines with %s, want 1:\n%s", strings.Count(out, line), line, out)
		}
	}
}

// A relay killed with SIGKILL while it publishes the snapshot of
// Debezium's documented table leaves it pending; the next start takes it
// again from a new slot: every row goes out, those of the first attempt
// twice, the rows written while no relay ran and after once.
func TestSnapshotDebeziumDocumentationTableKilled(t *testing.T) {
	rows := testenv.Chaos(100_000, 300_000)
	e := testenv.NewBare(t, testenv.DebeziumDocTable)
	history := docRows(t, e, 1, rows)
	conf := docConnector(t, e)
	p := e.Run(t, "--config", conf, "--batch-size", "50")
	kafkatest.Consume(t, e.Brokers, docTopics, 1, 60*time.Second)
	if err := p.Signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("pgoutbox exited 0 on SIGKILL")
	}
	pending := snapshotPending(t, e, "debezium")
	sent := len(drainDoc(t, e.Brokers))
	if !pending || sent >= rows {
		t.Fatalf("the kill came after the snapshot (pending %v, %d of %d rows sent): the test proves nothing; give it more rows", pending, sent, rows)
	}
	t.Logf("killed after %d of %d rows of the snapshot", sent, rows)
	stopped := docRows(t, e, 1+rows, 20) // while no relay runs
	p = e.Run(t, "--config", conf, "--batch-size", "500")
	after := <-docWriter(t, e, 1+rows+20, 20)
	fresh := append(stopped, after...)
	awaitDocIDs(t, e.Brokers, append(append([]string{}, history...), fresh...), 120*time.Second)
	awaitSnapshotDone(t, e, "debezium")
	p.Stop(t)
	checkTakenAgain(t, p)
	recs := drainDoc(t, e.Brokers)
	seen := map[string]int{}
	for _, r := range recs {
		seen[docID(r)]++
	}
	for _, id := range history {
		if seen[id] == 0 {
			t.Fatalf("row %s of the table's history was never published", id)
		}
	}
	for _, id := range fresh {
		if seen[id] != 1 {
			t.Errorf("row %s written beside the restart published %d times, want once", id, seen[id])
		}
	}
	t.Logf("%d records for %d rows", len(recs), rows+len(fresh))
}

// Exactly-once delivery with Debezium's configuration, whose default is a
// snapshot: the first start, which would take it, stops before it creates
// a slot and says what to do; once a start with at-least-once published
// the snapshot, exactly-once runs, as a pipeline whose snapshot is done
// takes none, and a read_committed consumer gets the new rows once.
func TestSnapshotExactlyOnce(t *testing.T) {
	e := testenv.NewBare(t, testenv.DebeziumDocTable)
	b := kafkatest.Shared(t)
	e.Kafka, e.Apache, e.Brokers = &kafkatest.Cluster{Brokers: b.Brokers}, b, b.Brokers
	history := docRows(t, e, 1, 100)
	conf := docConnector(t, e)
	brokers := strings.Join(e.Brokers, ",")
	out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--kafka-brokers", brokers, "--delivery", "exactly-once")
	if ok || !strings.Contains(out, "exactly-once delivery cannot publish the rows already in the table") || !strings.Contains(out, "--delivery at-least-once") {
		t.Fatalf("exactly-once with a snapshot to take: exit 0 %v, want the refusal:\n%s", ok, out)
	}
	var slots int
	if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots").Scan(&slots); err != nil || slots != 0 {
		t.Fatalf("%d slots after the refusal (%v)", slots, err)
	}
	p := e.Run(t, "--config", conf)
	awaitDocIDs(t, e.Brokers, history, 60*time.Second)
	awaitSnapshotDone(t, e, "debezium")
	p.Stop(t)
	p = e.Run(t, "--config", conf, "--delivery", "exactly-once")
	e.AwaitSlotActive(t, "debezium")
	fresh := docRows(t, e, 101, 20)
	awaitDocIDs(t, e.Brokers, fresh, 60*time.Second)
	p.Stop(t)
	// Read committed until nothing more comes: the transaction markers
	// take offsets no record has, so the ends are not a count.
	c := kafkatest.NewConsumer(t, e.Brokers, docTopics...)
	var recs []*kgo.Record
	for idle := 0; idle < 4; {
		fs := c.PollRecords(testenv.TimeoutContext(t, 500*time.Millisecond), 10000)
		if fs.NumRecords() == 0 {
			idle++
		}
		recs = append(recs, fs.Records()...)
	}
	testenv.CheckOnce(t, recs, append(append([]string{}, history...), fresh...), docID)
}

// Debezium's documented table, migrated (its rows have no seq, and no
// identity column orders them): polling cannot publish its history, as it
// orders and marks rows by that value. In poll mode, and in auto mode on a
// server without logical replication, run stops before it publishes
// anything and says to publish them from the WAL; the snapshot stays to
// be taken, and a start in WAL mode then publishes every row.
func TestSnapshotPollWithoutOrder(t *testing.T) {
	for _, tc := range []struct{ mode, wal string }{{"poll", "logical"}, {"auto", "replica"}} {
		t.Run(tc.mode, func(t *testing.T) {
			e := testenv.NewBare(t, testenv.DebeziumDocTable, pgcluster.Options{WALLevel: tc.wal})
			history := docRows(t, e, 1, 50)
			conf := docConnector(t, e)
			if out, ok := testenv.CLIOutput(t, "migrate", "--config", conf); !ok {
				t.Fatalf("migrate: %s", out)
			}
			out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--kafka-brokers", strings.Join(e.Brokers, ","), "--mode", tc.mode)
			for _, want := range []string{"50 rows of public.outboxevent have no seq", "public.outboxevent has no identity or serial column to poll them in; publish them from the WAL"} {
				if ok || !strings.Contains(out, want) {
					t.Errorf("run --mode %s: exit 0 %v, want it to stop saying %q:\n%s", tc.mode, ok, want, out)
				}
			}
			if n := len(drainDoc(t, e.Brokers)); n != 0 {
				t.Errorf("%d records published before the stop", n)
			}
			if tc.wal != "logical" {
				return
			}
			p := e.Run(t, "--config", conf, "--mode", "wal")
			awaitDocIDs(t, e.Brokers, history, 30*time.Second)
			p.Stop(t)
			testenv.CheckOnce(t, drainDoc(t, e.Brokers), history, docID)
		})
	}
}

// A partitioned outbox by month, no insertion order, rows in three
// partitions, each batch written in one transaction, later times first
// (this month's partition holds rows of now, then rows of the month's
// start, which lie after them): the first start with initial publishes
// every row once, by created_at (the time the CloudEvents read), so each
// aggregate's events go out in the order of their times, and the start
// says so.
func TestSnapshotPartitionedByTime(t *testing.T) {
	e := testenv.PartitionedOutbox(t, 0)
	var ids []string
	for _, at := range []string{testenv.FarFuture, testenv.ThisMonth, "date_trunc('month', now())", testenv.LastMonth} {
		ids = append(ids, testenv.InsertInto(t, e, "outbox", "history", at, 30)...)
	}
	p := e.Run(t, "--mode", "wal", "--snapshot-mode", "initial", "--batch-size", "7")
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.history", ids, 30*time.Second)
	p.Stop(t)
	recs := testenv.Drain(t, e.Brokers, "outbox.event.history", 0)
	testenv.CheckOnce(t, recs, ids, testenv.EventID(t))
	// Per aggregate: the time first, then the order of insertion (n).
	when := map[string]int{}
	for i, id := range ids {
		when[id] = 3 - i/30
	}
	last := map[string][2]int{}
	for _, r := range recs {
		ev := testenv.DecodeEvent(t, r)
		var d struct{ N int }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		at := [2]int{when[ev.ID], d.N}
		if prev, ok := last[string(r.Key)]; ok && (at[0] < prev[0] || at[0] == prev[0] && at[1] <= prev[1]) {
			t.Errorf("aggregate %s: event %v after %v", r.Key, at, prev)
		}
		last[string(r.Key)] = at
	}
	if !strings.Contains(p.Out.String(), `"order":"created_at, then physical","per_aggregate":"the order of their created_at values`) {
		t.Errorf("the start does not say the rows go out by created_at:\n%s", p.Out)
	}
}
