package test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A table and columns named as EF Core and MassTransit name them, in a
// schema with a dash: migrate, slot create, run in WAL and in poll mode,
// and status, with names written as in SQL.
func TestQuotedNames(t *testing.T) {
	e := testenv.NewBare(t, `CREATE SCHEMA "my-app";
CREATE TABLE "my-app"."OutboxMessage" (
  "SequenceNumber" bigserial PRIMARY KEY,
  "MessageId" uuid NOT NULL DEFAULT gen_random_uuid(),
  "AggregateType" text NOT NULL,
  "AggregateId" text NOT NULL,
  "MessageType" text NOT NULL,
  "Body" jsonb NOT NULL,
  "SentTime" timestamptz NOT NULL DEFAULT now())`)
	ctx := context.Background()
	conf := testenv.WriteFile(t, "pgoutbox.conf", `database-url = `+e.URL+`
kafka-brokers = `+strings.Join(e.Brokers, ",")+`
table = "my-app"."OutboxMessage"
slot = ef_outbox
publication = ef_outbox
column-id = MessageId
column-aggregate-type = AggregateType
column-aggregate-id = AggregateId
column-type = MessageType
column-payload = Body
column-time = SentTime
poll-interval = 50ms
status-interval = 100ms
heartbeat-interval = 200ms
log-format = json
`)
	for _, cmd := range [][]string{{"migrate"}, {"slot", "create"}} {
		if out, ok := testenv.CLIOutput(t, append(cmd, "--config", conf)...); !ok {
			t.Fatalf("%v: %s", cmd, out)
		}
	}
	insert := func(agg string) string {
		var id string
		if err := e.Conn.QueryRow(ctx, `INSERT INTO "my-app"."OutboxMessage" ("AggregateType", "AggregateId", "MessageType", "Body")
VALUES ('Order', $1, 'OrderSubmitted', '{"n": 1}') RETURNING "MessageId"::text`, agg).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	n := 0
	for _, mode := range []string{"wal", "poll"} {
		p := testenv.StartBinary(t, "run", "--config", conf, "--mode", mode)
		if mode == "wal" {
			e.AwaitSlotActive(t, "ef_outbox")
		}
		id := insert("o-" + mode)
		n++
		found := false
		for _, r := range kafkatest.Consume(t, e.Brokers, []string{"outbox.event.Order"}, n, 30*time.Second) {
			ev := testenv.DecodeEvent(t, r)
			found = found || ev.ID == id && ev.Source == "/pgoutbox/my-app.OutboxMessage" && ev.PartitionKey == "o-"+mode
		}
		if !found {
			t.Errorf("%s: event %s not published", mode, id)
		}
		// Polling publishes again what the WAL published since its last
		// floor: the next mode may find one more.
		n = len(testenv.Drain(t, e.Brokers, "outbox.event.Order", 0))
		if err := p.Signal(t, syscall.SIGTERM); err != nil {
			t.Fatalf("run --mode %s: %v\n%s", mode, err, p.Out)
		}
	}
	out, ok := testenv.CLIOutput(t, "status", "--config", conf)
	if !ok || !strings.Contains(out, "pipeline     ef_outbox (my-app.OutboxMessage)") || strings.Contains(out, "problem:") {
		t.Errorf("status (exit 0 %v):\n%s", ok, out)
	}
}
