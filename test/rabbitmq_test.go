package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// rabbitFlags route every event through the topic exchange "outbox" by
// its topic, to a durable queue "events" bound with binding; dead letters
// go to the durable queue pgoutbox.dlq.
func rabbitFlags(s *rabbitmqtest.Server, binding string) []string {
	s.Queue("events", "outbox", "topic", binding)
	s.Queue("pgoutbox.dlq", "", "")
	return []string{"--sink", "rabbitmq", "--rabbitmq-url", s.URL, "--rabbitmq-exchange", "outbox",
		"--rabbitmq-routing-key-source", "topic"}
}

// checkRabbitMQ compares the messages of a queue, in order, with what
// committed: nothing lost, message-id the event id, and per aggregate the
// first copy of each event in commit order. It returns the report and,
// for each duplicated event, the place of its first copy.
func checkRabbitMQ(t *testing.T, msgs []rabbitmqtest.Message, committed map[string]int) (testenv.Report, []int) {
	t.Helper()
	var events []testenv.LoadEvent
	for i, m := range msgs {
		var ev testenv.LoadEvent // a structured CloudEvent, as NATS carries it
		if err := json.Unmarshal(m.Body, &ev); err != nil {
			t.Fatalf("message %d: %v: %s", i, err, m.Body)
		}
		if m.MessageID != ev.ID {
			t.Errorf("message %d: message-id %q, event id %q", i, m.MessageID, ev.ID)
		}
		events = append(events, ev)
	}
	return testenv.CheckEvents(t, events, committed)
}

// insertCommits commits n events of ten aggregates (burst-0 ... burst-9),
// each in a transaction of its own, as fast as the server takes them, and
// returns their ids with their place in their aggregate.
func insertCommits(t *testing.T, e *testenv.Env, n int) map[string]int {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN FOR g IN 1..%d LOOP
  INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('account', 'burst-' || (g %% 10), 'Posted', jsonb_build_object('seq', g));
  COMMIT;
END LOOP; END $$`, n)); err != nil {
		t.Fatal(err)
	}
	rows, err := e.Conn.Query(ctx, `SELECT id::text, (payload->>'seq')::int FROM outbox WHERE aggregateid LIKE 'burst-%'`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var id string
		var seq int
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		out[id] = seq
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// RabbitMQ killed (SIGKILL) under load and started again on its data,
// streaming and polling: the binary publishes with many messages in
// flight, of many small transactions, loses nothing, keeps each
// aggregate's order, and what it sends again is a copy of what was in
// flight at the kill (RabbitMQ does not deduplicate: at-least-once).
func TestRabbitMQServerKilledUnderLoad(t *testing.T) {
	const burst, inFlight = 10000, 1000
	for _, mode := range []string{"wal", "poll"} {
		t.Run(mode, func(t *testing.T) {
			e := testenv.New(t)
			e.Setup(e.Config()) // the slot, before the first event
			s := rabbitmqtest.Start(t, rabbitmqtest.Options{})
			args := append(rabbitFlags(s, "outbox.event.#"), "--rabbitmq-ack-timeout", "5s", "--mode", mode, "--poll-interval", "50ms",
				"--max-buffered-records", fmt.Sprint(inFlight))
			p := e.Run(t, args...)
			load := e.StartLoad(t, 4)
			time.Sleep(2 * time.Second)
			// A burst of small transactions, and the kill once part of
			// it is queued: many messages are in flight then, and each
			// transaction is confirmed once its one message is.
			before := s.Count("events")
			bulk := insertCommits(t, e, burst)
			testenv.Eventually(t, 30*time.Second, "a part of the burst queued", func() bool { return s.Count("events") > before+2000 })
			atKill := s.Count("events")
			s.Kill()
			time.Sleep(time.Second)
			s.Start()
			time.Sleep(3 * time.Second)
			committed := load.Finish()
			for id, seq := range bulk {
				committed[id] = seq
			}
			var msgs []rabbitmqtest.Message
			testenv.Eventually(t, 90*time.Second, "every committed event queued", func() bool {
				msgs = append(msgs, s.Drain("events")...)
				rep, _ := checkRabbitMQ(t, msgs, committed)
				return rep.Lost == 0
			})
			time.Sleep(time.Second) // a late copy would show
			msgs = append(msgs, s.Drain("events")...)
			rep, dupAt := checkRabbitMQ(t, msgs, committed)
			t.Log(rep)
			if rep.Lost != 0 || rep.OrderViolations != 0 || rep.Delivered < 100 {
				t.Errorf("%v: want nothing lost, no order violation, at least 100 delivered\nrabbitmq-server:\n%s", rep, s.Log())
			}
			// A copy is of an event not yet confirmed at the kill: what
			// was in flight, queued shortly before the kill.
			t.Logf("%d copies; the first copy of one at %d, the kill at %d", rep.Duplicates, slices.Min(append(dupAt, atKill)), atKill)
			if rep.Duplicates > 2*inFlight {
				t.Errorf("%d duplicates, want at most %d", rep.Duplicates, 2*inFlight)
			}
			if len(dupAt) > 0 && slices.Min(dupAt) < atKill-2*inFlight {
				t.Errorf("an event queued at %d, long before the kill at %d, was sent again", slices.Min(dupAt), atKill)
			}
			if mode == "wal" && rep.Duplicates == 0 && !strings.Contains(p.Out.String(), `"msg":"reconnecting"`) {
				t.Errorf("the kill failed no message in flight: it tested nothing\n%s", p.Out.String())
			}
			if !strings.Contains(p.Out.String(), `"sink":"rabbitmq"`) ||
				!strings.Contains(p.Out.String(), `"delivery":"at-least-once, each message mandatory and confirmed; RabbitMQ does not deduplicate`) {
				t.Errorf("the start line names neither the sink nor its guarantee:\n%s", p.Out.String())
			}
		})
	}
}

