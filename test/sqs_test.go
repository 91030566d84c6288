package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/mototest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A Debezium Server file whose sink is sqs runs through the binary
// against a database that already holds its table and rows, into a FIFO
// queue without content-based deduplication (on which Debezium Server's
// sink fails: it gives no deduplication id): the rows already there
// (snapshot.mode initial) and those written later are sent in order, in
// the configured group, each with its event id as deduplication id. An
// empty payload, which SQS does not take, is dead-lettered, its
// aggregate's next event held behind it, the others going on; the secret
// key is never logged. Exactly-once, a value format in bytes and a file
// without the queue are refused at start.
func TestSQSFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-2', 'Placed', '{"n": 2}')`)
	m := mototest.Start(t)
	q := m.CreateQueue(t, "orders.fifo", nil)
	base := testenv.DebeziumServer(t, e) + `debezium.sink.type=sqs
debezium.sink.sqs.region=us-east-1
debezium.sink.sqs.endpoint=` + m.Endpoint() + `
debezium.sink.sqs.fifo.message.group.id=orders
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.route.tombstone.on.empty.payload=true
debezium.format.value.schemas.enable=false
`
	props := base + "debezium.sink.sqs.queue.url=" + q + "\n"
	conf := testenv.WriteFile(t, "application.properties", props)
	env := kinesisEnv()
	for key, want := range map[string]string{
		"debezium.format.value=jsonbytearray\n": "the name of a Java array",
		"debezium.sink.type=sqs\n":              "without debezium.sink.sqs.queue.url",
	} {
		text := props + key
		if strings.Contains(key, "sink.type") {
			text = base
		}
		c := testenv.WriteFile(t, "refused.properties", text)
		if code, out := testenv.RunOnce(t, 30*time.Second, env, "run", "--config", c); code == 0 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want %q:\n%s", strings.TrimSpace(key), code, want, out)
		}
	}
	if code, out := testenv.RunOnce(t, 30*time.Second, env, "run", "--config", conf, "--delivery", "exactly-once"); code == 0 || !strings.Contains(out, "SQS has none") {
		t.Errorf("exactly-once: exit %d:\n%s", code, out)
	}
	p := testenv.StartBinaryEnv(t, env, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	ctx := context.Background()
	for _, row := range []string{
		`('11111111-0000-0000-0000-000000000003', 'Order', 'o-1', 'Paid', '{"n": 3}')`,
		`('11111111-0000-0000-0000-000000000004', 'Order', 'o-2', 'Cancelled', NULL)`,
		`('11111111-0000-0000-0000-000000000005', 'Order', 'o-2', 'Refunded', '{"n": 5}')`,
		`('11111111-0000-0000-0000-000000000006', 'Order', 'o-3', 'Placed', '{"n": 6}')`,
	} {
		if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES `+row); err != nil {
			t.Fatal(err)
		}
	}
	msgs := m.ReceiveAll(t, q, 4, time.Minute, p.Done())
	var got, dedup []string
	for _, msg := range msgs {
		got = append(got, msg.Body)
		dedup = append(dedup, msg.MessageDeduplicationId)
		if msg.MessageGroupId != "orders" {
			t.Errorf("group %q, want orders", msg.MessageGroupId)
		}
	}
	want := []string{`"{\"n\": 1}"`, `"{\"n\": 2}"`, `"{\"n\": 3}"`, `"{\"n\": 6}"`}
	if !slices.Equal(got, want) {
		t.Errorf("bodies %v, want %v in order, each once (o-2's empty payload and its next event held)\n%s", got, want, p.Out.String())
	}
	if len(dedup) > 0 && dedup[0] != "11111111-0000-0000-0000-000000000001" {
		t.Errorf("deduplication ids %v, want the event ids", dedup)
	}
	p.Stop(t)
	out, err := exec.Command(testenv.Bin(t), "dlq", "list", "--json", "--config", conf).Output()
	var list []struct {
		EventID string `json:"event_id"`
		Reason  string `json:"reason"`
	}
	if jerr := json.Unmarshal(out, &list); jerr != nil || len(list) != 2 || list[0].EventID != "11111111-0000-0000-0000-000000000004" ||
		!strings.Contains(list[0].Reason, "SQS takes no empty message") || list[1].EventID != "11111111-0000-0000-0000-000000000005" {
		t.Errorf("dlq list: %+v (%v, %v)\n%s", list, jerr, err, out)
	}
	if out := p.Out.String(); strings.Contains(out, "kinesis-s3cr3t-never-logged") ||
		!strings.Contains(out, `"sink":"sqs"`) || !strings.Contains(out, `"delivery":"at-least-once; a FIFO queue keeps each group's order`) {
		t.Errorf("the log shows the secret key, or its start line names neither the sink nor its guarantee:\n%s", out)
	}
}

