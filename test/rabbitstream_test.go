package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// checkStream compares a stream's messages, in order, with what
// committed: nothing lost, message-id the aggregate id (the record's
// key), and per aggregate the first copy of each event in commit order.
func checkStream(t *testing.T, msgs []rabbitmqtest.StreamMessage, committed map[string]int) (testenv.Report, []int) {
	t.Helper()
	var events []testenv.LoadEvent
	for i, m := range msgs {
		var ev testenv.LoadEvent // a structured CloudEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("message %d: %v: %s", i, err, m.Data)
		}
		if m.MessageID != ev.PartitionKey {
			t.Errorf("message %d: message-id %q, aggregate id %q", i, m.MessageID, ev.PartitionKey)
		}
		events = append(events, ev)
	}
	return testenv.CheckEvents(t, events, committed)
}

// RabbitMQ killed (SIGKILL) under load and started again on its data,
// streaming and polling: the binary publishes to a stream over RabbitMQ's
// stream protocol with many messages in flight, loses nothing, keeps each
// aggregate's order, and what it sends again is a copy of what was in
// flight at the kill (at-least-once).
func TestRabbitStreamServerKilledUnderLoad(t *testing.T) {
	const burst, inFlight = 10000, 1000
	for _, mode := range []string{"wal", "poll"} {
		t.Run(mode, func(t *testing.T) {
			e := testenv.New(t)
			e.Setup(e.Config())
			s := rabbitmqtest.Start(t, rabbitmqtest.Options{Streams: true})
			p := e.Run(t, "--sink", "rabbitmqstream", "--rabbitmqstream-url", s.StreamURL, "--rabbitmqstream-stream", "events",
				"--rabbitmqstream-ack-timeout", "5s", "--mode", mode, "--poll-interval", "50ms", "--max-buffered-records", fmt.Sprint(inFlight))
			load := e.StartLoad(t, 4)
			// The stream's definition reaches the node's disk a moment
			// after it is created: the kill comes later.
			testenv.Eventually(t, 30*time.Second, "the stream created", func() bool { return len(s.ReadStream("events", 1, time.Second)) > 0 })
			time.Sleep(2 * time.Second)
			before := len(s.ReadStream("events", 0, 0))
			bulk := insertCommits(t, e, burst)
			testenv.Eventually(t, 30*time.Second, "a part of the burst in the stream", func() bool {
				return len(s.ReadStream("events", before+2000, 2*time.Second)) > before+2000
			})
			atKill := len(s.ReadStream("events", 0, 0))
			s.Kill()
			time.Sleep(time.Second)
			s.Start()
			time.Sleep(3 * time.Second)
			committed := load.Finish()
			for id, seq := range bulk {
				committed[id] = seq
			}
			var msgs []rabbitmqtest.StreamMessage
			testenv.Eventually(t, 90*time.Second, "every committed event in the stream", func() bool {
				msgs = s.ReadStream("events", len(committed), 5*time.Second)
				rep, _ := checkStream(t, msgs, committed)
				return rep.Lost == 0
			})
			time.Sleep(time.Second) // a late copy would show
			msgs = s.ReadStream("events", len(msgs), time.Minute)
			rep, dupAt := checkStream(t, msgs, committed)
			t.Log(rep)
			if rep.Lost != 0 || rep.OrderViolations != 0 || rep.Delivered < 100 {
				t.Errorf("%v: want nothing lost, no order violation, at least 100 delivered\nrabbitmq-server:\n%s", rep, s.Log())
			}
			t.Logf("%d copies; the first copy of one at %d, the kill at %d", rep.Duplicates, slices.Min(append(dupAt, atKill)), atKill)
			if rep.Duplicates > 2*inFlight {
				t.Errorf("%d duplicates, want at most %d", rep.Duplicates, 2*inFlight)
			}
			if len(dupAt) > 0 && slices.Min(dupAt) < atKill-2*inFlight {
				t.Errorf("an event in the stream at %d, long before the kill at %d, was sent again", slices.Min(dupAt), atKill)
			}
			if mode == "wal" && rep.Duplicates == 0 && !strings.Contains(p.Out.String(), `"msg":"reconnecting"`) {
				t.Errorf("the kill failed no message in flight: it tested nothing\n%s", p.Out.String())
			}
			if !strings.Contains(p.Out.String(), `"sink":"rabbitmqstream"`) ||
				!strings.Contains(p.Out.String(), `"delivery":"at-least-once, each message confirmed by the broker`) {
				t.Errorf("the start line names neither the sink nor its guarantee:\n%s", p.Out.String())
			}
		})
	}
}

