package test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// initialStatementsConfig is a Kafka Connect configuration of the
// ledger's outbox whose database.initial.statements are stmts, on a
// publication it does not let pgoutbox create
// (publication.autocreate.mode=disabled).
func initialStatementsConfig(t *testing.T, e *testenv.Env, stmts string) string {
	t.Helper()
	host, port, user, db := testenv.DebeziumDB(t, e)
	conf, err := json.Marshal(map[string]any{"name": "ledger-outbox", "config": map[string]string{
		"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname": host, "database.port": port, "database.user": user, "database.dbname": db,
		"topic.prefix": "ledger", "plugin.name": "pgoutput",
		"table.include.list":                       "public.outbox_event",
		"publication.name":                         "ledger_events",
		"publication.autocreate.mode":              "disabled",
		"database.initial.statements":              stmts,
		"transforms":                               "outbox",
		"transforms.outbox.type":                   "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.field.event.key":  "aggregate_id",
		"transforms.outbox.table.field.event.type": "event_type",
		"transforms.outbox.route.by.field":         "aggregate_type",
	}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "connector.json")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A Debezium configuration's database.initial.statements run on each of
// pgoutbox's connections to the database but the replication connection,
// as Debezium runs them on its JDBC connections: here a session setting
// and a DO block (';;' a ';' within it) creating the publication the
// configuration names and does not let pgoutbox create, on a table that
// holds rows; the rows already there and those written later arrive.
func TestInitialStatementsFromDebeziumConfig(t *testing.T) {
	e := testenv.ExistingLedger(t, 50)
	ctx := context.Background()
	p := e.Run(t, "--config", initialStatementsConfig(t, e,
		"SET application_name = 'ledger-relay'; DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'ledger_events') "+
			"THEN CREATE PUBLICATION ledger_events FOR TABLE public.outbox_event WITH (publish = 'insert');; END IF;; END$$;"))
	e.AwaitSlotActive(t, "debezium")
	want := <-testenv.WriteLedger(t, e, 5)
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.TRANSACTION"}, 50+len(want), 30*time.Second)

	var publish string
	if err := e.Conn.QueryRow(ctx, "SELECT CASE WHEN pubinsert AND NOT pubupdate THEN 'insert' ELSE 'more' END FROM pg_publication WHERE pubname = 'ledger_events'").Scan(&publish); err != nil {
		t.Fatalf("the publication the statements create: %v", err)
	}
	if publish != "insert" {
		t.Errorf("publication ledger_events publishes %s, want the statement's insert", publish)
	}
	// The relay's regular connections ran them; its walsender did not.
	var regular, walsenders int
	if err := e.Conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE backend_type = 'client backend' AND application_name = 'ledger-relay'),
  count(*) FILTER (WHERE backend_type = 'walsender' AND application_name = 'ledger-relay')
FROM pg_stat_activity`).Scan(&regular, &walsenders); err != nil {
		t.Fatal(err)
	}
	if regular == 0 || walsenders != 0 {
		t.Errorf("connections with the statement's application_name: %d regular, %d replication; want some and none", regular, walsenders)
	}
	p.Stop(t)
}

// A statement the server refuses as written stops pgoutbox at start,
// naming the option, before it creates anything, as it fails Debezium's
// task.
func TestInitialStatementsRefused(t *testing.T) {
	e := testenv.ExistingLedger(t, 10)
	out, ok := testenv.CLIOutput(t, e.RunArgs(e.URL, "--config", initialStatementsConfig(t, e, "SET search_path = public; SELECT * FROM no_such_table"))...)
	if ok || !strings.Contains(out, "initial statement 2 (database.initial.statements") || !strings.Contains(out, "no_such_table") {
		t.Errorf("exit 0 %v, want the second statement and its table named:\n%s", ok, out)
	}
	var slots int
	if err := e.Conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots").Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots != 0 {
		t.Errorf("%d slots after the refusal, want none", slots)
	}
}
