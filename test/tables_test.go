package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// twoTables is a database with two outbox tables of the default shape,
// created by pgoutbox migrate, and nothing else of pgoutbox.
func twoTables(t *testing.T) *testenv.Env {
	t.Helper()
	e := testenv.NewBare(t, "CREATE SCHEMA billing")
	if out, err := testenv.Migrate(t, e, "public.orders_outbox,billing.outbox"); err != nil {
		t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
	}
	return e
}

// writeBoth commits n transactions, each inserting an event into both
// tables for the same aggregate (one of 5), its position in the aggregate
// in the payload. It returns each table's ids.
func writeBoth(t *testing.T, e *testenv.Env, n int) (orders, billing []string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		tx, err := e.Conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		agg, payload := fmt.Sprintf("a-%d", i%5), fmt.Sprintf(`{"n": %d}`, i)
		var o, b string
		if err := tx.QueryRow(ctx, `INSERT INTO public.orders_outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'Placed', $2) RETURNING id::text`, agg, payload).Scan(&o); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow(ctx, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('invoice', $1, 'Issued', $2) RETURNING id::text`, agg, payload).Scan(&b); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		orders, billing = append(orders, o), append(billing, b)
	}
	return orders, billing
}

// checkPayloadOrder fails unless each aggregate's events arrive in the
// order they were written (the n of their payload grows).
func checkPayloadOrder(t *testing.T, e *testenv.Env, topic string) {
	t.Helper()
	last := map[string]int{}
	for _, r := range testenv.Drain(t, e.Brokers, topic, 0) {
		var p struct{ N int }
		if err := json.Unmarshal(testenv.DecodeEvent(t, r).Data, &p); err != nil {
			t.Fatal(err)
		}
		k := string(r.Key)
		if n, ok := last[k]; ok && p.N <= n {
			t.Errorf("%s: aggregate %s: event %d after %d", topic, k, p.N, n)
			return
		}
		last[k] = p.N
	}
}

// Two outbox tables in one pipeline: one slot, one publication covering
// both, every row of both delivered once and in order per aggregate, the
// table a label of the per-event metrics, and both tables in status, as
// text and as JSON.
func TestTwoTablesOnePipeline(t *testing.T) {
	e := twoTables(t)
	addr := testenv.FreeAddr(t)
	p := e.Run(t, "--mode", "wal", "--table", "public.orders_outbox,billing.outbox", "--metrics-addr", addr)
	e.AwaitSlotActive(t, "pgoutbox")
	orders, billing := writeBoth(t, e, 60)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", billing, 30*time.Second)

	var m map[string]float64
	want := map[string]float64{
		`pgoutbox_events_published_total{mode="wal",table="public.orders_outbox",topic="outbox.event.order"}`: 60,
		`pgoutbox_events_published_total{mode="wal",table="billing.outbox",topic="outbox.event.invoice"}`:     60,
	}
	testenv.Eventually(t, 10*time.Second, "the published counters by table", func() bool {
		m = testenv.Scrape(t, "http://"+addr)
		for k, v := range want {
			if m[k] != v {
				return false
			}
		}
		return true
	})

	bin := testenv.Bin(t)
	out, err := exec.Command(bin, "status", "--json", "--database-url", e.URL).Output()
	var st struct {
		Table  string   `json:"table"`
		Tables []string `json:"tables"`
	}
	if jerr := json.Unmarshal(out, &st); jerr != nil {
		t.Fatalf("status --json: %v (%v)\n%s", jerr, err, out)
	}
	if strings.Join(st.Tables, " ") != "public.orders_outbox billing.outbox" {
		t.Errorf("status --json: tables %q (table %q)", st.Tables, st.Table)
	}
	text, _ := exec.Command(bin, "status", "--database-url", e.URL).CombinedOutput()
	if !strings.Contains(string(text), "public.orders_outbox, billing.outbox") {
		t.Errorf("status does not list both tables:\n%s", text)
	}
	var pubTables int
	if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pgoutbox'").Scan(&pubTables); err != nil || pubTables != 2 {
		t.Errorf("publication covers %d tables (err %v), want 2", pubTables, err)
	}
	// The floor the WAL saves covers every table: each table's row gets
	// it, so a restart in --mode poll polls neither table's history again.
	testenv.Eventually(t, 20*time.Second, "a floor above every row in both tables' state rows", func() bool {
		var n int
		err := e.Conn.QueryRow(context.Background(), `SELECT count(*) FROM pgoutbox_state s WHERE s.pipeline IN ('pgoutbox', 'pgoutbox/billing.outbox')
  AND s.floor_xid > (SELECT max(txid) FROM public.orders_outbox) AND s.floor_xid > (SELECT max(txid) FROM billing.outbox)`).Scan(&n)
		return err == nil && n == 2
	})
	out, _ = exec.Command(bin, "status", "--json", "--database-url", e.URL).Output()
	var counted struct {
		ByTable map[string]int64 `json:"unpublished_rows_by_table"`
	}
	if err := json.Unmarshal(out, &counted); err != nil || len(counted.ByTable) != 2 {
		t.Errorf("status --json: unpublished rows by table %v (%v)\n%s", counted.ByTable, err, out)
	}
	p.Stop(t)
	p = e.Run(t, "--mode", "poll", "--poll-interval", "100ms", "--table", "public.orders_outbox,billing.outbox")
	o2, b2 := writeBothConcurrently(t, e, "r2", 2, 5)
	orders, billing = append(orders, o2...), append(billing, b2...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", billing, 30*time.Second)
	p.Stop(t)
	for topic, ids := range map[string][]string{"outbox.event.order": orders, "outbox.event.invoice": billing} {
		testenv.CheckOnce(t, testenv.Drain(t, e.Brokers, topic, 0), ids, testenv.EventID(t))
		checkPayloadOrder(t, e, topic)
	}
}

// writeBothConcurrently runs writers, each committing n transactions that
// insert an event into both tables for one of its own aggregates, while
// the others do the same (round names the aggregates apart from other
// rounds'); it returns each table's ids.
func writeBothConcurrently(t *testing.T, e *testenv.Env, round string, writers, n int) (orders, billing []string) {
	t.Helper()
	ctx := context.Background()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for w := 0; w < writers; w++ {
		conn := e.Connect()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				agg, payload := fmt.Sprintf("%s-w%d-a-%d", round, w, i%3), fmt.Sprintf(`{"n": %d}`, i)
				var o, b string
				err = tx.QueryRow(ctx, `INSERT INTO public.orders_outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'Placed', $2) RETURNING id::text`, agg, payload).Scan(&o)
				if err == nil {
					err = tx.QueryRow(ctx, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('invoice', $1, 'Issued', $2) RETURNING id::text`, agg, payload).Scan(&b)
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				orders, billing = append(orders, o), append(billing, b)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return orders, billing
}

