package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

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

// A single-table pipeline's state from before this version (no
// snapshot_pending column, schema version 11) reads back after the
// upgrade: run brings the tables up to date itself, continues from the
// slot, takes no snapshot even when asked for one (the pipeline has
// started before), and status shows the one table as before.
func TestUpgradeKeepsSingleTableState(t *testing.T) {
	e := testenv.ExistingLedger(t, 200)
	ctx := context.Background()
	topic := "outbox.event.TRANSACTION"
	p := e.Run(t, append([]string{"--mode", "wal"}, testenv.LedgerFlags...)...)
	e.AwaitSlotActive(t, "pgoutbox")
	first := <-testenv.WriteLedger(t, e, 5)
	testenv.AwaitIDs(t, e.Brokers, topic, first, 30*time.Second)
	p.Stop(t)
	for _, sql := range []string{
		"ALTER TABLE pgoutbox_state DROP COLUMN snapshot_pending",
		"UPDATE pgoutbox_schema_version SET version = 11",
	} {
		if _, err := e.Conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	stopped := <-testenv.WriteLedger(t, e, 5) // while no relay runs: in the slot
	p = e.Run(t, append([]string{"--mode", "wal", "--snapshot-mode", "initial"}, testenv.LedgerFlags...)...)
	e.AwaitSlotActive(t, "pgoutbox")
	after := <-testenv.WriteLedger(t, e, 5)
	want := append(append(append([]string{}, first...), stopped...), after...)
	testenv.AwaitIDs(t, e.Brokers, topic, want, 30*time.Second)
	p.Stop(t)
	testenv.CheckOnce(t, testenv.Drain(t, e.Brokers, topic, 0), want, testenv.EventID(t))
	var version int
	if err := e.Conn.QueryRow(ctx, "SELECT version FROM pgoutbox_schema_version").Scan(&version); err != nil || version < 12 {
		t.Errorf("schema version %d after the upgrade (err %v)", version, err)
	}
	out, err := exec.Command(testenv.Bin(t), "status", "--json", "--database-url", e.URL).Output()
	var st struct {
		Table  string   `json:"table"`
		Tables []string `json:"tables"`
	}
	if jerr := json.Unmarshal(out, &st); jerr != nil {
		t.Fatalf("status --json: %v (%v)\n%s", jerr, err, out)
	}
	if st.Table != "public.outbox_event" || len(st.Tables) != 1 || st.Tables[0] != "public.outbox_event" {
		t.Errorf("status after the upgrade: table %q, tables %q", st.Table, st.Tables)
	}
}

// Migration 008 on a table that already holds copies of dead letters (as
// older versions wrote them on each retry): nothing is deleted, each event
// keeps one entry (a resolved one if any was replayed or skipped, else the
// first), extra open copies are resolved as duplicates, and from then on a
// second insert for an event does nothing.
func TestMigrationResolvesDuplicateDeadLetters(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `DROP INDEX pgoutbox_dead_letter_once;
ALTER TABLE pgoutbox_dead_letter DROP COLUMN duplicate_of;
UPDATE pgoutbox_schema_version SET version = 7`); err != nil {
		t.Fatal(err)
	}
	insert := func(event string, resolution string) int64 {
		var id int64
		var replayed any
		if resolution != "" {
			replayed = time.Now()
		}
		if err := e.Conn.QueryRow(ctx, `INSERT INTO pgoutbox_dead_letter (pipeline, outbox_table, event_id, aggregate_id, reason, row_data, replayed_at, resolution)
VALUES ('pgoutbox', 'public.outbox', $1, 'agg', 'too large', '{}', $2, nullif($3, '')) RETURNING id`, event, replayed, resolution).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	a1, a2, a3 := insert("a", ""), insert("a", ""), insert("a", "")
	b1, b2, b3 := insert("b", ""), insert("b", "replayed"), insert("b", "skipped")
	c1 := insert("c", "")
	n1, n2 := insert("", ""), insert("", "")
	if _, err := migrations.Migrate(ctx, e.Conn, migrations.Options{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	type entry struct {
		open        bool
		resolution  string
		duplicateOf int64
	}
	got := map[int64]entry{}
	rows, err := e.Conn.Query(ctx, "SELECT id, replayed_at IS NULL, coalesce(resolution, ''), coalesce(duplicate_of, 0) FROM pgoutbox_dead_letter")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var en entry
		if err := rows.Scan(&id, &en.open, &en.resolution, &en.duplicateOf); err != nil {
			t.Fatal(err)
		}
		got[id] = en
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	want := map[int64]entry{
		a1: {open: true}, a2: {resolution: "duplicate", duplicateOf: a1}, a3: {resolution: "duplicate", duplicateOf: a1},
		b1: {resolution: "duplicate", duplicateOf: b2}, b2: {resolution: "replayed"}, b3: {resolution: "skipped", duplicateOf: b2},
		c1: {open: true}, n1: {open: true}, n2: {open: true},
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries after the migration, want %d: nothing may be deleted", len(got), len(want))
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("entry %d: %+v, want %+v", id, got[id], w)
		}
	}
	tag, err := e.Conn.Exec(ctx, `INSERT INTO pgoutbox_dead_letter (pipeline, outbox_table, event_id, aggregate_id, reason, row_data)
VALUES ('pgoutbox', 'public.outbox', 'a', 'agg', 'again', '{}') ON CONFLICT DO NOTHING`)
	if err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("a second dead letter for event a: %v, %d rows", err, tag.RowsAffected())
	}
}
