package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// ledgerIDs are the ids of every row of the ledger's table.
func ledgerIDs(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT id::text FROM outbox_event ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkAggregateOrder fails when an aggregate's events are not in the
// order of their ids (the ledger's insertion order) in its partition.
func checkAggregateOrder(t *testing.T, recs []*kgo.Record, id func(*kgo.Record) string) {
	t.Helper()
	last := map[string]int64{}
	for _, r := range recs {
		n := testenv.MustInt(t, id(r))
		k := fmt.Sprintf("%d/%s", r.Partition, r.Key)
		if n <= last[k] {
			t.Errorf("aggregate %s: event %d after %d", r.Key, n, last[k])
			return
		}
		last[k] = n
	}
}

// --snapshot-mode initial on the first start in WAL mode publishes every
// row already in an existing table, once, then every row committed after,
// while an application keeps writing across the boundary: none missing,
// none twice, and each aggregate's history before its new events. The
// default (no_data) publishes none of the old rows.
func TestSnapshotInitialWAL(t *testing.T) {
	const old = 3000
	for _, mode := range []string{"initial", "no_data"} {
		t.Run(mode, func(t *testing.T) {
			e := testenv.ExistingLedger(t, old)
			history := ledgerIDs(t, e.Conn)
			args := append([]string{"--mode", "wal", "--batch-size", "200"}, testenv.LedgerFlags...)
			if mode == "initial" {
				args = append(args, "--snapshot-mode", "initial")
			}
			p := e.Run(t, args...)
			e.AwaitSlotActive(t, "pgoutbox")
			fresh := <-testenv.WriteLedger(t, e, 200)
			want := fresh
			if mode == "initial" {
				want = append(append([]string{}, history...), fresh...)
			}
			topic := "outbox.event.TRANSACTION"
			testenv.AwaitIDs(t, e.Brokers, topic, want, 60*time.Second)
			p.Stop(t)
			recs := testenv.Drain(t, e.Brokers, topic, 0)
			testenv.CheckOnce(t, recs, want, testenv.EventID(t))
			checkAggregateOrder(t, recs, testenv.EventID(t))
			if mode == "initial" && !strings.Contains(p.Out.String(), "published the rows already in the table") {
				t.Errorf("the log does not say the snapshot was published:\n%s", p.Out)
			}
		})
	}
}

// Two writers insert as fast as they can while the relay starts, creates
// its slot and reads the snapshot: rows commit right before the slot's
// consistent point, while the snapshot is read, and after. Each goes out
// exactly once, from the snapshot or from the WAL, and each aggregate's
// events in insertion order.
func TestSnapshotInitialWALWritesAcrossBoundary(t *testing.T) {
	e := testenv.ExistingLedger(t, 20_000)
	testenv.Bin(t) // built before the writers start
	w1, w2 := testenv.WriteLedgerEvery(t, e, 3000, 0, 0), testenv.WriteLedgerEvery(t, e, 3000, 0, 10)
	time.Sleep(100 * time.Millisecond)
	p := e.Run(t, append([]string{"--mode", "wal", "--batch-size", "100", "--snapshot-mode", "initial"}, testenv.LedgerFlags...)...)
	<-w1
	<-w2
	all := ledgerIDs(t, e.Conn)
	topic := "outbox.event.TRANSACTION"
	testenv.AwaitIDs(t, e.Brokers, topic, all, 90*time.Second)
	p.Stop(t)
	recs := testenv.Drain(t, e.Brokers, topic, 0)
	testenv.CheckOnce(t, recs, all, testenv.EventID(t))
	checkAggregateOrder(t, recs, testenv.EventID(t))
}

// A Debezium Server application.properties with snapshot.mode=initial,
// alone: every existing row, also those a poller of the team's marked
// published_at, as Debezium's snapshot sends them, then the new ones.
func TestSnapshotInitialFromDebeziumProperties(t *testing.T) {
	const old = 1000
	e := testenv.ExistingLedger(t, old)
	// A poller of the team's marked most rows published_at: Debezium's
	// snapshot sends them all the same.
	if _, err := e.Conn.Exec(context.Background(), `ALTER TABLE outbox_event ADD COLUMN published_at timestamptz;
UPDATE outbox_event SET published_at = created_at WHERE status = 'PUBLISHED'`); err != nil {
		t.Fatal(err)
	}
	history := ledgerIDs(t, e.Conn)
	path := filepath.Join(t.TempDir(), "application.properties")
	props := testenv.DebeziumServerKafka(t, e) + `debezium.source.topic.prefix=ledger
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox_event
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.table.field.event.type=event_type
debezium.transforms.outbox.route.by.field=aggregate_type
debezium.format.value.schemas.enable=false
`
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--config", path)
	e.AwaitSlotActive(t, "debezium")
	fresh := <-testenv.WriteLedger(t, e, 50)
	want := append(append([]string{}, history...), fresh...)
	topic := "outbox.event.TRANSACTION"
	id := testenv.DebeziumHeaderID(t)
	recs := kafkatest.Consume(t, e.Brokers, []string{topic}, len(want), 60*time.Second)
	p.Stop(t)
	recs = append(recs, testenv.Drain(t, e.Brokers, topic, len(recs))...)
	testenv.CheckOnce(t, recs, want, id)
	checkAggregateOrder(t, recs, id)
}

// A relay killed (SIGKILL) while it publishes the snapshot leaves it
// pending; the next start takes it again and every row goes out: some
// twice, none missing.
func TestSnapshotKilledMidway(t *testing.T) {
	rows := testenv.Chaos(100_000, 300_000)
	e := testenv.ExistingLedger(t, rows)
	args := append([]string{"--mode", "wal", "--batch-size", "50", "--snapshot-mode", "initial"}, testenv.LedgerFlags...)
	p := e.Run(t, args...)
	topic := "outbox.event.TRANSACTION"
	kafkatest.Consume(t, e.Brokers, []string{topic}, 1, 60*time.Second)
	if err := p.Signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("pgoutbox exited 0 on SIGKILL")
	}
	pending := snapshotPending(t, e, "pgoutbox")
	sent := len(testenv.Drain(t, e.Brokers, topic, 0))
	if !pending || sent >= rows {
		t.Fatalf("the kill came after the snapshot (pending %v, %d of %d rows sent): the test proves nothing; give it more rows", pending, sent, rows)
	}
	t.Logf("killed after %d of %d rows of the snapshot", sent, rows)
	// Rows committed while no relay runs, and after the restart.
	fresh := <-testenv.WriteLedger(t, e, 20)
	p = e.Run(t, append(args, "--batch-size", "500")...)
	fresh = append(fresh, <-testenv.WriteLedger(t, e, 20)...)
	all := ledgerIDs(t, e.Conn)
	testenv.AwaitIDs(t, e.Brokers, topic, all, 120*time.Second)
	awaitSnapshotDone(t, e, "pgoutbox")
	p.Stop(t)
	checkTakenAgain(t, p)
	// Once done, a restart publishes nothing again.
	before := len(testenv.Drain(t, e.Brokers, topic, 0))
	p = e.Run(t, args...)
	e.AwaitSlotActive(t, "pgoutbox")
	more := <-testenv.WriteLedger(t, e, 5)
	testenv.AwaitIDs(t, e.Brokers, topic, more, 30*time.Second)
	p.Stop(t)
	if after := len(testenv.Drain(t, e.Brokers, topic, 0)); after != before+len(more) {
		t.Errorf("a start after the snapshot finished sent %d records for %d new rows", after-before, len(more))
	}
	_ = fresh
}