// Two outbox tables polled in one pipeline (--mode poll): each table
// through its own poller, under concurrent writers and across a restart;
// every row of both delivered once, in order per aggregate, marked
// published in its own table; the first table's positions in the
// pipeline's state row, the second's in a row of its own; the table a
// label of the metrics; status lists both.
func TestTwoTablesPolled(t *testing.T) {
	e := twoTables(t)
	ctx := context.Background()
	addr := testenv.FreeAddr(t)
	args := []string{"--mode", "poll", "--poll-interval", "100ms", "--table", "public.orders_outbox,billing.outbox"}
	p := e.Run(t, append(args, "--metrics-addr", addr, "--metrics-interval", "200ms")...)
	orders, billing := writeBothConcurrently(t, e, "r1", 4, 25)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", billing, 30*time.Second)
	want := map[string]float64{
		`pgoutbox_events_published_total{mode="poll",table="public.orders_outbox",topic="outbox.event.order"}`: 100,
		`pgoutbox_events_published_total{mode="poll",table="billing.outbox",topic="outbox.event.invoice"}`:     100,
		`pgoutbox_unpublished_events{table="public.orders_outbox"}`:                                            0,
		`pgoutbox_unpublished_events{table="billing.outbox"}`:                                                  0,
	}
	var m map[string]float64
	testenv.Eventually(t, 10*time.Second, "the published counters and the unpublished gauges by table", func() bool {
		m = testenv.Scrape(t, "http://"+addr)
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				return false
			}
		}
		return true
	})
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("pgoutbox run: %v\n%s", err, p.Out)
	}
	// Written while no relay runs, then polled by the next start from
	// each table's own marks.
	o2, b2 := writeBothConcurrently(t, e, "r2", 2, 10)
	var extra string
	if err := e.Conn.QueryRow(ctx, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('invoice', 'extra', 'Issued', '{"n": 0}') RETURNING id::text`).Scan(&extra); err != nil {
		t.Fatal(err)
	}
	b2 = append(b2, extra)
	out, _ := exec.Command(testenv.Bin(t), "status", "--json", "--database-url", e.URL).Output()
	var st struct {
		Unpublished int64            `json:"unpublished_rows"`
		ByTable     map[string]int64 `json:"unpublished_rows_by_table"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if st.Unpublished != 41 || st.ByTable["public.orders_outbox"] != 20 || st.ByTable["billing.outbox"] != 21 {
		t.Errorf("status --json while stopped: %d unpublished, by table %v; want 41: 20 and 21", st.Unpublished, st.ByTable)
	}
	stopped, _ := exec.Command(testenv.Bin(t), "status", "--database-url", e.URL).CombinedOutput()
	if !strings.Contains(string(stopped), "billing.outbox: 21") {
		t.Errorf("status does not count the unpublished rows by table:\n%s", stopped)
	}
	p = e.Run(t, args...)
	o3, b3 := writeBothConcurrently(t, e, "r3", 4, 10)
	orders, billing = append(append(orders, o2...), o3...), append(append(billing, b2...), b3...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", billing, 30*time.Second)
	for _, table := range []string{"public.orders_outbox", "billing.outbox"} {
		var left int
		testenv.Eventually(t, 10*time.Second, "every row of "+table+" marked published", func() bool {
			return e.Conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE published_at IS NULL").Scan(&left) == nil && left == 0
		})
	}
	rows, err := e.Conn.Query(ctx, "SELECT pipeline || ' ' || outbox_table || ' ' || mode FROM pgoutbox_state ORDER BY pipeline")
	if err != nil {
		t.Fatal(err)
	}
	var state []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		state = append(state, s)
	}
	if got := strings.Join(state, "; "); got != "pgoutbox public.orders_outbox,billing.outbox poll; pgoutbox/billing.outbox billing.outbox poll" {
		t.Errorf("state rows: %s", got)
	}
	text, _ := exec.Command(testenv.Bin(t), "status", "--database-url", e.URL).CombinedOutput()
	if !strings.Contains(string(text), "public.orders_outbox, billing.outbox") {
		t.Errorf("status does not list both tables:\n%s", text)
	}
	p.Stop(t)
	for topic, ids := range map[string][]string{"outbox.event.order": orders, "outbox.event.invoice": billing} {
		testenv.CheckOnce(t, testenv.Drain(t, e.Brokers, topic, 0), ids, testenv.EventID(t))
		checkPayloadOrder(t, e, topic)
	}
}