// A Debezium Server file whose sink is rabbitmq runs through the binary
// against a database that already holds the table and rows: the rows
// already there (snapshot.mode initial) and those written later are
// published with Debezium's routing, body and id header, each with its
// event id as message-id. Exactly-once is refused at start.
func TestRabbitMQFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb,
  seq bigint GENERATED ALWAYS AS IDENTITY);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-1', 'Paid', '{"n": 2}')`)
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{})
	s.Queue("orders", "outbox.event.Order", "direct", "o-1")
	s.Queue("payments", "outbox.event.Payment", "direct", "p-9")
	_, amqpPort, _ := strings.Cut(s.Addr(), ":")
	conf := testenv.WriteFile(t, "application.properties", testenv.DebeziumServer(t, e)+`debezium.sink.type=rabbitmq
debezium.sink.rabbitmq.connection.host=127.0.0.1
debezium.sink.rabbitmq.connection.port=`+amqpPort+`
debezium.sink.rabbitmq.connection.username=guest
debezium.sink.rabbitmq.connection.password=guest
debezium.sink.rabbitmq.routingKey.source=key
debezium.sink.rabbitmq.autoCreateRoutingKey=true
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
debezium.format.key=simplestring
`)
	out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--delivery", "exactly-once")
	if ok || !strings.Contains(out, "exactly-once delivery needs Kafka transactions; RabbitMQ has none") {
		t.Errorf("exactly-once with RabbitMQ: exit 0 %v, want it refused with the reason:\n%s", ok, out)
	}
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	orders := s.Await("orders", 2, 60*time.Second)
	if _, err := e.Conn.Exec(context.Background(), `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000003', 'Payment', 'p-9', 'Captured', '{"n": 3}')`); err != nil {
		t.Fatal(err)
	}
	payments := s.Await("payments", 1, 30*time.Second)
	var got []string
	for _, m := range append(orders, payments...) {
		got = append(got, fmt.Sprintf("%s %s %s mode=%d id=%v msgid=%s", m.Exchange, m.RoutingKey, m.Body, m.DeliveryMode, m.Headers["id"], m.MessageID))
	}
	// Debezium's rendering (the corpus checks it against Debezium Server):
	// a jsonb payload is a JSON string without value schemas, the id
	// header a uuid with its schema (header schemas stay on).
	idHeader := func(id string) string {
		return `{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"` + id + `"}`
	}
	want := []string{
		`outbox.event.Order o-1 "{\"n\": 1}" mode=2 id=` + idHeader("11111111-0000-0000-0000-000000000001") + ` msgid=11111111-0000-0000-0000-000000000001`,
		`outbox.event.Order o-1 "{\"n\": 2}" mode=2 id=` + idHeader("11111111-0000-0000-0000-000000000002") + ` msgid=11111111-0000-0000-0000-000000000002`,
		`outbox.event.Payment p-9 "{\"n\": 3}" mode=2 id=` + idHeader("11111111-0000-0000-0000-000000000003") + ` msgid=11111111-0000-0000-0000-000000000003`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), p.Out.String())
	}
	// autoCreateRoutingKey declared the dead-letter queue (the slot's,
	// Debezium's slot.name).
	if n := s.Count("debezium.dlq"); n != 0 {
		t.Errorf("dead-letter queue: %d messages (-1: missing), want it declared and empty", n)
	}
}

