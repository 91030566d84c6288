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

// A Debezium configuration's database.initial.statements run on the
// connections that read the user's tables and catalog, as Debezium runs
// them on its JDBC connections, and not on the replication connection nor
// on those of pgoutbox's own tables: here a search_path, a session
// setting and a DO block (';;' a ';' within it) creating the publication
// the configuration names and does not let pgoutbox create, on a table
// that holds rows; the rows already there and those written later
// arrive, and pgoutbox's state stays where its tables are.
func TestInitialStatementsFromDebeziumConfig(t *testing.T) {
	e := testenv.ExistingLedger(t, 50)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, "CREATE SCHEMA app; CREATE TABLE public.initial_runs (pid int)"); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--config", initialStatementsConfig(t, e,
		"SET search_path = app, public; INSERT INTO initial_runs VALUES (pg_backend_pid()); "+
			"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'ledger_events') "+
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
	// The connections that ran them recorded themselves; the
	// walsender and those of pgoutbox's own tables are not among them.
	var ran, wrong int
	if err := e.Conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM public.initial_runs),
  (SELECT count(*) FROM public.initial_runs r JOIN pg_stat_activity a ON a.pid = r.pid
   WHERE a.backend_type = 'walsender' OR a.query LIKE '%pgoutbox\_%')`).Scan(&ran, &wrong); err != nil {
		t.Fatal(err)
	}
	if ran < 2 || wrong != 0 {
		t.Errorf("%d connections ran the statements (want the start's checks and the relay's reads, 2 or more), %d of them the walsender's or pgoutbox's own tables'", ran, wrong)
	}
	var inApp, inPublic bool
	if err := e.Conn.QueryRow(ctx, "SELECT to_regclass('app.pgoutbox_state') IS NOT NULL, to_regclass('public.pgoutbox_state') IS NOT NULL").Scan(&inApp, &inPublic); err != nil {
		t.Fatal(err)
	}
	if inApp || !inPublic {
		t.Errorf("pgoutbox_state in app %v, in public %v: the statements' search_path moved pgoutbox's own tables", inApp, inPublic)
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
