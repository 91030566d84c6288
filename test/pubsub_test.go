package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/pubsubtest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A Debezium Server file whose sink is pubsub runs through the binary
// against a database that already holds its table and rows, into
// Google's emulator: the rows already there (snapshot.mode initial) and
// those written later are published to the topic named like Debezium's,
// the value as the data, Debezium's headers as attributes, the key's JSON
// as the ordering key, in order. Exactly-once and a header format in
// bytes are refused at start.
func TestPubSubFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-2', 'Placed', '{"n": 2}')`)
	s := pubsubtest.Start(t)
	s.CreateTopic(t, "outbox.event.Order")
	props := testenv.DebeziumServer(t, e) + `debezium.sink.type=pubsub
debezium.sink.pubsub.project.id=` + pubsubtest.Project + `
debezium.sink.pubsub.address=` + s.Address() + `
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
`
	conf := testenv.WriteFile(t, "application.properties", props)
	c := testenv.WriteFile(t, "refused.properties", props+"debezium.format.header=jsonbytearray\n")
	if out, ok := testenv.CLIOutput(t, "run", "--config", c); ok || !strings.Contains(out, "fails at the first record with a header") {
		t.Errorf("jsonbytearray headers: exit 0 %v:\n%s", ok, out)
	}
	if out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--delivery", "exactly-once"); ok || !strings.Contains(out, "Pub/Sub has none") {
		t.Errorf("exactly-once: exit 0 %v:\n%s", ok, out)
	}
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	ctx := context.Background()
	for i := 3; i <= 5; i++ {
		if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', 'o-1', 'Step', jsonb_build_object('n', $2::int))`,
			fmt.Sprintf("11111111-0000-0000-0000-00000000000%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	msgs := s.Pull(t, "outbox.event.Order", 5, time.Minute, p.Done())
	byKey := map[string][]string{}
	for _, m := range msgs {
		byKey[m.OrderingKey] = append(byKey[m.OrderingKey], string(m.Data))
	}
	key := func(id string) string { return `{"schema":{"type":"string","optional":false},"payload":"` + id + `"}` }
	if o1 := byKey[key("o-1")]; !slices.Equal(o1, []string{`"{\"n\": 1}"`, `"{\"n\": 3}"`, `"{\"n\": 4}"`, `"{\"n\": 5}"`}) || len(byKey[key("o-2")]) != 1 || len(msgs) != 5 {
		t.Errorf("messages by ordering key %v, want o-1's four in order and o-2's one, each once\n%s", byKey, p.Out.String())
	}
	if id := msgs[0].Attributes["id"]; !strings.Contains(id, "11111111-0000-0000-0000-00000000000") {
		t.Errorf("attributes %v: want Debezium's id header", msgs[0].Attributes)
	}
	if out := p.Out.String(); !strings.Contains(out, `"sink":"pubsub"`) || !strings.Contains(out, `"delivery":"at-least-once, each message answered by Pub/Sub`) {
		t.Errorf("the start line names neither the sink nor its guarantee:\n%s", out)
	}
}

// The emulator not answering under load (stopped with SIGSTOP for a few
// seconds): the binary's messages time out, it starts again from its
// last confirmed position, and once Pub/Sub answers nothing is lost and
// each aggregate's events are in order (their first copies).
func TestPubSubPausedUnderLoad(t *testing.T) {
	const burst, inFlight = 3000, 500
	e := testenv.New(t)
	e.Setup(e.Config())
	s := pubsubtest.Start(t)
	s.CreateTopic(t, "outbox.event.account")
	p := e.Run(t, "--sink", "pubsub", "--pubsub-project", pubsubtest.Project, "--pubsub-address", s.Address(),
		"--pubsub-timeout", "3s", "--mode", "wal", "--max-buffered-records", fmt.Sprint(inFlight))
	load := e.StartLoad(t, 2)
	time.Sleep(time.Second)
	bulk := insertCommits(t, e, burst)
	s.Signal(t, syscall.SIGSTOP)
	time.Sleep(5 * time.Second)
	s.Signal(t, syscall.SIGCONT)
	committed := load.Finish()
	for id, seq := range bulk {
		committed[id] = seq
	}
	var events []testenv.LoadEvent
	var pulled []pubsubtest.Message
	testenv.Eventually(t, 2*time.Minute, "every committed event", func() bool {
		pulled = append(pulled, s.Pull(t, "outbox.event.account", 0, time.Second, nil)...)
		events = events[:0]
		for i, m := range pulled {
			var ev testenv.LoadEvent // a structured CloudEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatalf("message %d: %v: %s", i, err, m.Data)
			}
			if m.OrderingKey != ev.PartitionKey {
				t.Fatalf("message %d: ordering key %q, aggregate id %q", i, m.OrderingKey, ev.PartitionKey)
			}
			events = append(events, ev)
		}
		return len(testenv.Missing(events, committed)) == 0
	})
	rep, _ := testenv.CheckEvents(t, events, committed)
	t.Log(rep)
	if rep.Lost != 0 || rep.OrderViolations != 0 || rep.Delivered < 100 {
		t.Errorf("%v: want nothing lost, no order violation, at least 100 delivered", rep)
	}
	if rep.Duplicates > 2*inFlight {
		t.Errorf("%d duplicates, want at most %d", rep.Duplicates, 2*inFlight)
	}
	t.Logf("the relay started again: %v", strings.Contains(p.Out.String(), `"msg":"reconnecting"`))
}
