package test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// execAll runs statements in turn on the test's connection.
func execAll(e *testenv.Env, sql ...string) {
	e.T.Helper()
	for _, s := range sql {
		e.Exec(s)
	}
}

// exited waits for the process to exit by itself and returns its output.
func exited(t *testing.T, p *testenv.Proc, within time.Duration) (string, error) {
	t.Helper()
	select {
	case <-p.Done():
		return p.Out.String(), p.Err()
	case <-time.After(within):
		t.Fatalf("pgoutbox did not stop within %s:\n%s", within, p.Out.String())
		return "", nil
	}
}

// A team's partitioned outbox with rows, taken over as a user does:
// pgoutbox migrate, then pgoutbox run in WAL mode and in poll mode (two
// pipelines, each to its own topics). migrate gives the table the polling
// columns and builds the index over unpublished rows partition by
// partition, concurrently, without rewriting a partition; each pipeline
// publishes every row written from then on, into any partition (the
// default one, a partition created while they run, a table attached as
// one, rows inserted into a partition directly), and none of the history.
// Dropping a partition whose rows were all published is no loss; rows
// deleted from a partition, or dropped with one, before a poll read them
// are reported lost by the poll pipeline.
func TestPartitionedOutbox(t *testing.T) {
	e := testenv.PartitionedOutbox(t, 200)
	ctx := context.Background()
	parts := []string{"outbox_last_month", "outbox_this_month", "outbox_default"}
	before := map[string]uint32{}
	for _, p := range parts {
		before[p] = testenv.Filenode(t, e.Conn, p)
	}
	if out, err := testenv.Migrate(t, e, "public.outbox"); err != nil {
		t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
	}
	for _, p := range parts {
		if after := testenv.Filenode(t, e.Conn, p); after != before[p] {
			t.Errorf("partition %s was rewritten", p)
		}
	}
	var invalid []string
	rows, err := e.Conn.Query(ctx, `SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname LIKE 'outbox%unpublished' AND NOT i.indisvalid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		invalid = append(invalid, n)
	}
	var indexes int
	e.Conn.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'outbox_unpublished'::regclass`).Scan(&indexes)
	if len(invalid) > 0 || indexes != len(parts) {
		t.Errorf("index over unpublished rows: %d partitions' attached, invalid %v", indexes, invalid)
	}

	wal := e.Run(t, "--mode", "wal", "--slot", "pw", "--publication", "pw", "--topic", "wal.{aggregatetype}")
	poll := e.Run(t, "--mode", "poll", "--slot", "pp", "--topic", "poll.{aggregatetype}", "--poll-interval", "50ms")
	testenv.Eventually(t, 30*time.Second, "both relays started", func() bool {
		return strings.Contains(wal.Out.String(), `"msg":"streaming"`) && strings.Contains(poll.Out.String(), `"msg":"polling"`)
	})
	var ids []string
	ids = append(ids, testenv.InsertInto(t, e, "outbox", "order", testenv.ThisMonth, 30)...)
	ids = append(ids, testenv.InsertInto(t, e, "outbox", "order", testenv.FarFuture, 10)...)
	ids = append(ids, testenv.InsertInto(t, e, "outbox", "order", testenv.LastMonth, 10)...)
	ids = append(ids, testenv.InsertInto(t, e, "outbox_this_month", "order", testenv.ThisMonth, 5)...)
	// Partitions added while the relays run: nothing to do for them.
	e.Exec(`DO $$ DECLARE m timestamptz := date_trunc('month', now()); BEGIN
  EXECUTE format('CREATE TABLE outbox_next_month PARTITION OF outbox FOR VALUES FROM (%L) TO (%L)', m + interval '1 month', m + interval '2 months');
  EXECUTE format('CREATE TABLE outbox_attached (LIKE outbox INCLUDING DEFAULTS)');
  EXECUTE format('ALTER TABLE outbox ATTACH PARTITION outbox_attached FOR VALUES FROM (%L) TO (%L)', m + interval '2 months', m + interval '3 months');
END $$`)
	ids = append(ids, testenv.InsertInto(t, e, "outbox", "order", testenv.NextMonth, 10)...)
	ids = append(ids, testenv.InsertInto(t, e, "outbox", "order", testenv.InTwoMonths, 10)...)
	ids = append(ids, testenv.InsertInto(t, e, "outbox_attached", "order", testenv.InTwoMonths, 5)...)
	for _, topic := range []string{"wal.order", "poll.order"} {
		testenv.AwaitIDs(t, e.Brokers, topic, ids, 30*time.Second)
	}
	testenv.Eventually(t, 15*time.Second, "polling marked every row it published", func() bool {
		var left int
		e.Conn.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE published_at IS NULL AND seq IS NOT NULL").Scan(&left)
		return left == 0
	})
	// Last month's partition goes: its rows were history or published.
	e.Exec("DROP TABLE outbox_last_month")
	more := testenv.InsertInto(t, e, "outbox", "order", testenv.ThisMonth, 5)
	for _, topic := range []string{"wal.order", "poll.order"} {
		testenv.AwaitIDs(t, e.Brokers, topic, more, 30*time.Second)
		if n := len(testenv.Drain(t, e.Brokers, topic, 0)); n != len(ids)+len(more) {
			t.Errorf("%d records in %s, want the %d written since migrate: none of the history", n, topic, len(ids)+len(more))
		}
	}
	// The deleted-row check has seen the drop and runs on.
	time.Sleep(time.Second)
	for _, pipeline := range []string{"pw", "pp"} {
		st, ok := e.Status(t, "--slot", pipeline)
		if !ok || st.LostDeleted != nil {
			t.Errorf("status of %s: ok %t, lost %+v, problems %q", pipeline, ok, st.LostDeleted, st.Problems)
		}
	}
	var viaRoot bool
	if err := e.Conn.QueryRow(ctx, "SELECT pubviaroot FROM pg_publication WHERE pubname = 'pw'").Scan(&viaRoot); err != nil || !viaRoot {
		t.Errorf("the publication pgoutbox created publishes through the partition root: %t (err %v)", viaRoot, err)
	}
	// Polling cannot see rows deleted, or dropped with their partition,
	// before it read them; it says so, across partitions.
	testenv.InsertThenDelete(e, 10, "order")
	testenv.FlushStats(e)
	if n := testenv.LostNow(t, e, 10, "--slot", "pp"); n != 10 {
		t.Errorf("10 rows deleted from a partition before a poll: status reports %d rows lost", n)
	}
	// The transaction waits between its INSERT and its DROP, so that polls
	// read the positions its rows drew while it runs.
	execAll(e, "BEGIN", "INSERT INTO outbox (aggregatetype, aggregateid, type, payload, created_at) SELECT 'order', 'o', 'Placed', '{}', "+testenv.NextMonth+" FROM generate_series(1, 10)")
	time.Sleep(300 * time.Millisecond)
	execAll(e, "DROP TABLE outbox_next_month", "COMMIT")
	if n := testenv.LostNow(t, e, 20, "--slot", "pp"); n != 20 {
		t.Errorf("and 10 rows dropped with their partition before a poll: status reports %d rows lost in all, want 20", n)
	}
	for _, p := range []*testenv.Proc{wal, poll} {
		if err := p.Signal(t, syscall.SIGTERM); err != nil {
			t.Errorf("pgoutbox run: %v", err)
		}
	}
}