// A row larger than the server takes (its max_message_size, which
// pgoutbox is not told of) is dead-lettered to the dead-letter queue once
// the server refused it, its aggregate's later event held behind it,
// other aggregates go on; once the row is fixed, dlq replay publishes
// both in order, each under its event id. Metrics and status count the
// dead letters and held aggregate. An event no queue takes is not
// confirmed: the log, readiness and status name its exchange and routing
// key, and it arrives once a queue is bound.
func TestRabbitMQPoisonRowDeadLettered(t *testing.T) {
	ctx := context.Background()
	e := testenv.New(t)
	e.Setup(e.Config())
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{MaxMessageSize: 4096})
	addr := testenv.FreeAddr(t)
	p := e.Run(t, append(rabbitFlags(s, "outbox.event.order"), "--mode", "wal", "--metrics-addr", addr, "--metrics-interval", "200ms")...)
	ok := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	big := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{"blob":"`+strings.Repeat("x", 5000)+`"}`))
	held := e.Insert(testenv.NewRow("order", "o-2", "Paid", `{"n":3}`))
	other := e.Insert(testenv.NewRow("order", "o-3", "Placed", `{"n":4}`))
	var events, dead []string
	testenv.Eventually(t, 60*time.Second, "two events and two dead letters", func() bool {
		for _, m := range s.Drain("events") {
			if !slices.Contains(events, m.MessageID) {
				events = append(events, m.MessageID)
			}
		}
		for _, m := range s.Drain("pgoutbox.dlq") {
			dead = append(dead, m.MessageID)
		}
		return len(events) >= 2 && len(dead) >= 2
	})
	if got, want := events, []string{ok[0], other[0]}; !slices.Equal(got, want) {
		t.Errorf("queue: %v, want %v (o-2 held)\n%s", got, want, p.Out.String())
	}
	if got, want := dead, []string{"dlq:" + big[0], "dlq:" + held[0]}; !slices.Equal(got, want) {
		t.Errorf("dead letters: %v, want %v", got, want)
	}
	testenv.Eventually(t, 30*time.Second, "the dead letters in metrics and status", func() bool {
		st, _ := e.Status(t)
		return testenv.Scrape(t, "http://"+addr)["pgoutbox_open_dead_letters"] == 2 &&
			st.DeadLetters != nil && *st.DeadLetters == 2 && st.HeldAggregates != nil && *st.HeldAggregates == 1
	})
	if _, err := e.Conn.Exec(ctx, `UPDATE outbox SET payload = '{"fixed":true}' WHERE id = $1`, big[0]); err != nil {
		t.Fatal(err)
	}
	out, stderr, okExit := testenv.CLI(t, "dlq", "replay", "--database-url", e.URL, "--sink", "rabbitmq", "--rabbitmq-url", s.URL,
		"--rabbitmq-exchange", "outbox", "--rabbitmq-routing-key-source", "topic")
	if !okExit {
		t.Fatalf("dlq replay: %s%s", out, stderr)
	}
	var replayed []string
	for _, m := range s.Await("events", 2, 30*time.Second) {
		replayed = append(replayed, m.MessageID)
	}
	if want := []string{big[0], held[0]}; !slices.Equal(replayed, want) {
		t.Errorf("after the replay: %v, want %v", replayed, want)
	}

	// No queue takes payment events: not confirmed, named, sent again.
	lost := e.Insert(testenv.NewRow("payment", "p-1", "Captured", `{"n":5}`))
	const unroutable = `no queue is bound to exchange "outbox" with routing key "outbox.event.payment"`
	testenv.Eventually(t, 30*time.Second, "the unroutable event in the log, readiness, metrics and status", func() bool {
		code, body := testenv.HTTPGet("http://" + addr + "/readyz")
		st, _ := e.Status(t)
		return strings.Contains(p.Out.String(), strings.Trim(strconv.Quote(unroutable), `"`)) &&
			code == http.StatusServiceUnavailable && strings.Contains(body, unroutable) &&
			testenv.Scrape(t, "http://"+addr)["pgoutbox_kafka_problem"] == 1 && strings.Contains(st.KafkaProblem, unroutable)
	})
	s.Queue("payments", "outbox", "topic", "outbox.event.payment")
	if got := s.Await("payments", 1, 60*time.Second); len(got) != 1 || got[0].MessageID != lost[0] {
		t.Errorf("once a queue is bound: %v, want %s", got, lost[0])
	}
}