// bothLoad writes into both tables until stopped: each writer commits
// transactions inserting an event into each table for one of its own
// aggregates, so an aggregate's events commit in the order they were
// inserted; committed maps each table's event ids to their position in
// their aggregate.
type bothLoad struct {
	mu        sync.Mutex
	committed map[string]map[string]int // topic -> id -> position
	stop      chan struct{}
	wg        sync.WaitGroup
}

func startBothLoad(t *testing.T, e *testenv.Env, writers int) *bothLoad {
	t.Helper()
	ctx := context.Background()
	l := &bothLoad{committed: map[string]map[string]int{"outbox.event.order": {}, "outbox.event.invoice": {}}, stop: make(chan struct{})}
	for w := 0; w < writers; w++ {
		conn := e.Connect()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				agg, payload := fmt.Sprintf("w%d-a-%d", w, i%4), fmt.Sprintf(`{"n": %d}`, i)
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var o, b string
				err = tx.QueryRow(ctx, `INSERT INTO public.orders_outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'Placed', $2) RETURNING id::text`, agg, payload).Scan(&o)
				if err == nil {
					err = tx.QueryRow(ctx, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('invoice', $1, 'Issued', $2) RETURNING id::text`, agg, payload).Scan(&b)
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
				l.mu.Lock()
				l.committed["outbox.event.order"][o], l.committed["outbox.event.invoice"][b] = i, i
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *bothLoad) finish() map[string]map[string]int {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.committed
}

// Auto mode with two tables, through the binary, under continuous writes
// to both: the first start creates the slot and polls both tables until
// everything that committed before it is published (the handoff), then
// streams; REPLICATION is revoked from the relay's role and granted back,
// twice, so it falls back to polling both tables from the floor the WAL
// saved for each and returns to the WAL. Nothing of either table is lost,
// and each aggregate's events arrive in commit order.
func TestTwoTablesAutoSwitchesUnderLoad(t *testing.T) {
	e := twoTables(t)
	ctx := context.Background()
	var db string
	if err := e.Conn.QueryRow(ctx, "SELECT quote_ident(current_database())").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Conn.Exec(ctx, `CREATE ROLE app LOGIN REPLICATION; GRANT CREATE ON DATABASE `+db+` TO app;
GRANT USAGE ON SCHEMA billing TO app; ALTER TABLE public.orders_outbox OWNER TO app; ALTER TABLE billing.outbox OWNER TO app;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app; GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO app; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app;
`+testenv.GrantHeartbeatSQL("app")); err != nil {
		t.Fatal(err)
	}
	mode := func() string {
		var m string
		e.Conn.QueryRow(ctx, "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&m)
		return m
	}
	streaming := func() bool {
		s, err := replication.SlotStatus(ctx, e.Conn, "pgoutbox")
		return err == nil && s.Active && mode() == "wal"
	}
	load := startBothLoad(t, e, 3)
	p := e.Run(t, "--database-url", e.AppURL("app"), "--mode", "auto", "--table", "public.orders_outbox,billing.outbox",
		"--poll-interval", "50ms", "--probe-interval", "300ms")
	testenv.Eventually(t, 30*time.Second, "streaming after the first start's handoff", streaming)
	const cycles = 2
	for i := 0; i < cycles; i++ {
		time.Sleep(700 * time.Millisecond)
		if _, err := e.Conn.Exec(ctx, `ALTER ROLE app NOREPLICATION`); err != nil {
			t.Fatal(err)
		}
		e.EndStreamUntil(t, "pgoutbox", 20*time.Second, "the fallback to polling", func() bool { return mode() == "poll" })
		time.Sleep(700 * time.Millisecond)
		if _, err := e.Conn.Exec(ctx, `ALTER ROLE app REPLICATION`); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 20*time.Second, "the return to the WAL", streaming)
	}
	time.Sleep(500 * time.Millisecond)
	committed := load.finish()
	for _, topic := range []string{"outbox.event.order", "outbox.event.invoice"} {
		rep := testenv.Check(t, e.Brokers, topic, committed[topic])
		t.Logf("%s, %d cycles (WAL->poll->WAL) after the handoff: %v", topic, cycles, rep)
		if rep.Lost != 0 || rep.OrderViolations != 0 {
			t.Fatalf("%s: lost %d, order violations %d", topic, rep.Lost, rep.OrderViolations)
		}
		// The slot replays what the poll phases published; each table's
		// polled rows are skipped, so only the fallbacks' last moments
		// come twice (about a fifth here), not every polled row.
		if rep.Duplicates > len(committed[topic])/2 {
			t.Fatalf("%s: %d duplicates of %d events: the WAL sent again what polling published", topic, rep.Duplicates, len(committed[topic]))
		}
	}
	p.Stop(t)
	var switches int
	e.Conn.QueryRow(ctx, "SELECT switches FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&switches)
	// As for one table: each cycle's two switches. The first start's
	// handoff adds one or two, depending on whether the pipeline's row
	// was first written in WAL mode or already in polling.
	if switches < 2*cycles {
		t.Fatalf("state counted %d switches, want at least %d", switches, 2*cycles)
	}
	if !strings.Contains(p.Out.String(), `"msg":"polling several tables","tables":"public.orders_outbox,billing.outbox","handoff":true`) {
		t.Errorf("the first start did not poll both tables for the handoff:\n%s", p.Out)
	}
}

// A handoff with two tables ends only when both are done: while the
// second table's rows cannot be marked (a transaction locks the table), the
// first table is done, yet the pipeline's row keeps the handoff pending;
// killed then, the next start polls the second table again before
// streaming, and nothing is lost.
func TestTwoTablesHandoffWaitsForEveryTable(t *testing.T) {
	e := twoTables(t)
	ctx := context.Background()
	orders, billing := writeBothConcurrently(t, e, "r1", 2, 25)
	if _, err := e.Conn.Exec(ctx, "CREATE PUBLICATION pgoutbox FOR TABLE public.orders_outbox, billing.outbox WITH (publish = 'insert')"); err != nil {
		t.Fatal(err)
	}
	// Blocks the marking of the second table's rows, not reading them; it
	// takes no transaction id, so the slot's creation does not wait on it.
	lock := e.Connect()
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE billing.outbox IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	args := []string{"--mode", "auto", "--table", "public.orders_outbox,billing.outbox", "--poll-interval", "50ms"}
	p := e.Run(t, args...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	pending := func() bool {
		var on bool
		err := e.Conn.QueryRow(ctx, "SELECT handoff_pending FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&on)
		return err == nil && on
	}
	var marked int
	testenv.Eventually(t, 10*time.Second, "every row of the first table marked", func() bool {
		return e.Conn.QueryRow(ctx, "SELECT count(*) FROM public.orders_outbox WHERE published_at IS NOT NULL").Scan(&marked) == nil && marked == len(orders)
	})
	time.Sleep(time.Second)
	if !pending() {
		t.Fatal("the handoff ended while the second table's rows were not marked")
	}
	if err := p.Signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("pgoutbox survived SIGKILL")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	p = e.Run(t, args...)
	o2, b2 := writeBothConcurrently(t, e, "r2", 2, 10)
	orders, billing = append(orders, o2...), append(billing, b2...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", billing, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "the handoff ended and streaming", func() bool {
		var mode string
		e.Conn.QueryRow(ctx, "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode)
		return !pending() && mode == "wal"
	})
	p.Stop(t)
}

// --retention with two polled tables deletes each table's old rows that
// polling marked published and leaves the recent ones (which rows count as
// published is the statement of one table, tested in
// ops_retention_test.go); auto mode with several tables refuses it.
func TestTwoTablesRetentionPolled(t *testing.T) {
	e := twoTables(t)
	ctx := context.Background()
	tables := []string{"public.orders_outbox", "billing.outbox"}
	args := []string{"--mode", "poll", "--poll-interval", "50ms", "--table", strings.Join(tables, ","), "--retention", "24h", "--retention-interval", "100ms"}
	p := e.Run(t, args...)
	orders, billing := writeBothConcurrently(t, e, "r1", 2, 5)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", billing, 30*time.Second)
	ids := map[string][]string{"public.orders_outbox": orders, "billing.outbox": billing}
	for _, table := range tables {
		testenv.Eventually(t, 10*time.Second, "the rows of "+table+" marked", func() bool {
			var n int
			e.Conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE published_at IS NULL AND id::text = ANY($1)", ids[table]).Scan(&n)
			return n == 0
		})
		if _, err := e.Conn.Exec(ctx, "UPDATE "+table+" SET created_at = now() - interval '30 days' WHERE id::text = ANY($1)", ids[table][:5]); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range tables {
		testenv.Eventually(t, 15*time.Second, "the old published rows of "+table+" deleted", func() bool {
			var n int
			e.Conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE id::text = ANY($1)", ids[table][:5]).Scan(&n)
			return n == 0
		})
	}
	time.Sleep(time.Second) // more runs of retention
	for _, table := range tables {
		var n int
		if err := e.Conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE id::text = ANY($1)", ids[table][5:]).Scan(&n); err != nil || n != 5 {
			t.Errorf("%s: %d of the recent rows left (err %v), want 5", table, n, err)
		}
	}
	p.Stop(t)
	if !strings.Contains(p.Out.String(), `"msg":"retention deleted published rows","table":"billing.outbox"`) {
		t.Errorf("retention did not log what it deleted from the second table:\n%s", p.Out)
	}
	out, err := testenv.RunToExit(t, "run", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","),
		"--mode", "auto", "--table", strings.Join(tables, ","), "--retention", "24h")
	if err == nil || !strings.Contains(out, "--mode poll only") {
		t.Errorf("--retention in auto mode with two tables: err %v, want a refusal:\n%s", err, out)
	}
}

// A polled pipeline of one table that later lists a second keeps its
// state: the first table's rows are not polled again (its positions stay
// in the pipeline's row), and the second table's rows all go out.
func TestTableAddedToPolledPipeline(t *testing.T) {
	e := twoTables(t)
	p := e.Run(t, "--mode", "poll", "--poll-interval", "50ms", "--table", "public.orders_outbox")
	orders, billing := writeBothConcurrently(t, e, "r1", 2, 5)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	p.Stop(t)
	p = e.Run(t, "--mode", "poll", "--poll-interval", "50ms", "--table", "public.orders_outbox,billing.outbox")
	o2, b2 := writeBothConcurrently(t, e, "r2", 2, 5)
	orders, billing = append(orders, o2...), append(billing, b2...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", billing, 30*time.Second)
	p.Stop(t)
	for topic, ids := range map[string][]string{"outbox.event.order": orders, "outbox.event.invoice": billing} {
		testenv.CheckOnce(t, testenv.Drain(t, e.Brokers, topic, 0), ids, testenv.EventID(t))
		checkPayloadOrder(t, e, topic)
	}
	var tables string
	if err := e.Conn.QueryRow(context.Background(), "SELECT outbox_table FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&tables); err != nil ||
		tables != "public.orders_outbox,billing.outbox" {
		t.Errorf("the pipeline's row names %q (err %v)", tables, err)
	}
}

// A Debezium Server configuration whose table.include.list is a list of
// patterns: matched against the database's tables at start, the matches
// logged, both streamed by one slot (and the snapshot of initial covers
// both).
func TestTwoTablesFromDebeziumPatterns(t *testing.T) {
	e := twoTables(t)
	if _, err := e.Conn.Exec(context.Background(), "CREATE TABLE public.orders_archive (id int)"); err != nil {
		t.Fatal(err)
	}
	oldOrders, oldBilling := writeBoth(t, e, 10)
	path := filepath.Join(t.TempDir(), "application.properties")
	props := testenv.DebeziumServerKafka(t, e) + `debezium.source.topic.prefix=shop
debezium.source.table.include.list=billing\\.outbox,public\\.orders_out.*
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
`
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--config", path, "--mode", "wal")
	e.AwaitSlotActive(t, "debezium")
	orders, billing := writeBoth(t, e, 10)
	for topic, ids := range map[string][]string{"outbox.event.order": append(oldOrders, orders...), "outbox.event.invoice": append(oldBilling, billing...)} {
		recs := kafkatest.Consume(t, e.Brokers, []string{topic}, len(ids), 30*time.Second)
		recs = append(recs, testenv.Drain(t, e.Brokers, topic, len(recs))...)
		testenv.CheckOnce(t, recs, ids, testenv.DebeziumHeaderID(t))
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("pgoutbox run: %v\n%s", err, p.Out)
	}
	if !strings.Contains(p.Out.String(), `"tables":"billing.outbox,public.orders_outbox"`) {
		t.Errorf("the log does not name the matched tables:\n%s", p.Out)
	}
}

// A poison row of the second table is dead-lettered under its own table,
// and dlq replay (with run's flags) reads it back from that table once
// fixed.
func TestTwoTablesDeadLetterReplay(t *testing.T) {
	e := twoTables(t)
	args := []string{"--mode", "wal", "--table", "public.orders_outbox,billing.outbox", "--max-message-bytes", "2000"}
	p := e.Run(t, args...)
	e.AwaitSlotActive(t, "pgoutbox")
	ctx := context.Background()
	var poison string
	if err := e.Conn.QueryRow(ctx, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload)
VALUES ('invoice', 'big', 'Issued', jsonb_build_object('blob', repeat('x', 5000))) RETURNING id::text`).Scan(&poison); err != nil {
		t.Fatal(err)
	}
	orders, billing := writeBoth(t, e, 3)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", orders, 30*time.Second)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", billing, 30*time.Second)
	p.Stop(t)
	bin := testenv.Bin(t)
	out, err := exec.Command(bin, "dlq", "list", "--json", "--database-url", e.URL).Output()
	var list []struct {
		Table   string `json:"table"`
		EventID string `json:"event_id"`
	}
	if jerr := json.Unmarshal(out, &list); jerr != nil || len(list) != 1 || list[0].Table != "billing.outbox" || list[0].EventID != poison {
		t.Fatalf("dlq list: %+v (%v, %v)\n%s", list, jerr, err, out)
	}
	if _, err := e.Conn.Exec(ctx, `UPDATE billing.outbox SET payload = '{"blob": "fixed"}' WHERE id::text = $1`, poison); err != nil {
		t.Fatal(err)
	}
	if n := testenv.ReplayDeadLetters(t, e, args...); n != 1 {
		t.Fatalf("dlq replay published %d", n)
	}
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.invoice", []string{poison}, 30*time.Second)
}
