package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/rocketmqtest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// A Debezium Server file whose sink is rocketmq runs through the binary
// against a database that already holds its table and rows: the rows
// already there (snapshot.mode initial) and those written later are
// published to the routed topic, which the broker creates, each in the
// queue its key picks, the key's JSON as KEYS, Debezium's headers as
// properties, the value as the body, each key's in order; the secret key
// never appears in the log. Exactly-once, a key format in bytes, the ACL
// without its keys and the router's default topic (RocketMQ's names take
// no '.') are refused at start.
func TestRocketMQFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-2', 'Placed', '{"n": 2}')`)
	s := rocketmqtest.Start(t)
	base := testenv.DebeziumServer(t, e) + `debezium.sink.type=rocketmq
debezium.sink.rocketmq.producer.name.srv.addr=` + s.NameServer() + `
debezium.sink.rocketmq.producer.group=outbox_producer
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.table.fields.additional.placement=type:header:eventType
debezium.format.value.schemas.enable=false
`
	props := base + "debezium.transforms.outbox.route.topic.replacement=outbox_${routedByValue}\n"
	for key, want := range map[string]string{
		"debezium.format.key=jsonbytearray\n":                "by the key's text and fails at the first record of bytes",
		"debezium.sink.rocketmq.producer.acl.enabled=true\n": "without producer.access.key and producer.secret.key",
	} {
		c := testenv.WriteFile(t, "refused.properties", props+key)
		if out, ok := testenv.CLIOutput(t, "run", "--config", c); ok || !strings.Contains(out, want) {
			t.Errorf("%s: exit 0 %v, want %q:\n%s", strings.TrimSpace(key), ok, want, out)
		}
	}
	dotted := testenv.WriteFile(t, "dotted.properties", base)
	if out, ok := testenv.CLIOutput(t, "run", "--config", dotted); ok || !strings.Contains(out, "RocketMQ's topic names do not take") {
		t.Errorf("the router's default topic: exit 0 %v:\n%s", ok, out)
	}
	conf := testenv.WriteFile(t, "application.properties", props+`debezium.sink.rocketmq.producer.acl.enabled=false
debezium.sink.rocketmq.producer.secret.key=not-read-without-acl
`)
	if out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--delivery", "exactly-once"); ok || !strings.Contains(out, "pgoutbox does not use RocketMQ's") {
		t.Errorf("exactly-once: exit 0 %v:\n%s", ok, out)
	}
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms",
		// Signed requests, which a broker without ACL ignores: the secret
		// must not reach the log.
		"--rocketmq-access-key", "pgoutbox-ak", "--rocketmq-secret-key", "s3cr3t-value")
	ctx := context.Background()
	for i := 3; i <= 6; i++ {
		agg := []string{"o-1", "o-2"}[i%2]
		if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', $2, 'Step', jsonb_build_object('n', $3::int))`,
			fmt.Sprintf("11111111-0000-0000-0000-00000000000%d", i), agg, i); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []rocketmqtest.Message
	testenv.Eventually(t, time.Minute, "six messages", func() bool {
		msgs = s.Messages("outbox_Order")
		return len(msgs) >= 6
	})
	time.Sleep(time.Second) // a copy would show
	msgs = s.Messages("outbox_Order")
	byKey := map[string][]string{}
	queues := s.Queues("outbox_Order")
	for _, m := range msgs {
		byKey[m.Keys] = append(byKey[m.Keys], string(m.Body))
		if m.Properties["eventType"] == "" || !strings.Contains(m.Properties["id"], "11111111-0000-0000-0000-00000000000") {
			t.Errorf("message %s: properties %v", m.Body, m.Properties)
		}
		if want := javaPick(m.Keys, queues); m.Queue != want {
			t.Errorf("key %s in queue %d, want %d of %d", m.Keys, m.Queue, want, queues)
		}
	}
	k1, k2 := `{"schema":{"type":"string","optional":false},"payload":"o-1"}`, `{"schema":{"type":"string","optional":false},"payload":"o-2"}`
	want := map[string][]string{
		k1: {`"{\"n\": 1}"`, `"{\"n\": 4}"`, `"{\"n\": 6}"`},
		k2: {`"{\"n\": 2}"`, `"{\"n\": 3}"`, `"{\"n\": 5}"`},
	}
	for k, w := range want {
		if !slices.Equal(byKey[k], w) {
			t.Errorf("key %s: bodies %v, want %v, each once, in order\n%s", k, byKey[k], w, p.Out.String())
		}
	}
	out := p.Out.String()
	if !strings.Contains(out, `"sink":"rocketmq"`) || !strings.Contains(out, `"delivery":"at-least-once, each batch stored`) {
		t.Errorf("the start line names neither the sink nor its guarantee:\n%s", out)
	}
	if strings.Contains(out, "s3cr3t-value") {
		t.Errorf("the secret key is in the log:\n%s", out)
	}
}

