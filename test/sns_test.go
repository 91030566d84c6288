package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/mototest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A Debezium Server file whose sink is sns runs through the binary
// against a database that already holds its table and rows, into a FIFO
// topic without content-based deduplication (on which Debezium Server's
// sink fails: it gives no deduplication id): the rows already there
// (snapshot.mode initial) and those written later are published, each
// aggregate's in order, in the group of its aggregate (the record's key),
// the payload as it is (the sink bypasses the JSON converter for a text
// value), the headers as attributes, each with its event id as
// deduplication id. An empty payload, which SNS does not take, is
// dead-lettered, its aggregate's next event held behind it, the others
// going on; the secret key is never logged. Exactly-once and change
// events as CloudEvents, which pgoutbox does not write for this sink, are
// refused at start.
func TestSNSFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-2', 'Placed', '{"n": 2}')`)
	m := mototest.Start(t)
	arn, q := m.CreateTopic(t, "orders.fifo", nil)
	props := testenv.DebeziumServer(t, e) + `debezium.sink.type=sns
debezium.sink.sns.region=us-east-1
debezium.sink.sns.endpoint=` + m.Endpoint() + `
debezium.sink.sns.topic.arn=` + arn + `
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.route.tombstone.on.empty.payload=true
debezium.transforms.outbox.table.fields.additional.placement=type:header:eventType
`
	conf := testenv.WriteFile(t, "application.properties", props)
	env := kinesisEnv()
	var changeEvents strings.Builder // the file without the router
	for _, line := range strings.SplitAfter(props, "\n") {
		if !strings.HasPrefix(line, "debezium.transforms") {
			changeEvents.WriteString(line)
		}
	}
	refused := testenv.WriteFile(t, "refused.properties", changeEvents.String()+"debezium.format.value=cloudevents\n")
	if code, out := testenv.RunOnce(t, 30*time.Second, env, "run", "--config", refused); code == 0 || !strings.Contains(out, "with debezium.sink.type=sns and change events") {
		t.Errorf("cloudevents without the router: exit %d:\n%s", code, out)
	}
	if code, out := testenv.RunOnce(t, 30*time.Second, env, "run", "--config", conf, "--delivery", "exactly-once"); code == 0 || !strings.Contains(out, "SNS has none") {
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
	groups := map[string][]string{}
	for _, msg := range msgs {
		groups[msg.MessageGroupId] = append(groups[msg.MessageGroupId], msg.Body)
		if msg.MessageDeduplicationId != msg.MessageAttributes["id"] || msg.MessageAttributes["eventType"] == "" ||
			msg.MessageAttributes["__debezium.context.connectorLogicalName"] != "dbserver1" {
			t.Errorf("%s: deduplication id %q, attributes %v; want the event id, its id, eventType and Debezium's context headers",
				msg.Body, msg.MessageDeduplicationId, msg.MessageAttributes)
		}
	}
	want := map[string][]string{"o-1": {`{"n": 1}`, `{"n": 3}`}, "o-2": {`{"n": 2}`}, "o-3": {`{"n": 6}`}}
	if len(msgs) != 4 || fmt.Sprint(groups) != fmt.Sprint(want) {
		t.Errorf("groups %v, want %v in order, each once (o-2's empty payload and its next event held)\n%s", groups, want, p.Out.String())
	}
	p.Stop(t)
	out, err := exec.Command(testenv.Bin(t), "dlq", "list", "--json", "--config", conf).Output()
	var list []struct {
		EventID string `json:"event_id"`
		Reason  string `json:"reason"`
	}
	if jerr := json.Unmarshal(out, &list); jerr != nil || len(list) != 2 || list[0].EventID != "11111111-0000-0000-0000-000000000004" ||
		!strings.Contains(list[0].Reason, "SNS takes no empty message") || list[1].EventID != "11111111-0000-0000-0000-000000000005" {
		t.Errorf("dlq list: %+v (%v, %v)\n%s", list, jerr, err, out)
	}
	if out := p.Out.String(); strings.Contains(out, "kinesis-s3cr3t-never-logged") ||
		!strings.Contains(out, `"sink":"sns"`) || !strings.Contains(out, `"delivery":"at-least-once; a FIFO topic keeps each group's order`) {
		t.Errorf("the log shows the secret key, or its start line names neither the sink nor its guarantee:\n%s", out)
	}
}

// SNS not answering while events are published (moto_server stopped
// with SIGSTOP for a few seconds), to a FIFO topic by flags: the binary's
// requests time out, it starts again from its last confirmed position,
// and once SNS answers nothing is lost and each aggregate's events are in
// order, in the aggregate's group. moto's FIFO topic passes copies on to
// the queue the test's consumer empties: they are counted, not refused.
func TestSNSPausedWhileSending(t *testing.T) {
	// moto fans each message out to the queue and looks through the
	// messages a FIFO queue holds on each send: a burst of a few seconds'
	// sending, not the other sinks' load.
	const burst, inFlight = 600, 200
	e := testenv.New(t)
	e.Setup(e.Config())
	m := mototest.Start(t)
	arn, q := m.CreateTopic(t, "events.fifo", nil)
	consumer := m.Consume(t, q)
	p := testenv.StartBinaryEnv(t, kinesisEnv(), e.RunArgs(e.URL, "--sink", "sns", "--sns-region", mototest.Region,
		"--sns-endpoint", m.Endpoint(), "--sns-topic-arn", arn, "--sns-timeout", "2s",
		"--mode", "wal", "--max-buffered-records", fmt.Sprint(inFlight))...)
	pauseUnderFIFOLoad(t, e, m, consumer, p, burst, inFlight)
}