// In poll mode, --snapshot-mode initial publishes the table's history, the
// rows that were there before migrate added the polling columns, in the
// table's own insertion order (--column-order id), and marks them; then
// the new rows. Without an order every row has, it says what to give.
func TestSnapshotInitialPoll(t *testing.T) {
	const old = 2000
	e := testenv.ExistingLedger(t, old)
	if out, err := testenv.Migrate(t, e, "public.outbox_event"); err != nil {
		t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
	}
	// The default order, seq, is missing from the history.
	out, err := testenv.RunToExit(t, append([]string{"run", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","),
		"--mode", "poll", "--snapshot-mode", "initial"}, testenv.LedgerFlags...)...)
	if err == nil || !strings.Contains(out, "--column-order") {
		t.Errorf("poll with initial and rows without seq: err %v, want an error naming --column-order:\n%s", err, out)
	}
	history := ledgerIDs(t, e.Conn)
	p := e.Run(t, append([]string{"--mode", "poll", "--poll-interval", "50ms", "--snapshot-mode", "initial", "--column-order", "id"}, testenv.LedgerFlags...)...)
	fresh := <-testenv.WriteLedger(t, e, 100)
	want := append(append([]string{}, history...), fresh...)
	topic := "outbox.event.TRANSACTION"
	testenv.AwaitIDs(t, e.Brokers, topic, want, 60*time.Second)
	awaitSnapshotDone(t, e, "pgoutbox")
	p.Stop(t)
	recs := testenv.Drain(t, e.Brokers, topic, 0)
	testenv.CheckOnce(t, recs, want, testenv.EventID(t))
	checkAggregateOrder(t, recs, testenv.EventID(t))
	var unmarked int
	if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_event WHERE published_at IS NULL").Scan(&unmarked); err != nil || unmarked != 0 {
		t.Errorf("%d rows not marked published (err %v)", unmarked, err)
	}
	// Nothing was deleted: no loss is reported for the history polled.
	raw, _ := exec.Command(testenv.Bin(t), "status", "--json", "--database-url", e.URL, "--table", "public.outbox_event", "--column-order", "id").Output()
	out = string(raw)
	var st struct {
		LostDeleted *struct{ Rows int64 } `json:"lost_deleted"`
		Problems    []string              `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if st.LostDeleted != nil || len(st.Problems) > 0 {
		t.Errorf("status after the snapshot: lost %+v, problems %q", st.LostDeleted, st.Problems)
	}
}

// snapshotPending reads whether the pipeline's snapshot is recorded
// unfinished.
func snapshotPending(t *testing.T, e *testenv.Env, pipeline string) bool {
	t.Helper()
	var pending bool
	if err := e.Conn.QueryRow(context.Background(), "SELECT snapshot_pending FROM pgoutbox_state WHERE pipeline = $1", pipeline).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	return pending
}

// awaitSnapshotDone waits until the pipeline's snapshot is recorded done.
// Every row can be consumed before the relay records it (the rows written
// beside a restart may all be in the snapshot): a stop in between leaves
// it pending, rightly.
func awaitSnapshotDone(t *testing.T, e *testenv.Env, pipeline string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the snapshot recorded done after it was published", func() bool {
		var pending bool
		err := e.Conn.QueryRow(context.Background(), "SELECT snapshot_pending FROM pgoutbox_state WHERE pipeline = $1", pipeline).Scan(&pending)
		return err == nil && !pending
	})
}

// checkTakenAgain fails unless a restart said it takes the unfinished
// snapshot again, and logs how long publishing it took.
func checkTakenAgain(t *testing.T, p *testenv.Proc) {
	t.Helper()
	if !strings.Contains(p.Out.String(), "did not finish; dropping its slot") {
		t.Errorf("the restart does not say it takes the snapshot again:\n%s", p.Out)
	}
	for _, line := range strings.Split(p.Out.String(), "\n") {
		if strings.Contains(line, "published the rows already in the table") {
			t.Logf("the snapshot again, with writes beside it: %s", line)
		}
	}
}

// In auto mode over a migrated table, --snapshot-mode initial publishes the
// history and the new rows whichever way the first start goes: a WAL
// snapshot with wal_level=logical, polling from the table's start with
// replica.
func TestSnapshotInitialAuto(t *testing.T) {
	for _, wal := range []string{"replica", "logical"} {
		t.Run(wal, func(t *testing.T) {
			e := testenv.ExistingLedger(t, 1500, pgcluster.Options{WALLevel: wal})
			if out, err := testenv.Migrate(t, e, "public.outbox_event"); err != nil {
				t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
			}
			p := e.Run(t, append([]string{"--mode", "auto", "--poll-interval", "50ms", "--snapshot-mode", "initial", "--column-order", "id"}, testenv.LedgerFlags...)...)
			<-testenv.WriteLedger(t, e, 100)
			all := ledgerIDs(t, e.Conn)
			topic := "outbox.event.TRANSACTION"
			testenv.AwaitIDs(t, e.Brokers, topic, all, 60*time.Second)
			p.Stop(t)
			recs := testenv.Drain(t, e.Brokers, topic, 0)
			testenv.CheckOnce(t, recs, all, testenv.EventID(t))
			checkAggregateOrder(t, recs, testenv.EventID(t))
		})
	}
}

// A slot that exists before pgoutbox's first start is another reader's,
// taken over where it stopped (Debezium's, with its offsets): initial
// streams it without a snapshot, as Debezium with stored offsets does.
func TestSnapshotInitialKeepsAnExistingSlot(t *testing.T) {
	e := testenv.ExistingLedger(t, 500)
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE PUBLICATION pgoutbox FOR TABLE outbox_event WITH (publish = 'insert')",
		"SELECT pg_create_logical_replication_slot('pgoutbox', 'pgoutput')",
	} {
		if _, err := e.Conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	since := <-testenv.WriteLedger(t, e, 5) // in the slot, not yet read
	p := e.Run(t, append([]string{"--mode", "wal", "--snapshot-mode", "initial"}, testenv.LedgerFlags...)...)
	e.AwaitSlotActive(t, "pgoutbox")
	want := append(since, <-testenv.WriteLedger(t, e, 5)...)
	topic := "outbox.event.TRANSACTION"
	testenv.AwaitIDs(t, e.Brokers, topic, want, 30*time.Second)
	p.Stop(t)
	testenv.CheckOnce(t, testenv.Drain(t, e.Brokers, topic, 0), want, testenv.EventID(t))
}

// On PostgreSQL 17 and later, --slot-failover with initial creates the
// slot with its snapshot as a failover slot.
func TestSnapshotInitialFailoverSlot(t *testing.T) {
	e := testenv.ExistingLedger(t, 100)
	if testenv.ServerMajor(t, e.Conn) < 17 {
		t.Skipf("failover slots need PostgreSQL 17 or later; this server is %d", testenv.ServerMajor(t, e.Conn))
	}
	history := ledgerIDs(t, e.Conn)
	p := e.Run(t, append([]string{"--mode", "wal", "--snapshot-mode", "initial", "--slot-failover"}, testenv.LedgerFlags...)...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.TRANSACTION", history, 30*time.Second)
	e.AwaitSlotActive(t, "pgoutbox")
	p.Stop(t)
	var failover bool
	if err := e.Conn.QueryRow(context.Background(), "SELECT failover FROM pg_replication_slots WHERE slot_name = 'pgoutbox'").Scan(&failover); err != nil || !failover {
		t.Errorf("slot failover %v (err %v)", failover, err)
	}
}

// --snapshot-mode when_needed is initial on the first start. Where
// Debezium's when_needed finds its slot gone and sends the whole table
// again, pgoutbox fills the gap as after any lost slot: auto mode polls
// from the published floor, so the rows written while the slot was gone
// arrive once and the table's history is not sent again. The start line
// says so.
func TestSnapshotWhenNeededSlotLost(t *testing.T) {
	e := testenv.New(t)
	history := e.InsertN("order", 200)
	args := []string{"--mode", "auto", "--poll-interval", "100ms", "--snapshot-mode", "when_needed"}
	p := e.Run(t, args...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", history, 30*time.Second)
	e.AwaitSlotActive(t, "pgoutbox")
	streamed := e.InsertN("order", 20)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", streamed, 30*time.Second)
	var next string
	if err := e.Conn.QueryRow(context.Background(), "SELECT pg_current_xact_id()::text").Scan(&next); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the published floor past the streamed rows", func() bool {
		var past bool
		err := e.Conn.QueryRow(context.Background(), "SELECT floor_xid > $1::xid8 FROM pgoutbox_state WHERE pipeline = 'pgoutbox'", next).Scan(&past)
		return err == nil && past
	})
	p.Stop(t)
	if !strings.Contains(p.Out.String(), `"snapshot":"when_needed: initial on the pipeline's first start; a lost slot is filled by polling from the published floor, never by sending the tables again"`) {
		t.Errorf("the start line does not say what when_needed does:\n%s", p.Out)
	}
	e.Exec("SELECT pg_drop_replication_slot('pgoutbox')")
	gap := e.InsertN("order", 30)
	p = e.Run(t, args...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", gap, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "streaming the new slot", func() bool { return strings.Contains(p.Out.String(), `"msg":"streaming"`) })
	p.Stop(t)
	if !strings.Contains(p.Out.String(), "slot was lost and has been replaced; polling publishes what committed in between") {
		t.Errorf("the restart does not say it polls the gap:\n%s", p.Out)
	}
	if strings.Contains(p.Out.String(), "publishing the rows already in the tables") {
		t.Errorf("the restart took a snapshot:\n%s", p.Out)
	}
	n := testenv.CountIDs(t, e.Brokers, "outbox.event.order")
	for _, id := range append(append(append([]string{}, history...), streamed...), gap...) {
		if n[id] != 1 {
			t.Errorf("event %s published %d times, want once", id, n[id])
		}
	}
}

// Debezium's documented table has no polling columns: with when_needed,
// a lost slot cannot be filled by polling, and pgoutbox does not send the
// table again either: it stops, naming the slot's last position and what
// polling needs.
func TestSnapshotWhenNeededSlotLostWithoutPollingColumns(t *testing.T) {
	e := testenv.NewBare(t, testenv.DebeziumDocTable)
	history := docRows(t, e, 1, 50)
	conf := docConnector(t, e)
	text, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	conf = testenv.WriteFile(t, "when-needed.json", strings.Replace(string(text), `"plugin.name"`, `"snapshot.mode":"when_needed","plugin.name"`, 1))
	p := e.Run(t, "--config", conf)
	awaitDocIDs(t, e.Brokers, history, 30*time.Second)
	e.AwaitSlotActive(t, "debezium")
	p.Stop(t)
	e.Exec("SELECT pg_drop_replication_slot('debezium')")
	docRows(t, e, 51, 5)
	out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--kafka-brokers", strings.Join(e.Brokers, ","), "--probe-interval", "1s")
	for _, want := range []string{"last confirmed", "rows committed since are not in any slot", "lacks polling columns"} {
		if ok || !strings.Contains(out, want) {
			t.Errorf("run after the slot was lost: exit 0 %v, want it to stop saying %q:\n%s", ok, want, out)
		}
	}
	if strings.Contains(out, "publishing the rows already in the tables") {
		t.Errorf("the table was sent again:\n%s", out)
	}
}
