package test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// heartbeatConfig is a Debezium Server file for the ledger's outbox with
// the heartbeat on and query as its action query.
func heartbeatConfig(t *testing.T, e *testenv.Env, query string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "application.properties")
	props := testenv.DebeziumServerKafka(t, e) + `debezium.source.topic.prefix=ledger
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox_event
debezium.source.snapshot.mode=no_data
debezium.source.heartbeat.interval.ms=200
debezium.source.heartbeat.action.query=` + query + `
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.table.field.event.type=event_type
debezium.transforms.outbox.route.by.field=aggregate_type
`
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A Debezium configuration's heartbeat.action.query runs at every
// heartbeat while pgoutbox streams, several statements in one, on a table
// that already holds rows, beside the events it publishes.
func TestHeartbeatActionQueryFromDebeziumConfig(t *testing.T) {
	e := testenv.ExistingLedger(t, 100)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, "CREATE TABLE debezium_heartbeat (id int PRIMARY KEY, beats int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--config", heartbeatConfig(t, e,
		"INSERT INTO debezium_heartbeat VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET beats = debezium_heartbeat.beats + 1; UPDATE debezium_heartbeat SET beats = beats + 1000 WHERE id = 1"))
	e.AwaitSlotActive(t, "debezium")
	want := <-testenv.WriteLedger(t, e, 5)
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.TRANSACTION"}, len(want), 30*time.Second)
	var beats int
	testenv.Eventually(t, 30*time.Second, "three beats of the action query, both statements each", func() bool {
		err := e.Conn.QueryRow(ctx, "SELECT beats FROM debezium_heartbeat WHERE id = 1").Scan(&beats)
		return err == nil && beats >= 3003
	})
	p.Stop(t)
	if beats%1001 != 0 {
		// Each beat runs both statements, in one transaction.
		t.Errorf("beats %d: the statements did not run together", beats)
	}
}

// An action query naming a table that does not exist stops pgoutbox,
// naming the option, as it fails Debezium's task; nothing is lost.
func TestHeartbeatActionQueryMissingTable(t *testing.T) {
	e := testenv.ExistingLedger(t, 10)
	p := e.Run(t, "--config", heartbeatConfig(t, e, "UPDATE no_such_heartbeat SET beat = now()"))
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60s after its action query failed on a missing table:\n%s", p.Out)
	}
	if out := p.Out.String(); !strings.Contains(out, "heartbeat.action.query") || !strings.Contains(out, "no_such_heartbeat") {
		t.Errorf("the exit does not name the option and the table:\n%s", out)
	}
	if p.Err() == nil {
		t.Errorf("exit 0 after a failed action query")
	}
}
