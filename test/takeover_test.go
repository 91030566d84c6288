package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// ledgerWriter inserts ledger events as the application's own role, one
// every few milliseconds, until stopped, and records the slowest insert.
type ledgerWriter struct {
	mu      sync.Mutex
	slowest time.Duration
	ids     []int64
	err     error
	stop    chan struct{}
	done    chan struct{}
}

func startLedgerWriter(t *testing.T, url string) *ledgerWriter {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	w := &ledgerWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			start := time.Now()
			var id int64
			err := conn.QueryRow(context.Background(), `INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload)
VALUES ('TRANSACTION', $1, 'LEDGER_POSTED', '{"new": true}') RETURNING id`, 5000+i%50).Scan(&id)
			took := time.Since(start)
			w.mu.Lock()
			if err != nil && w.err == nil {
				w.err = err
			}
			w.slowest = max(w.slowest, took)
			if err == nil {
				w.ids = append(w.ids, id)
			}
			w.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return w
}

func (w *ledgerWriter) finish() (time.Duration, []int64, error) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slowest, w.ids, w.err
}

// pgoutbox migrate on a ledger's existing table of many rows, while the
// application writes to it as its own role: the table is not rewritten
// (same filenode), no insert waits a second, the application's role can
// still insert, and the rows already there are left as they were. Then
// pgoutbox run in poll mode publishes what the application writes from
// then on and none of the ledger's history. make chaos uses 1,000,000 rows.
func TestMigrateExistingTableWithoutRewrite(t *testing.T) {
	rows := testenv.Chaos(200_000, 1_000_000)
	e := testenv.ExistingLedger(t, rows)
	ctx := context.Background()
	exec := func(sql string) {
		if _, err := e.Conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE ROLE ledger_app LOGIN")
	exec("GRANT SELECT, INSERT ON outbox_event TO ledger_app")
	exec("GRANT USAGE ON SEQUENCE outbox_event_id_seq TO ledger_app")
	before := testenv.Filenode(t, e.Conn, "outbox_event")

	w := startLedgerWriter(t, withRole(t, e.URL, "ledger_app"))
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	out, err := testenv.Migrate(t, e, "public.outbox_event")
	took := time.Since(start)
	time.Sleep(200 * time.Millisecond)
	slowest, written, werr := w.finish()
	if err != nil {
		t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
	}
	t.Logf("migrate of %d rows took %s; slowest concurrent insert %s; %d inserts", rows, took.Round(time.Millisecond), slowest.Round(time.Millisecond), len(written))
	if !strings.Contains(out, "without rewriting the table") {
		t.Errorf("migrate output does not say what it did:\n%s", out)
	}
	if werr != nil {
		t.Fatalf("the application's insert failed during or after migrate: %v", werr)
	}
	if after := testenv.Filenode(t, e.Conn, "outbox_event"); after != before {
		t.Errorf("the table was rewritten: filenode %d -> %d", before, after)
	}
	if slowest >= time.Second {
		t.Errorf("an insert waited %s behind migrate", slowest)
	}
	var touched int
	if err := e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox_event WHERE id <= $1 AND (seq IS NOT NULL OR txid IS NOT NULL OR published_at IS NOT NULL)", rows).Scan(&touched); err != nil {
		t.Fatal(err)
	}
	if touched != 0 {
		t.Errorf("%d existing rows were given values", touched)
	}
	var noTxid int
	if err := e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox_event WHERE seq IS NOT NULL AND txid IS NULL").Scan(&noTxid); err != nil {
		t.Fatal(err)
	}
	if noTxid != 0 {
		t.Errorf("%d rows inserted during migrate got a seq but no txid: polling would never publish them", noTxid)
	}
	var valid bool
	if err := e.Conn.QueryRow(ctx, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'outbox_event_unpublished'::regclass").Scan(&valid); err != nil || !valid {
		t.Errorf("index outbox_event_unpublished: valid %v, err %v", valid, err)
	}
	if out, err := testenv.Migrate(t, e, "public.outbox_event"); err != nil || !strings.Contains(out, "already has the polling columns") {
		t.Errorf("second migrate: %v\n%s", err, out)
	}

	// The application keeps writing; pgoutbox polls the table.
	p := e.Run(t, append([]string{"--mode", "poll", "--poll-interval", "50ms"}, testenv.LedgerFlags...)...)
	w = startLedgerWriter(t, withRole(t, e.URL, "ledger_app"))
	time.Sleep(500 * time.Millisecond)
	_, fresh, werr := w.finish()
	if werr != nil {
		t.Fatal(werr)
	}
	topic := "outbox.event.TRANSACTION"
	testenv.Eventually(t, 60*time.Second, "every row written since migrate published", func() bool {
		var left int
		e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox_event WHERE published_at IS NULL AND seq IS NOT NULL").Scan(&left)
		return left == 0
	})
	recs := testenv.Drain(t, e.Brokers, topic, 0)
	// Rows the first writer inserted before the columns existed have no
	// seq; they belong with the history and are not polled.
	var since int
	if err := e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox_event WHERE seq IS NOT NULL").Scan(&since); err != nil {
		t.Fatal(err)
	}
	if len(recs) != since || since < len(fresh) || since > len(written)+len(fresh) {
		t.Errorf("%d records in %s; %d rows written after the columns were added (%d written during migrate, %d after)", len(recs), topic, since, len(written), len(fresh))
	}
	for _, r := range recs {
		if id := testenv.DecodeEvent(t, r).ID; len(id) <= 0 || testenv.MustInt(t, id) <= int64(rows) {
			t.Errorf("published event %s is from the table's history", id)
			break
		}
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("pgoutbox run: %v", err)
	}
}