// The publication of a partitioned outbox, through the binary. One made by
// hand without publish_via_partition_root (or naming some partitions only)
// is not pgoutbox's to change: --mode wal stops at start with the
// statement to run, and --mode auto polls, saying what is wrong, not to
// add a table the publication already has. One with the shape pgoutbox
// gave its publications before (inserts only, its tables only) is fixed,
// and so said; rows the slot decoded before the fix come under the names
// of the partitions, and are published all the same. While it streams,
// publish_via_partition_root is turned off by hand and a table with rows
// attached as a partition: rows inserted through the outbox then arrive
// under the new partition's name and are published, the rows it held
// before are not (they were never outbox rows), and the publication is put
// right again within seconds.
func TestPartitionedOutboxPublication(t *testing.T) {
	e := testenv.PartitionedOutbox(t, 0)
	if out, err := testenv.Migrate(t, e, "public.outbox"); err != nil {
		t.Fatalf("pgoutbox migrate: %v\n%s", err, out)
	}
	// Made by hand, as for a subscriber, publishing every action.
	e.Exec("CREATE PUBLICATION pgoutbox FOR TABLE outbox")
	wantFix := "ALTER PUBLICATION pgoutbox SET (publish_via_partition_root = true);"
	out, err := exited(t, e.Run(t, "--mode", "wal"), 30*time.Second)
	if err == nil || !strings.Contains(out, wantFix) || strings.Contains(out, "ADD TABLE") {
		t.Errorf("--mode wal with a publication that does not publish through the root: exit %v, want the fix %q and no ADD TABLE:\n%s", err, wantFix, out)
	}
	execAll(e, "DROP PUBLICATION pgoutbox", "CREATE PUBLICATION pgoutbox FOR TABLE outbox_this_month")
	out, err = exited(t, e.Run(t, "--mode", "wal"), 30*time.Second)
	if err == nil || !strings.Contains(out, "publishes some partitions of public.outbox") || !strings.Contains(out, `ALTER PUBLICATION pgoutbox ADD TABLE "public"."outbox";`) {
		t.Errorf("--mode wal with a publication of one partition: exit %v (%d bytes):\n%s", err, len(out), out)
	}
	execAll(e, "DROP PUBLICATION pgoutbox", "CREATE PUBLICATION pgoutbox FOR TABLE outbox")
	auto := e.Run(t, "--mode", "auto", "--poll-interval", "50ms")
	polled := testenv.InsertInto(t, e, "outbox", "polled", testenv.ThisMonth, 10)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.polled", polled, 30*time.Second)
	if err := auto.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("pgoutbox run --mode auto: %v", err)
	}
	if log := auto.Out.String(); !strings.Contains(log, `"msg":"switching to polling"`) || !strings.Contains(log, "publish_via_partition_root") || strings.Contains(log, "ADD TABLE") {
		t.Errorf("auto mode does not say what is wrong with the publication:\n%s", log)
	}

	// As an earlier pgoutbox made it, with a slot that holds rows written
	// before the fix.
	execAll(e, "DROP PUBLICATION pgoutbox", "CREATE PUBLICATION pgoutbox FOR TABLE outbox WITH (publish = 'insert')",
		"SELECT pg_create_logical_replication_slot('pgoutbox', 'pgoutput')")
	ids := testenv.InsertInto(t, e, "outbox", "order", testenv.ThisMonth, 10)
	ids = append(ids, testenv.InsertInto(t, e, "outbox", "order", testenv.FarFuture, 5)...)
	wal := e.Run(t, "--mode", "wal")
	testenv.Eventually(t, 30*time.Second, "streaming", func() bool { return strings.Contains(wal.Out.String(), `"msg":"streaming"`) })
	if log := wal.Out.String(); !strings.Contains(log, "publication fixed") || !strings.Contains(log, wantFix) {
		t.Errorf("the publication was not fixed, or not said so:\n%s", log)
	}
	ids = append(ids, testenv.InsertInto(t, e, "outbox", "order", testenv.ThisMonth, 10)...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 30*time.Second)

	// Turned off by hand; a table with rows attached.
	execAll(e, "ALTER PUBLICATION pgoutbox SET (publish_via_partition_root = false)",
		`CREATE TABLE outbox_next_month (LIKE outbox INCLUDING DEFAULTS)`,
		`INSERT INTO outbox_next_month (aggregatetype, aggregateid, type, payload, created_at)
SELECT 'order', 'before', 'Happened', '{}', `+testenv.NextMonth+` FROM generate_series(1, 3)`,
		`DO $$ DECLARE m timestamptz := date_trunc('month', now()); BEGIN
  EXECUTE format('ALTER TABLE outbox ATTACH PARTITION outbox_next_month FOR VALUES FROM (%L) TO (%L)', m + interval '1 month', m + interval '2 months');
END $$`)
	late := testenv.InsertInto(t, e, "outbox", "order", testenv.NextMonth, 5)
	late = append(late, testenv.InsertInto(t, e, "outbox", "order", testenv.ThisMonth, 5)...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", late, 30*time.Second)
	testenv.Eventually(t, 15*time.Second, "the publication put right", func() bool {
		var viaRoot bool
		e.Conn.QueryRow(context.Background(), "SELECT pubviaroot FROM pg_publication WHERE pubname = 'pgoutbox'").Scan(&viaRoot)
		return viaRoot
	})
	last := testenv.InsertInto(t, e, "outbox", "order", testenv.NextMonth, 5)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", last, 30*time.Second)
	if err := wal.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("pgoutbox run: %v", err)
	}
	if n, want := len(testenv.Drain(t, e.Brokers, "outbox.event.order", 0)), len(ids)+len(late)+len(last); n != want {
		t.Errorf("%d records, want %d: the rows of the attached table from before are not events", n, want)
	}
}

