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

	"github.com/pgoutbox/pgoutbox/test/pulsartest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A Debezium Server file whose sink is pulsar runs through the binary
// against a database that already holds its table and rows: the rows
// already there (snapshot.mode initial) and those written later are
// published to the topic named like Debezium's in the tenant and
// namespace, the key's JSON as the message key, Debezium's headers as
// properties, the value as the payload, in order. Exactly-once, a key
// format in bytes and an authentication plugin other than the token's are
// refused at start.
func TestPulsarFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-2', 'Placed', '{"n": 2}')`)
	s := pulsartest.Start(t)
	props := testenv.DebeziumServer(t, e) + `debezium.sink.type=pulsar
debezium.sink.pulsar.client.serviceUrl=` + s.ServiceURL() + `
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
	for key, want := range map[string]string{
		"debezium.format.key=jsonbytearray\n": "fails at the first record of bytes",
		"debezium.sink.pulsar.client.authPluginClassName=org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2\n": "the other plugins are not",
	} {
		c := testenv.WriteFile(t, "refused.properties", props+key)
		if out, ok := testenv.CLIOutput(t, "run", "--config", c); ok || !strings.Contains(out, want) {
			t.Errorf("%s: exit 0 %v, want %q:\n%s", strings.TrimSpace(key), ok, want, out)
		}
	}
	if out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--delivery", "exactly-once"); ok || !strings.Contains(out, "pgoutbox does not use Pulsar's") {
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
	var msgs []pulsartest.Message
	testenv.Eventually(t, time.Minute, "five messages", func() bool {
		msgs = s.Messages("outbox.event.Order")
		return len(msgs) >= 5
	})
	time.Sleep(time.Second) // a copy would show
	msgs = s.Messages("outbox.event.Order")
	var payloads []string
	for _, m := range msgs {
		payloads = append(payloads, string(m.Payload))
	}
	want := []string{`"{\"n\": 1}"`, `"{\"n\": 2}"`, `"{\"n\": 3}"`, `"{\"n\": 4}"`, `"{\"n\": 5}"`}
	if !slices.Equal(payloads, want) {
		t.Errorf("payloads %v, want %v, each once, in order\n%s", payloads, want, p.Out.String())
	}
	m := msgs[0]
	if m.Key != `{"schema":{"type":"string","optional":false},"payload":"o-1"}` || !strings.Contains(m.Properties["id"], "11111111-0000-0000-0000-000000000001") {
		t.Errorf("the first message's key %q, properties %v", m.Key, m.Properties)
	}
	if out := p.Out.String(); !strings.Contains(out, `"sink":"pulsar"`) || !strings.Contains(out, `"delivery":"at-least-once, each message confirmed by the broker`) {
		t.Errorf("the start line names neither the sink nor its guarantee:\n%s", out)
	}
}

// Pulsar killed (SIGKILL) under load and started again on its data,
// streaming and polling: the binary publishes with many messages in
// flight, loses nothing, keeps each aggregate's order, and what it sends
// again is a copy of what was in flight at the kill (at-least-once),
// whether the client sent it again itself or the relay started again.
//
// A standalone Pulsar has one bookie: when its restart cannot open the
// topic's own ledger (pulsartest.Server.LedgerLost), no client can read
// or write the topic and the run tests nothing; it is run again, on a new
// server and database, at most three times.
func TestPulsarBrokerKilledUnderLoad(t *testing.T) {
	for _, mode := range []string{"wal", "poll"} {
		t.Run(mode, func(t *testing.T) {
			for run := 1; !pulsarKilledUnderLoad(t, mode); run++ {
				if run == 3 {
					t.Fatal("Pulsar lost its own ledger at each of three restarts")
				}
				t.Logf("run %d: Pulsar could not open the topic's ledger after its restart; running again", run)
			}
		})
	}
}

// pulsarKilledUnderLoad is one run of TestPulsarBrokerKilledUnderLoad:
// false, having checked nothing, when the restarted Pulsar lost the
// topic's ledger.
func pulsarKilledUnderLoad(t *testing.T, mode string) bool {
	const burst, inFlight = 10000, 1000
	e := testenv.New(t)
	e.Setup(e.Config())
	s := pulsartest.Start(t)
	p := e.Run(t, "--sink", "pulsar", "--pulsar-url", s.ServiceURL(), "--pulsar-send-timeout", "5s",
		"--mode", mode, "--poll-interval", "50ms", "--max-buffered-records", fmt.Sprint(inFlight))
	load := e.StartLoad(t, 4)
	const topic = "outbox.event.account"
	testenv.Eventually(t, 30*time.Second, "the load's first events", func() bool { return len(s.Messages(topic)) > 0 })
	bulk := insertCommits(t, e, burst)
	testenv.Eventually(t, 60*time.Second, "a part of the burst", func() bool { return len(s.Messages(topic)) > 2000 })
	s.Kill()
	time.Sleep(time.Second)
	s.Restart()
	time.Sleep(3 * time.Second)
	committed := load.Finish()
	if _, err := s.Read(topic); err != nil && s.LedgerLost() {
		p.Signal(t, syscall.SIGKILL) // its exit tells nothing: the topic is gone
		s.Kill()
		return false
	}
	for id, seq := range bulk {
		committed[id] = seq
	}
	read := func() []testenv.LoadEvent {
		var events []testenv.LoadEvent
		for i, m := range s.Messages(topic) {
			var ev testenv.LoadEvent // a structured CloudEvent
			if err := json.Unmarshal(m.Payload, &ev); err != nil {
				t.Fatalf("message %d: %v: %s", i, err, m.Payload)
			}
			if m.Key != ev.PartitionKey {
				t.Fatalf("message %d: key %q, aggregate id %q", i, m.Key, ev.PartitionKey)
			}
			events = append(events, ev)
		}
		return events
	}
	// The connection dropped with the broker: what was in flight
	// failed, and the relay started again from its last confirmed
	// position.
	testenv.CheckAfterFault(t, p, read, committed, 2*inFlight, func() string { return s.LogTail(4096) })
	return true
}