// withRole is url connecting as role, without a password (trust).
func withRole(t *testing.T, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// A Debezium Server application.properties over the ledger's existing
// table is all pgoutbox run needs, as it is all Debezium needs: no migrate.
// It creates its own tables, the publication and the slot, relays what the
// application writes from then on, and publishes none of the old rows.
func TestRunAloneFromDebeziumProperties(t *testing.T) {
	e := testenv.ExistingLedger(t, 1000)
	path := filepath.Join(t.TempDir(), "application.properties")
	props := testenv.DebeziumServerKafka(t, e) + `debezium.source.topic.prefix=ledger
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox_event
debezium.source.snapshot.mode=no_data
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
	ctx := context.Background()
	var ids []string
	for i := 0; i < 20; i++ {
		var id string
		if err := e.Conn.QueryRow(ctx, `INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload)
VALUES ('TRANSACTION', $1, 'LEDGER_POSTED', '{"new": true}') RETURNING id::text`, 7000+i%3).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	topic := "outbox.event.TRANSACTION"
	recs := kafkatest.Consume(t, e.Brokers, []string{topic}, len(ids), 30*time.Second)
	got := map[string]bool{}
	for _, r := range recs {
		// Debezium Server's default header format: JSON with its schema.
		h, _ := testenv.HeaderOf(r, "id")
		var v struct{ Payload any }
		if err := json.Unmarshal([]byte(h), &v); err != nil {
			t.Fatalf("header id %q: %v", h, err)
		}
		got[fmt.Sprint(v.Payload)] = true
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("event %s written after the start is missing", id)
		}
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("pgoutbox run: %v\n%s", err, p.Out)
	}
	if n := len(testenv.Drain(t, e.Brokers, topic, 0)); n != len(ids) {
		t.Errorf("%d records in %s, want the %d written after the start: the table's history was published", n, topic, len(ids))
	}
	var version int
	if err := e.Conn.QueryRow(ctx, "SELECT version FROM pgoutbox_schema_version").Scan(&version); err != nil || version == 0 {
		t.Errorf("pgoutbox's own tables were not created: version %d, err %v", version, err)
	}
}

// A role that may not create tables gets, from run alone, what to run or
// grant instead, and the exit code of a problem retrying cannot fix.
func TestRunAloneWithoutCreatePrivilege(t *testing.T) {
	e := testenv.ExistingLedger(t, 10)
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE ROLE relay LOGIN REPLICATION",
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"GRANT SELECT ON outbox_event TO relay",
	} {
		if _, err := e.Conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	bin := testenv.Bin(t)
	args := append([]string{"run", "--database-url", withRole(t, e.URL, "relay"), "--kafka-brokers", strings.Join(e.Brokers, ","), "--mode", "wal"}, testenv.LedgerFlags...)
	cmd := exec.Command(bin, args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("run did not stop on a privilege it lacks:\n%s", out)
	}
	if err == nil {
		t.Fatalf("run exited 0:\n%s", out)
	}
	for _, want := range []string{`and role "relay" may not create them`, "pgoutbox migrate", "GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state, pgoutbox_dead_letter TO relay"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// statusFlags take over from the team's own poller: its status column says
// what is published, and its bigserial id is the insertion order.
var statusFlags = []string{"--column-order", "id", "--column-status", "status",
	"--status-pending", "PENDING", "--status-published", "PUBLISHED", "--column-processed-at", "processed_at"}

// A team polled its ledger outbox itself: 10% of its rows are PENDING, the
// rest PUBLISHED. pgoutbox migrate, then pgoutbox run in auto mode with the
// status mapping, takes over: the pending rows go out, the published rows
// never do, every new row goes out, and nothing else. With wal_level=replica
// it polls and marks rows as the team's poller did; with logical, the first
// start polls what committed before its new slot and then streams.
func TestTakeOverFromOwnPoller(t *testing.T) {
	for _, wal := range []string{"replica", "logical"} {
		t.Run(wal, func(t *testing.T) {
			e := testenv.ExistingLedger(t, 2000, pgcluster.Options{WALLevel: wal})
			ctx := context.Background()
			var pendingBefore []string
			rows, err := e.Conn.Query(ctx, "SELECT id::text FROM outbox_event WHERE status = 'PENDING'")
			if err != nil {
				t.Fatal(err)
			}
			if pendingBefore, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				t.Fatal(err)
			}
			before := testenv.Filenode(t, e.Conn, "outbox_event")
			var started time.Time
			if err := e.Conn.QueryRow(ctx, "SELECT now()").Scan(&started); err != nil {
				t.Fatal(err)
			}
			if out, err := testenv.Migrate(t, e, "public.outbox_event"); err != nil {
				t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
			}
			args := append(append([]string{"--mode", "auto", "--poll-interval", "50ms", "--probe-interval", "200ms"}, testenv.LedgerFlags...), statusFlags...)
			p := e.Run(t, args...)
			var fresh []string
			for i := 0; i < 100; i++ {
				var id string
				if err := e.Conn.QueryRow(ctx, `INSERT INTO outbox_event (aggregate_type, aggregate_id, event_type, payload)
VALUES ('TRANSACTION', $1, 'LEDGER_POSTED', '{"new": true}') RETURNING id::text`, 9000+i%7).Scan(&id); err != nil {
					t.Fatal(err)
				}
				fresh = append(fresh, id)
				time.Sleep(10 * time.Millisecond)
			}
			want := append(append([]string{}, pendingBefore...), fresh...)
			topic := "outbox.event.TRANSACTION"
			testenv.AwaitIDs(t, e.Brokers, topic, want, 60*time.Second)
			// Every published row is marked as the team's poller marked
			// it, whether polling or the WAL published it: their poller,
			// started again, finds nothing to send again.
			var unmarked int
			arrived := time.Now()
			for deadline := arrived.Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if err := e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox_event WHERE id::text = ANY($1) AND (status <> 'PUBLISHED' OR processed_at IS NULL)", want).Scan(&unmarked); err != nil {
					t.Fatal(err)
				}
				if unmarked == 0 || time.Now().After(deadline) {
					break
				}
			}
			if unmarked != 0 {
				t.Errorf("%d of the %d published rows (%d pending before, %d new) not marked PUBLISHED with processed_at 20 s after they reached Kafka", unmarked, len(want), len(pendingBefore), len(fresh))
			} else {
				t.Logf("every published row marked %s after the last reached Kafka", time.Since(arrived).Round(10*time.Millisecond))
			}
			if err := e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox_event WHERE status = 'PENDING'").Scan(&unmarked); err != nil || unmarked != 0 {
				t.Errorf("%d rows still PENDING after pgoutbox published them (err %v)", unmarked, err)
			}
			var touched int
			if err := e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox_event WHERE NOT (id::text = ANY($1)) AND processed_at >= $2", want, started).Scan(&touched); err != nil || touched != 0 {
				t.Errorf("%d rows of the team's history marked again (err %v)", touched, err)
			}
			if err := p.Signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("pgoutbox run: %v", err)
			}
			seen := map[string]int{}
			for _, r := range testenv.Drain(t, e.Brokers, topic, 0) {
				seen[testenv.DecodeEvent(t, r).ID]++
			}
			wanted := map[string]bool{}
			for _, id := range want {
				wanted[id] = true
			}
			for id, n := range seen {
				switch {
				case !wanted[id]:
					t.Errorf("event %s was PUBLISHED by the team's poller and was sent again", id)
				case n > 1:
					t.Errorf("event %s sent %d times", id, n)
				}
			}
			if len(seen) != len(want) {
				t.Errorf("%d distinct events in %s, want %d (%d pending before, %d new)", len(seen), topic, len(want), len(pendingBefore), len(fresh))
			}
			// status counts by the same mapping: nothing is left.
			bin := testenv.Bin(t)
			out, _ := exec.Command(bin, append([]string{"status", "--json", "--database-url", e.URL}, statusFlags...)...).Output()
			var st struct {
				Unpublished *int64 `json:"unpublished_rows"`
			}
			if err := json.Unmarshal([]byte(out), &st); err != nil || st.Unpublished == nil || *st.Unpublished != 0 {
				t.Errorf("status with the mapping: unpublished %v, err %v\n%s", st.Unpublished, err, out)
			}
			if after := testenv.Filenode(t, e.Conn, "outbox_event"); after != before {
				t.Errorf("the table was rewritten: filenode %d -> %d", before, after)
			}
		})
	}
}

// A WAL session marks the rows it published by the transactions Kafka
// acknowledged, with the team's own status: a long transaction elsewhere
// (which holds the published floor back) does not hold the marks back,
// and a clean stop marks everything acknowledged before the process
// exits, so that the team's poller, started right after, sends nothing
// again. Through the binary, on seed 000's ledger, in both deliveries;
// at-least-once with a second table in the pipeline, whose rows only the
// session's transactions tell (exactly-once takes one table).
func TestWALMarksWhatKafkaAcked(t *testing.T) {
	for _, delivery := range []string{"at-least-once", "exactly-once"} {
		t.Run(delivery, func(t *testing.T) {
			e := testenv.ExistingLedger(t, 100, pgcluster.Options{WALLevel: "logical"})
			if delivery == "exactly-once" {
				b := kafkatest.Shared(t)
				e.Kafka, e.Apache, e.Brokers = &kafkatest.Cluster{Brokers: b.Brokers}, b, b.Brokers
			}
			ctx := context.Background()
			// Its ids come from the same sequence: one id, one event.
			if _, err := e.Conn.Exec(ctx, "CREATE TABLE public.outbox_event_b (LIKE public.outbox_event INCLUDING ALL)"); err != nil {
				t.Fatal(err)
			}
			names := []string{"outbox_event", "outbox_event_b"}
			if delivery == "exactly-once" {
				names = names[:1]
			}
			tables := "public." + strings.Join(names, ",public.")
			if out, err := testenv.Migrate(t, e, tables); err != nil {
				t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
			}
			// Names of their own: the exactly-once run shares its broker.
			slot := "marks_" + strings.ReplaceAll(delivery, "-", "_")
			topic := "ledger." + slot
			args := append(append(append([]string{"--mode", "auto", "--delivery", delivery, "--slot", slot, "--topic", topic}, testenv.LedgerFlags...), statusFlags...), "--table", tables)
			p := e.Run(t, args...)
			e.AwaitSlotActive(t, slot)
			insert := func(n int) []string {
				t.Helper()
				var ids []string
				for i := 0; i < n; i++ {
					table := names[i%len(names)]
					var id string
					if err := e.Conn.QueryRow(ctx, `INSERT INTO `+table+` (aggregate_type, aggregate_id, event_type, payload)
VALUES ('TRANSACTION', $1, 'LEDGER_POSTED', '{"new": true}') RETURNING id::text`, 7000+i%5).Scan(&id); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, id)
				}
				return ids
			}
			pending := func(ids []string) int {
				t.Helper()
				var n int
				if err := e.Conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT id, status, processed_at FROM outbox_event UNION ALL SELECT id, status, processed_at FROM outbox_event_b) r
WHERE id::text = ANY($1) AND (status <> 'PUBLISHED' OR processed_at IS NULL)`, ids).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}

			// A report runs for the whole test: the floor cannot pass it.
			long := e.Connect()
			if _, err := long.Exec(ctx, "BEGIN; SELECT pg_current_xact_id()"); err != nil {
				t.Fatal(err)
			}
			first := insert(20)
			testenv.AwaitIDs(t, e.Brokers, topic, first, 60*time.Second)
			testenv.Eventually(t, 10*time.Second, "the rows Kafka acked marked PUBLISHED while a transaction older than them runs", func() bool {
				return pending(first) == 0
			})

			// Stopped the moment the last rows reached Kafka: the process
			// exits with every row it published marked.
			second := insert(20)
			testenv.AwaitIDs(t, e.Brokers, topic, second, 60*time.Second)
			if err := p.Signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("pgoutbox run: %v\n%s", err, p.Out)
			}
			if n := pending(second); n != 0 {
				t.Errorf("%d of the %d rows in Kafka still pending after pgoutbox stopped; the team's poller would send them again", n, len(second))
			}
			if _, err := long.Exec(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			// The history's pending rows went out polling, and nothing
			// else is pending.
			var left int
			if err := e.Conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM outbox_event WHERE status = 'PENDING') + (SELECT count(*) FROM outbox_event_b WHERE status = 'PENDING')").Scan(&left); err != nil || left != 0 {
				t.Errorf("%d rows PENDING after pgoutbox stopped (err %v)", left, err)
			}
		})
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