// SQS not answering while events are sent (moto_server stopped with
// SIGSTOP for a few seconds), into a FIFO queue grouped by aggregate: the
// binary's requests time out, it starts again from its last confirmed
// position, and once SQS answers nothing is lost and each aggregate's
// events are in order. Every message carries its event id as
// deduplication id; moto drops a copy only while the first is still in
// the queue, and the test's consumer empties it as it goes, so copies are
// counted, not refused.
func TestSQSPausedWhileSending(t *testing.T) {
	// moto looks through the messages a queue holds on each send and
	// receive, and takes a FIFO queue's at about a hundred a second here:
	// a burst of a few seconds' sending, not the other sinks' load.
	const burst, inFlight = 600, 200
	e := testenv.New(t)
	e.Setup(e.Config())
	m := mototest.Start(t)
	q := m.CreateQueue(t, "events.fifo", nil)
	consumer := m.Consume(t, q)
	p := testenv.StartBinaryEnv(t, kinesisEnv(), e.RunArgs(e.URL, "--sink", "sqs", "--sqs-region", mototest.Region,
		"--sqs-endpoint", m.Endpoint(), "--sqs-queue-url", q, "--sqs-group-by-key", "--sqs-timeout", "2s",
		"--mode", "wal", "--max-buffered-records", fmt.Sprint(inFlight))...)
	pauseUnderFIFOLoad(t, e, m, consumer, p, burst, inFlight)
}

// pauseUnderFIFOLoad commits burst events, pauses moto for five seconds
// once the consumer has the first, and checks what it received once
// every committed event arrived: structured CloudEvents in their
// aggregate's group with their event id as deduplication id, nothing
// lost, no order violation, at most twice inFlight copies, and the
// pause seen by p as a failed request.
func pauseUnderFIFOLoad(t *testing.T, e *testenv.Env, m *mototest.Server, consumer *mototest.Consumer, p *testenv.Proc, burst, inFlight int) {
	t.Helper()
	committed := insertCommits(t, e, burst)
	testenv.Eventually(t, time.Minute, "the first events received", func() bool {
		msgs, _ := consumer.Got()
		return len(msgs) >= 50
	})
	m.Pause(t)
	time.Sleep(5 * time.Second)
	m.Continue(t)
	var events []testenv.LoadEvent
	testenv.Eventually(t, 2*time.Minute, "every committed event received", func() bool {
		msgs, err := consumer.Got()
		if err != nil {
			t.Fatalf("receiving: %v", err)
		}
		events = events[:0]
		for i, msg := range msgs {
			var ev testenv.LoadEvent // a structured CloudEvent
			if err := json.Unmarshal([]byte(msg.Body), &ev); err != nil {
				t.Fatalf("message %d: %v: %s", i, err, msg.Body)
			}
			if msg.MessageGroupId != ev.PartitionKey || msg.MessageDeduplicationId != ev.ID {
				t.Fatalf("message %d: group %q, deduplication id %q; event %s of %s", i, msg.MessageGroupId, msg.MessageDeduplicationId, ev.ID, ev.PartitionKey)
			}
			events = append(events, ev)
		}
		return len(testenv.Missing(events, committed)) == 0
	})
	time.Sleep(time.Second) // a late copy would show
	rep, _ := testenv.CheckEvents(t, events, committed)
	t.Log(rep)
	if rep.Lost != 0 || rep.OrderViolations != 0 {
		t.Errorf("%v: want nothing lost, no order violation", rep)
	}
	if rep.Duplicates > 2*inFlight {
		t.Errorf("%d duplicates, want at most %d", rep.Duplicates, 2*inFlight)
	}
	if !strings.Contains(p.Out.String(), `"msg":"reconnecting"`) {
		t.Errorf("the pause failed no request: it tested nothing\n%s", p.Out.String())
	}
}
