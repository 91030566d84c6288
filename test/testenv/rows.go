package testenv

// The default outbox table's rows (New migrates it) and pgoutbox's own
// tables, as the tests write and read them.

import (
	"context"
	"fmt"
	"testing"
)

// StateMode is the mode the state table says pipeline pgoutbox is in
// ("" before its first start).
func StateMode(e *Env) string {
	var m string
	e.Conn.QueryRow(context.Background(), "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&m)
	return m
}

// Unpublished returns which of ids have published_at unset.
func Unpublished(e *Env, ids ...string) map[string]bool {
	return IDsWhere(e, "published_at IS NULL", ids...)
}

// Present returns which of ids are still in the outbox.
func Present(e *Env, ids ...string) map[string]bool { return IDsWhere(e, "true", ids...) }

// IDsWhere returns which of ids are in the outbox with cond, an SQL
// condition on its columns, true.
func IDsWhere(e *Env, cond string, ids ...string) map[string]bool {
	e.T.Helper()
	rows, err := e.Conn.Query(context.Background(), "SELECT id::text FROM outbox WHERE ("+cond+") AND id::text = ANY($1)", ids)
	if err != nil {
		e.T.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			e.T.Fatal(err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		e.T.Fatal(err)
	}
	return out
}

// Backdate moves rows' created_at a month into the past.
func Backdate(e *Env, ids ...string) {
	e.T.Helper()
	if _, err := e.Conn.Exec(context.Background(), "UPDATE outbox SET created_at = now() - interval '30 days' WHERE id::text = ANY($1)", ids); err != nil {
		e.T.Fatal(err)
	}
}

// InsertEach commits n order rows, one transaction each, of aggregates
// agg0, agg1, ..., and returns their ids.
func InsertEach(e *Env, n int, agg string) []string {
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, e.Insert(NewRow("order", fmt.Sprint(agg, i), "Placed", `{}`))...)
	}
	return ids
}

// InsertThenDelete commits n transactions that each insert an outbox row and
// delete it again, the pattern Debezium recommends, and returns the ids.
func InsertThenDelete(e *Env, n int, aggType string) []string {
	e.T.Helper()
	ctx := context.Background()
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		tx, err := e.Conn.Begin(ctx)
		if err != nil {
			e.T.Fatal(err)
		}
		var id string
		if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, 'Placed', $3) RETURNING id::text`,
			aggType, fmt.Sprint("o-", i%5), fmt.Sprintf(`{"i":%d}`, i)).Scan(&id); err != nil {
			e.T.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM outbox WHERE id = $1", id); err != nil {
			e.T.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			e.T.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// FlushStats has the test connection's backend flush its table statistics
// (the delete counter) now, not when it next goes idle for 10 s.
func FlushStats(e *Env) {
	e.T.Helper()
	e.Exec("SELECT pg_stat_force_next_flush()")
	e.Exec("SELECT 1")
}

// NothingCreated fails unless the database holds no slot, no publication,
// none of pgoutbox's tables and no polling column on the outbox table.
func NothingCreated(t *testing.T, e *Env, table string) {
	t.Helper()
	var slots, pubs, cols int
	var state bool
	err := e.Conn.QueryRow(context.Background(), `SELECT
  (SELECT count(*) FROM pg_replication_slots), (SELECT count(*) FROM pg_publication),
  to_regclass('public.pgoutbox_state') IS NOT NULL,
  (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname IN ('seq', 'txid', 'published_at'))`, table).Scan(&slots, &pubs, &state, &cols)
	if err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 || state || cols != 0 {
		t.Fatalf("created: %d slots, %d publications, pgoutbox_state %v, %d polling columns", slots, pubs, state, cols)
	}
}