// A Debezium Server file whose sink is rabbitmqstream runs through the
// binary against a database that already holds the table and rows: the
// rows already there (snapshot.mode initial) and those written later are
// published to the streams named like Debezium's topics, created with the
// configured retention, with the key as message-id, Debezium's id header
// as an application property and its body. Exactly-once is refused at
// start, and so is a super stream.
func TestRabbitStreamFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-1', 'Paid', '{"n": 2}')`)
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{Streams: true, User: "relay", Password: "s3cret-pw"})
	props := testenv.DebeziumServer(t, e) + fmt.Sprintf(`debezium.sink.type=rabbitmqstream
debezium.sink.rabbitmqstream.host=127.0.0.1
debezium.sink.rabbitmqstream.port=%d
debezium.sink.rabbitmqstream.username=relay
debezium.sink.rabbitmqstream.password=s3cret-pw
debezium.sink.rabbitmqstream.stream.maxAge=P7D
debezium.sink.rabbitmqstream.producer.batchSize=50
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
debezium.format.key=simplestring
`, s.StreamPort)
	conf := testenv.WriteFile(t, "application.properties", props)
	out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--delivery", "exactly-once")
	if ok || !strings.Contains(out, "exactly-once delivery needs Kafka transactions; RabbitMQ Streams have none") {
		t.Errorf("exactly-once with RabbitMQ Streams: exit 0 %v, want it refused with the reason:\n%s", ok, out)
	}
	superConf := testenv.WriteFile(t, "super.properties", props+"debezium.sink.rabbitmqstream.superStream.enable=true\n")
	if out, ok := testenv.CLIOutput(t, "run", "--config", superConf); ok || !strings.Contains(out, "superStream.enable") {
		t.Errorf("a super stream: exit 0 %v, want it refused by name:\n%s", ok, out)
	}
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	orders := s.ReadStream("outbox.event.Order", 2, 60*time.Second)
	if _, err := e.Conn.Exec(context.Background(), `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000003', 'Payment', 'p-9', 'Captured', '{"n": 3}')`); err != nil {
		t.Fatal(err)
	}
	payments := s.ReadStream("outbox.event.Payment", 1, 30*time.Second)
	var got []string
	for _, m := range append(orders, payments...) {
		got = append(got, fmt.Sprintf("msgid=%v %s id=%v", m.MessageID, m.Data, m.Properties["id"]))
	}
	idHeader := func(id string) string {
		return `{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"` + id + `"}`
	}
	want := []string{
		`msgid=o-1 "{\"n\": 1}" id=` + idHeader("11111111-0000-0000-0000-000000000001"),
		`msgid=o-1 "{\"n\": 2}" id=` + idHeader("11111111-0000-0000-0000-000000000002"),
		`msgid=p-9 "{\"n\": 3}" id=` + idHeader("11111111-0000-0000-0000-000000000003"),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), p.Out.String())
	}
	if strings.Contains(p.Out.String(), "s3cret-pw") {
		t.Errorf("the password is in the log:\n%s", p.Out.String())
	}
}

// A row that does not fit in the server's largest frame is dead-lettered
// to the dead-letter stream before it is sent, its aggregate's later
// event held behind it, other aggregates go on; once the row is fixed,
// dlq replay publishes both in order. A refused password stops the binary
// at start without showing it.
func TestRabbitStreamPoisonAndRefusals(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{Streams: true})
	bad := strings.Replace(s.StreamURL, "guest:guest", "guest:wr0ng-s3cret", 1)
	if out, ok := testenv.CLIOutput(t, "run", "--database-url", e.URL, "--sink", "rabbitmqstream", "--rabbitmqstream-url", bad); ok ||
		!strings.Contains(out, "rabbitmq streams: the server refused the connection") || strings.Contains(out, "wr0ng-s3cret") {
		t.Errorf("a wrong password: exit 0 %v, want a refusal without the password:\n%s", ok, out)
	}
	p := e.Run(t, "--sink", "rabbitmqstream", "--rabbitmqstream-url", s.StreamURL, "--rabbitmqstream-stream", "events",
		"--rabbitmqstream-max-frame-bytes", "8192", "--mode", "wal")
	ok := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	big := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{"blob":"`+strings.Repeat("x", 9000)+`"}`))
	held := e.Insert(testenv.NewRow("order", "o-2", "Paid", `{"n":3}`))
	other := e.Insert(testenv.NewRow("order", "o-3", "Placed", `{"n":4}`))
	ids := func(msgs []rabbitmqtest.StreamMessage) []string {
		var out []string
		for _, m := range msgs {
			var ev struct{ ID string }
			_ = json.Unmarshal(m.Data, &ev)
			out = append(out, ev.ID)
		}
		return out
	}
	events := ids(s.ReadStream("events", 2, 60*time.Second))
	if want := []string{ok[0], other[0]}; !slices.Equal(events, want) {
		t.Errorf("stream: %v, want %v (o-2 held)\n%s", events, want, p.Out.String())
	}
	dead := s.ReadStream("pgoutbox.dlq", 2, 30*time.Second)
	if len(dead) != 2 || dead[0].Properties["id"] != big[0] || dead[1].Properties["id"] != held[0] {
		t.Errorf("dead letters: %d, want those of %s and %s\n%s", len(dead), big[0], held[0], p.Out.String())
	}
	// Once the row is fixed, dlq replay publishes both, in order.
	if _, err := e.Conn.Exec(context.Background(), `UPDATE outbox SET payload = '{"fixed":true}' WHERE id = $1`, big[0]); err != nil {
		t.Fatal(err)
	}
	out, stderr, okExit := testenv.CLI(t, "dlq", "replay", "--database-url", e.URL, "--sink", "rabbitmqstream",
		"--rabbitmqstream-url", s.StreamURL, "--rabbitmqstream-stream", "events")
	if !okExit {
		t.Fatalf("dlq replay: %s%s", out, stderr)
	}
	if got, want := ids(s.ReadStream("events", 4, 30*time.Second)), []string{ok[0], other[0], big[0], held[0]}; !slices.Equal(got, want) {
		t.Errorf("after the replay: %v, want %v", got, want)
	}
}