// javaPick is SelectMessageQueueByHash's queue for key among n: Java's
// String.hashCode, its remainder made positive.
func javaPick(key string, n int) int {
	var h int32
	for _, u := range []rune(key) {
		h = 31*h + int32(u) // the keys here are ASCII: one UTF-16 unit each
	}
	v := int(h) % n
	if v < 0 {
		v = -v
	}
	return v
}

// The broker killed (SIGKILL) under load and started again on its store,
// streaming and polling: the binary loses nothing, keeps each aggregate's
// order, and what it sends again is a copy of what was in flight at the
// kill (at-least-once). Paused (SIGSTOP) past the send timeout, the same.
func TestRocketMQBrokerKilledUnderLoad(t *testing.T) {
	const burst, inFlight = 10000, 1000
	for _, c := range []struct{ mode, fault string }{{"wal", "kill"}, {"poll", "pause"}} {
		t.Run(c.mode+"-"+c.fault, func(t *testing.T) {
			e := testenv.New(t)
			e.Setup(e.Config())
			s := rocketmqtest.Start(t)
			const topic = "outbox_event_account"
			s.CreateTopic(topic, 4)
			p := e.Run(t, "--sink", "rocketmq", "--rocketmq-name-server", s.NameServer(), "--rocketmq-send-timeout", "2s",
				"--topic", "outbox_event_{aggregatetype}", "--mode", c.mode, "--poll-interval", "50ms",
				"--max-buffered-records", fmt.Sprint(inFlight))
			load := e.StartLoad(t, 4)
			testenv.Eventually(t, 30*time.Second, "the load's first events", func() bool { return len(s.Messages(topic)) > 0 })
			bulk := insertCommits(t, e, burst)
			testenv.Eventually(t, 60*time.Second, "a part of the burst", func() bool { return len(s.Messages(topic)) > 2000 })
			if c.fault == "kill" {
				s.Kill()
				time.Sleep(time.Second)
				s.Restart()
			} else {
				s.Pause()
				time.Sleep(5 * time.Second)
				s.Resume()
			}
			time.Sleep(3 * time.Second)
			committed := load.Finish()
			for id, seq := range bulk {
				committed[id] = seq
			}
			// By queue, then offset: each key's messages are in one queue,
			// in the order stored.
			read := func() []testenv.LoadEvent {
				var events []testenv.LoadEvent
				for i, m := range s.Messages(topic) {
					var ev testenv.LoadEvent // a structured CloudEvent
					if err := json.Unmarshal(m.Body, &ev); err != nil {
						t.Fatalf("message %d: %v: %s", i, err, m.Body)
					}
					if m.Keys != ev.PartitionKey {
						t.Fatalf("message %d: keys %q, aggregate id %q", i, m.Keys, ev.PartitionKey)
					}
					events = append(events, ev)
				}
				return events
			}
			testenv.CheckAfterFault(t, p, read, committed, 2*inFlight, func() string { return s.LogTail(4096) })
		})
	}
}
