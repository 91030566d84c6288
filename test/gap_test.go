package test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// lastSeq is the last position the outbox's seq sequence handed out.
func lastSeq(e *testenv.Env) int64 {
	e.T.Helper()
	var n int64
	if err := e.Conn.QueryRow(context.Background(),
		"SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('public.outbox', 'seq')::regclass), 0)").Scan(&n); err != nil {
		e.T.Fatal(err)
	}
	return n
}

// rollBack begins n transactions that each insert an outbox row, and rolls
// them back: positions drawn, no row, no delete.
func rollBack(e *testenv.Env, n int) {
	e.T.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		tx, err := e.Conn.Begin(ctx)
		if err != nil {
			e.T.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-rb', 'Placed', '{}')`); err != nil {
			e.T.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			e.T.Fatal(err)
		}
	}
}

// awaitLoss waits until status reports at least want rows lost, then until
// the statistics hold every delete and the relay has counted again, and
// checks the exact figure everywhere it is shown: status (non-zero exit,
// the problem named), the ERROR line with count and range, the metric.
func awaitLoss(t *testing.T, e *testenv.Env, p *testenv.Proc, metrics string, want int64) {
	t.Helper()
	var lost *testenv.LostStatus
	testenv.Eventually(t, 90*time.Second, fmt.Sprintf("status reporting %d rows lost", want), func() bool {
		lost, _, _ = testenv.LostStatusOf(t, e)
		return lost != nil && lost.Rows >= want
	})
	// A figure above want would come from deletes counted late: wait past
	// the statistics' flush and the relay's next count before judging.
	time.Sleep(13 * time.Second)
	lost, problems, ok := testenv.LostStatusOf(t, e)
	if lost.Rows != want {
		t.Errorf("status reports up to %d rows lost, want %d", lost.Rows, want)
	}
	if ok || !strings.Contains(strings.Join(problems, "\n"), "deleted before polling published them") {
		t.Errorf("status exit ok=%t, problems %q: want a non-zero exit naming the loss", ok, problems)
	}
	out := p.Out.String()
	if !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "deleted before polling published them") ||
		!strings.Contains(out, `"lost_up_to":`) || !strings.Contains(out, `"seq_from":`) {
		t.Errorf("no ERROR line with the count and range:\n%s", out)
	}
	m := testenv.Scrape(t, "http://"+metrics)
	if got := m[`pgoutbox_events_lost_deleted_total{table="public.outbox"}`]; got != float64(want) {
		t.Errorf("pgoutbox_events_lost_deleted_total = %v, want %d", got, want)
	}
	t.Logf("status: up to %d rows lost, seq %d-%d", lost.Rows, lost.FromSeq, lost.ToSeq)
}