// CloudEvents through RabbitMQ follow the AMQP protocol binding: the
// structured mode's content-type property is application/cloudevents+json;
// the binary mode's attributes are cloudEvents: headers, datacontenttype
// the content-type property.
func TestRabbitMQCloudEventsBinding(t *testing.T) {
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{})
	for _, tc := range []struct {
		format string
		check  func(m rabbitmqtest.Message) string
	}{
		{"cloudevents", func(m rabbitmqtest.Message) string {
			var ev struct{ Type, Datacontenttype string }
			if err := json.Unmarshal(m.Body, &ev); err != nil || ev.Type != "Order Placed" || ev.Datacontenttype != "application/json" ||
				!strings.HasPrefix(m.ContentType, "application/cloudevents+json") || m.Headers["content-type"] != nil {
				return fmt.Sprintf("structured: %s %s %v (%v)", m.Body, m.ContentType, m.Headers, err)
			}
			return ""
		}},
		{"cloudevents-binary", func(m rabbitmqtest.Message) string {
			if string(m.Body) != `{"n": 1}` || m.Headers["cloudEvents:type"] != "Order Placed" || m.Headers["cloudEvents:specversion"] != "1.0" ||
				m.Headers["cloudEvents:partitionkey"] != "o-1" || m.Headers["cloudEvents:id"] != m.MessageID ||
				m.ContentType != "application/json" || m.Headers["cloudEvents:datacontenttype"] != nil || m.Headers["ce_type"] != nil {
				return fmt.Sprintf("binary: %s %s %v", m.Body, m.ContentType, m.Headers)
			}
			return ""
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			e := testenv.New(t)
			e.Setup(e.Config())
			queue := "ce-" + tc.format
			s.Queue(queue, "amq.topic", "topic", "outbox.event.#")
			p := e.Run(t, "--sink", "rabbitmq", "--rabbitmq-url", s.URL, "--rabbitmq-exchange", "amq.topic",
				"--rabbitmq-routing-key-source", "topic", "--on-poison", "halt", "--mode", "wal", "--format", tc.format)
			e.Insert(testenv.NewRow("order", "o-1", "Order Placed", `{"n": 1}`))
			msgs := s.Await(queue, 1, 30*time.Second)
			if len(msgs) != 1 {
				t.Fatalf("%d messages\n%s", len(msgs), p.Out.String())
			}
			if why := tc.check(msgs[0]); why != "" {
				t.Errorf("%s\n%s", why, p.Out.String())
			}
			s.Channel().QueueDelete(queue, false, false, false) // the next format's queue takes the same keys
		})
	}
}