// What else reaches the WAL stream from outside the outbox table, through
// the binary in --mode wal, on the default table. A second table added to
// the publication by hand: the relay stops at its first row, before
// confirming it, naming the table and the fix, and status says why; a
// restart refuses the publication the same way; once the table is out of
// the publication, its rows still in the slot are skipped with a warning
// and the outbox rows after them published. The rows inserted before a
// TRUNCATE are published, and the truncate logged. A table that inherits
// from the outbox, created while streaming, is added to pgoutbox's publication
// within seconds, and its rows are published as the outbox's. The outbox
// renamed while streaming: rows written under the new name are published,
// then the relay stops, as the table it is configured for is gone; renamed
// back, it goes on without losing a row.
func TestUnrecognisedRelations(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	topic := "outbox.event.order"
	p := e.Run(t, "--mode", "wal")
	testenv.Eventually(t, 30*time.Second, "streaming", func() bool { return strings.Contains(p.Out.String(), `"msg":"streaming"`) })
	before := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	testenv.AwaitIDs(t, e.Brokers, topic, before, 30*time.Second)

	execAll(e, "CREATE TABLE notes (id int, body text)", "ALTER PUBLICATION pgoutbox ADD TABLE notes")
	probe := testenv.NewCommitProbe(e)
	tx, err := e.Conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var held string
	if _, err := tx.Exec(ctx, "INSERT INTO notes VALUES (1, 'not an event')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, "INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-1', 'Shipped', '{}') RETURNING id::text").Scan(&held); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	after := append([]string{held}, e.Insert(testenv.NewRow("order", "o-1", "Delivered", `{}`))...)
	fix := "ALTER PUBLICATION pgoutbox DROP TABLE \"public\".\"notes\";"
	out, err := exited(t, p, 30*time.Second)
	if err == nil || !strings.Contains(out, "public.notes") || !strings.Contains(out, fix) || !strings.Contains(out, "give each pipeline a publication of its own (--publication)") {
		t.Fatalf("the relay did not stop at a row of a table it does not relay, naming it and the fix %q: exit %v", fix, err)
	}
	if commits := probe.Commits(); len(commits) == 0 || e.Slot("pgoutbox").ConfirmedLSN >= commits[0] {
		t.Fatalf("the slot was confirmed past the transaction with the row of public.notes (commits %v, confirmed %s)", commits, e.Slot("pgoutbox").ConfirmedLSN)
	}
	st, ok := e.Status(t)
	if ok || !strings.Contains(strings.Join(st.Problems, "\n"), "the relay stopped") {
		t.Errorf("status while the relay is stopped: ok %t, problems %q", ok, st.Problems)
	}
	if out, err := exited(t, e.Run(t, "--mode", "wal"), 30*time.Second); err == nil || !strings.Contains(out, fix) {
		t.Errorf("a restart did not refuse the publication: exit %v:\n%s", err, out)
	}
	e.Exec("ALTER PUBLICATION pgoutbox DROP TABLE notes")
	p = e.Run(t, "--mode", "wal")
	testenv.AwaitIDs(t, e.Brokers, topic, after, 30*time.Second)
	if !strings.Contains(p.Out.String(), "skipping the rows of a table") {
		t.Errorf("the rows of public.notes were skipped without a word:\n%s", p.Out.String())
	}
	if st, ok := e.Status(t); !ok {
		t.Errorf("status once the relay streams again: %q", st.Problems)
	}

	// A cleanup job's TRUNCATE: the rows inserted before it in the
	// stream, in its own transaction too, are published; it is logged.
	truncated := testenv.InsertInto(t, e, "outbox", "order", testenv.ThisMonth, 3)
	tx, err = e.Conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		var id string
		if err := tx.QueryRow(ctx, "INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-3', 'Placed', '{}') RETURNING id::text").Scan(&id); err != nil {
			t.Fatal(err)
		}
		truncated = append(truncated, id)
	}
	if _, err := tx.Exec(ctx, "TRUNCATE outbox"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.AwaitIDs(t, e.Brokers, topic, truncated, 30*time.Second)
	testenv.Eventually(t, 15*time.Second, "the truncate logged", func() bool { return strings.Contains(p.Out.String(), "the outbox table was truncated") })

	// A table that inherits from the outbox.
	// (An identity is not inherited, its NOT NULL is.)
	execAll(e, "CREATE TABLE outbox_archive () INHERITS (outbox)",
		`DO $$ BEGIN EXECUTE format('ALTER TABLE outbox_archive ALTER COLUMN seq SET DEFAULT nextval(%L)', pg_get_serial_sequence('outbox', 'seq')); END $$`)
	testenv.Eventually(t, 15*time.Second, "the publication fixed", func() bool { return strings.Contains(p.Out.String(), "outbox_archive") })
	child := testenv.InsertInto(t, e, "outbox_archive", "order", testenv.ThisMonth, 3)
	testenv.AwaitIDs(t, e.Brokers, topic, child, 30*time.Second)

	// Renamed while streaming, and back.
	e.Exec("ALTER TABLE outbox RENAME TO outbox_renamed")
	renamed := testenv.InsertInto(t, e, "outbox_renamed", "order", testenv.ThisMonth, 3)
	testenv.AwaitIDs(t, e.Brokers, topic, renamed, 30*time.Second)
	if out, err := exited(t, p, 30*time.Second); err == nil || !strings.Contains(out, "outbox table does not exist: public.outbox") {
		t.Errorf("the relay went on without the table it is configured for: exit %v\n%s", err, out)
	}
	e.Exec("ALTER TABLE outbox_renamed RENAME TO outbox")
	p = e.Run(t, "--mode", "wal")
	last := e.Insert(testenv.NewRow("order", "o-1", "Returned", `{}`))
	testenv.AwaitIDs(t, e.Brokers, topic, last, 30*time.Second)
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("pgoutbox run: %v", err)
	}
	want := len(before) + len(after) + len(truncated) + len(child) + len(renamed) + len(last)
	if n := len(testenv.Drain(t, e.Brokers, topic, 0)); n < want {
		t.Errorf("%d records, want at least %d", n, want)
	}
}