// Rows inserted and deleted in one transaction while a --mode poll relay
// was stopped: the next start judges the positions drawn meanwhile and
// reports exactly those rows lost.
func TestDeletedWhilePollRelayStoppedIsReported(t *testing.T) {
	e := testenv.New(t)
	args := []string{"--mode", "poll", "--poll-interval", "100ms"}
	p := e.Run(t, args...)
	testenv.Eventually(t, 15*time.Second, "polling", func() bool { return strings.Contains(p.Out.String(), `"msg":"polling"`) })
	kept := e.Insert(testenv.NewRow("order", "o-kept", "Placed", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", kept, 30*time.Second)
	p.Stop(t)

	testenv.InsertThenDelete(e, 200, "order")
	kept = append(kept, e.Insert(testenv.NewRow("order", "o-kept", "Placed", `{}`))...)

	addr := testenv.FreeAddr(t)
	p = e.Run(t, append(args, "--metrics-addr", addr)...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", kept, 30*time.Second)
	awaitLoss(t, e, p, addr, 200)
}

// Auto mode streams the WAL, which publishes rows deleted in their own
// transaction; the relay stops, its slot is dropped, and more such rows are
// written. The restart replaces the slot and polls what committed before
// it: the rows written while the slot was gone are reported lost, exactly
// those, and none of the rows the WAL published before.
func TestDeletedWhileSlotLostIsReported(t *testing.T) {
	e := testenv.New(t)
	args := []string{"--mode", "auto", "--poll-interval", "100ms"}
	p := e.Run(t, args...)
	testenv.Eventually(t, 15*time.Second, "streaming", func() bool { return strings.Contains(p.Out.String(), `"msg":"streaming"`) })
	streamed := testenv.InsertThenDelete(e, 100, "order")
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", streamed, 30*time.Second)
	last := lastSeq(e)
	testenv.Eventually(t, 30*time.Second, "the WAL session accounting for the streamed rows", func() bool {
		var n *int64
		e.Conn.QueryRow(context.Background(), "SELECT gap_seq FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&n)
		return n != nil && *n >= last
	})
	p.Stop(t)
	e.Exec("SELECT pg_drop_replication_slot('pgoutbox')")

	testenv.InsertThenDelete(e, 150, "order")
	kept := e.Insert(testenv.NewRow("order", "o-kept", "Placed", `{}`))

	addr := testenv.FreeAddr(t)
	p = e.Run(t, append(args, "--metrics-addr", addr)...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", kept, 30*time.Second)
	awaitLoss(t, e, p, addr, 150)
	testenv.Eventually(t, 30*time.Second, "streaming after the handoff", func() bool {
		return strings.Count(p.Out.String(), `"msg":"streaming"`) > 0
	})
}

// While a --mode poll relay is stopped, a cleanup job deletes the rows it
// published, and writers roll back inserts: neither is a loss. Rows
// inserted and deleted in one transaction meanwhile are, and exactly they
// are reported. Writers keep committing (and rolling back) while the relay
// starts again, so that transactions are open when it reads where
// insertion stands: their rows are not taken for missing ones.
func TestDeletedWhileStoppedNoFalseReport(t *testing.T) {
	e := testenv.New(t)
	args := []string{"--mode", "poll", "--poll-interval", "100ms"}
	p := e.Run(t, args...)
	testenv.Eventually(t, 15*time.Second, "polling", func() bool { return strings.Contains(p.Out.String(), `"msg":"polling"`) })
	published := e.InsertN("order", 60)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", published, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "the published rows marked", func() bool {
		return len(testenv.IDsWhere(e, "published_at IS NOT NULL", published...)) == len(published)
	})
	p.Stop(t)

	tag, err := e.Conn.Exec(context.Background(), "DELETE FROM outbox WHERE published_at IS NOT NULL")
	if err != nil || tag.RowsAffected() != int64(len(published)) {
		t.Fatalf("cleanup deleted %d rows (%v), want %d", tag.RowsAffected(), err, len(published))
	}
	rollBack(e, 30)
	testenv.InsertThenDelete(e, 40, "order")
	rollBack(e, 10)
	kept := e.Insert(testenv.NewRow("order", "o-kept", "Placed", `{}`))

	load := e.StartLoad(t, 3)
	time.Sleep(500 * time.Millisecond) // the load runs before the restart, and across it
	addr := testenv.FreeAddr(t)
	p = e.Run(t, append(args, "--metrics-addr", addr)...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", kept, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "the gap judged", func() bool {
		return strings.Contains(p.Out.String(), "judging rows deleted before publication")
	})
	committed := load.Finish()
	rep := testenv.Check(t, e.Brokers, "outbox.event.account", committed)
	t.Logf("load: %v; %d rolled back", rep, load.RolledBack())
	if rep.Lost != 0 || load.RolledBack() == 0 {
		t.Fatalf("the load lost %d events or rolled nothing back (%d)", rep.Lost, load.RolledBack())
	}
	awaitLoss(t, e, p, addr, 40)
}

// The statistics reset while the relay was stopped: the delete counter no
// longer covers the gap, so the relay says it cannot judge it, and reports
// no loss it cannot prove; rows deleted after the restart are judged again.
func TestDeletedWhileStoppedStatsResetCannotJudge(t *testing.T) {
	e := testenv.New(t)
	args := []string{"--mode", "poll", "--poll-interval", "100ms"}
	p := e.Run(t, args...)
	testenv.Eventually(t, 15*time.Second, "polling", func() bool { return strings.Contains(p.Out.String(), `"msg":"polling"`) })
	kept := e.InsertN("order", 20)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", kept, 30*time.Second)
	p.Stop(t)

	testenv.InsertThenDelete(e, 30, "order")
	e.Exec("SELECT pg_stat_reset()")
	kept = append(kept, e.Insert(testenv.NewRow("order", "o-kept", "Placed", `{}`))...)

	addr := testenv.FreeAddr(t)
	p = e.Run(t, append(args, "--metrics-addr", addr)...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", kept, 30*time.Second)
	testenv.Eventually(t, 15*time.Second, "the relay saying it cannot judge the gap", func() bool {
		return strings.Contains(p.Out.String(), "cannot judge whether outbox rows were deleted") &&
			strings.Contains(p.Out.String(), "statistics were reset")
	})
	time.Sleep(13 * time.Second) // past the statistics' flush and a recount
	if lost, problems, _ := testenv.LostStatusOf(t, e); lost != nil {
		t.Fatalf("a loss reported across a statistics reset: %+v, problems %q", lost, problems)
	}
	// The new account starts at the restart: rows deleted now are judged.
	testenv.InsertThenDelete(e, 25, "order")
	awaitLoss(t, e, p, addr, 25)
}

// A --mode poll relay is killed (SIGKILL) while it publishes a backlog
// written after it started; a cleanup job then deletes the rows it had
// marked published, inserts roll back, and rows are inserted and deleted in
// one transaction. The rows it published are in the saved account (they
// are added before they are produced), so only the deleted unpublished rows
// are reported, exactly.
func TestDeletedAfterSIGKILLNoFalseReport(t *testing.T) {
	e := testenv.New(t)
	args := []string{"--mode", "poll", "--poll-interval", "100ms", "--batch-size", "20"}
	p := e.Run(t, args...)
	testenv.Eventually(t, 15*time.Second, "polling", func() bool { return strings.Contains(p.Out.String(), `"msg":"polling"`) })
	e.Exec(`INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'order', 'o-' || (g % 7), 'Placed', '{}' FROM generate_series(1, 3000) g`)
	count := func(cond string) int {
		var n int
		e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox WHERE "+cond).Scan(&n)
		return n
	}
	testenv.Eventually(t, 30*time.Second, "part of the backlog published", func() bool { return count("published_at IS NOT NULL") >= 300 })
	p.Signal(t, syscall.SIGKILL)
	marked := count("published_at IS NOT NULL")
	var doubtFrom, doubtTo *int64
	e.Conn.QueryRow(context.Background(), "SELECT gap_batch_from, gap_batch_to FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&doubtFrom, &doubtTo)
	if doubtFrom != nil && doubtTo != nil {
		t.Logf("killed with the batch of seq %d-%d in doubt", *doubtFrom, *doubtTo)
	}
	if marked == 3000 {
		t.Fatal("the whole backlog was published before the kill: the test would prove nothing")
	}

	tag, err := e.Conn.Exec(context.Background(), "DELETE FROM outbox WHERE published_at IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	rollBack(e, 20)
	testenv.InsertThenDelete(e, 30, "order")
	kept := e.Insert(testenv.NewRow("order", "o-kept", "Placed", `{}`))
	t.Logf("killed with %d of 3000 marked; the cleanup deleted %d", marked, tag.RowsAffected())

	addr := testenv.FreeAddr(t)
	p = e.Run(t, append(args, "--metrics-addr", addr)...)
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", kept, 60*time.Second)
	awaitLoss(t, e, p, addr, 30)
}