// What cannot work stops the binary at start, saying why: a refused
// password (never shown, given in the URL or alone), a dead-letter queue
// --dlq-topic names that does not exist, an exchange that does not exist.
func TestRabbitMQRefusedAtStart(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{User: "relay", Password: "right-pw"})
	bad := strings.Replace(s.URL, "right-pw", "wr0ng-s3cret", 1)
	base := []string{"run", "--database-url", e.URL, "--sink", "rabbitmq", "--mode", "wal"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"password in the URL", []string{"--rabbitmq-url", bad}, "rabbitmq: the server refused the connection"},
		{"password alone", []string{"--rabbitmq-url", s.URL, "--rabbitmq-password", "wr0ng-s3cret"}, "rabbitmq: the server refused the connection"},
		{"no dead-letter queue named", []string{"--rabbitmq-url", s.URL, "--dlq-topic", "orders.dlq"}, `rabbitmq: dead-letter queue "orders.dlq" does not exist`},
		{"no exchange", []string{"--rabbitmq-url", s.URL, "--on-poison", "halt", "--rabbitmq-exchange", "nowhere"}, `rabbitmq: exchange "nowhere" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := testenv.CLIOutput(t, append(slices.Clone(base), tc.args...)...)
			if ok || !strings.Contains(out, tc.want) || strings.Contains(out, "wr0ng-s3cret") || strings.Contains(out, "right-pw") {
				t.Errorf("exit 0 %v, want a refusal saying %q, no password:\n%s", ok, tc.want, out)
			}
		})
	}
}

// Debezium Server needs no dead-letter queue, so a missing default one
// (<slot>.dlq) is a warning at start, not a refusal: events flow. An event
// that cannot be published then stops pgoutbox, naming the queue, before
// anything after it is published or confirmed, as it stops Debezium
// Server; once the queue is declared, a restart dead-letters it and
// publishes what followed, nothing lost.
func TestRabbitMQMissingDeadLetterQueue(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	s := rabbitmqtest.Start(t, rabbitmqtest.Options{MaxMessageSize: 4096})
	s.Queue("events", "outbox", "topic", "outbox.event.order")
	args := []string{"--sink", "rabbitmq", "--rabbitmq-url", s.URL, "--rabbitmq-exchange", "outbox",
		"--rabbitmq-routing-key-source", "topic", "--mode", "wal"}
	p := e.Run(t, args...)
	first := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	if got := s.Await("events", 1, 30*time.Second); len(got) != 1 || got[0].MessageID != first[0] {
		t.Fatalf("before the poison row: %v, want %s\n%s", got, first[0], p.Out)
	}
	if !strings.Contains(p.Out.String(), "the dead-letter queue does not exist") {
		t.Errorf("no warning of the missing dead-letter queue:\n%s", p.Out)
	}
	big := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{"blob":"`+strings.Repeat("x", 5000)+`"}`))
	after := e.Insert(testenv.NewRow("order", "o-3", "Placed", `{"n":3}`))
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60s after an event it cannot publish, with no dead-letter queue:\n%s", p.Out)
	}
	if !strings.Contains(p.Out.String(), `dead-letter queue \"pgoutbox.dlq\" does not exist`) {
		t.Errorf("the exit does not name the missing queue:\n%s", p.Out)
	}
	if got := s.Drain("events"); len(got) != 0 {
		t.Errorf("published past the event it could not publish: %v", got)
	}
	s.Queue("pgoutbox.dlq", "", "")
	p = e.Run(t, args...)
	dead := s.Await("pgoutbox.dlq", 1, 30*time.Second)
	events := s.Await("events", 1, 30*time.Second)
	p.Stop(t)
	if len(dead) != 1 || dead[0].MessageID != "dlq:"+big[0] {
		t.Errorf("dead letters %v, want dlq:%s", dead, big[0])
	}
	if len(events) != 1 || events[0].MessageID != after[0] {
		t.Errorf("after the restart: %v, want %s", events, after[0])
	}
}
