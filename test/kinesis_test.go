package test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/mototest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// kinesisEnv is the environment that points AWS's chain at moto's
// credentials, with a secret the logs must never show.
func kinesisEnv() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + mototest.AccessKey, "AWS_SECRET_ACCESS_KEY=kinesis-s3cr3t-never-logged",
		"AWS_REGION=", "AWS_PROFILE=", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}
}

// A Debezium Server file whose sink is kinesis runs through the binary
// against a database that already holds its table and rows: the rows
// already there (snapshot.mode initial) and those written later are
// written to the stream named like Debezium's topic, the key's JSON as
// the partition key, the value as the data, each aggregate's in order.
// An event routed to a stream that does not exist is reported, naming
// it, and written once the stream is created; nothing is lost or
// reordered meanwhile, and the secret key is never logged. Exactly-once,
// a key format in bytes and a batch size Debezium Server refuses are
// refused at start.
func TestKinesisFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-2', 'Placed', '{"n": 2}'),
  ('11111111-0000-0000-0000-000000000003', 'Order', 'o-1', 'Paid', '{"n": 3}')`)
	m := mototest.Start(t)
	m.CreateStream(t, "outbox.event.Order", 2)
	props := testenv.DebeziumServer(t, e) + `debezium.sink.type=kinesis
debezium.sink.kinesis.region=us-east-1
debezium.sink.kinesis.endpoint=` + m.Endpoint() + `
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
	env := kinesisEnv()
	for key, want := range map[string]string{
		"debezium.format.key=jsonbytearray\n":    "fails at the first record of bytes",
		"debezium.sink.kinesis.batch.size=501\n": `"501": want a number from 1 to 500`,
		"debezium.sink.type=eventhubs\n":         `"eventhubs": pgoutbox publishes to`,
	} {
		c := testenv.WriteFile(t, "refused.properties", props+key)
		if code, out := testenv.RunOnce(t, 30*time.Second, env, "run", "--config", c); code == 0 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want %q:\n%s", strings.TrimSpace(key), code, want, out)
		}
	}
	if code, out := testenv.RunOnce(t, 30*time.Second, env, "run", "--config", conf, "--delivery", "exactly-once"); code == 0 || !strings.Contains(out, "Kinesis has none") {
		t.Errorf("exactly-once: exit %d:\n%s", code, out)
	}
	p := testenv.StartBinaryEnv(t, env, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	m.Await(t, "outbox.event.Order", 3, time.Minute, p.Done())
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000004', 'Payment', 'p-1', 'Captured', '{"n": 4}')`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the missing stream reported", func() bool {
		return strings.Contains(p.Out.String(), `outbox.event.Payment`) && strings.Contains(p.Out.String(), "does not create streams")
	})
	for i := 5; i <= 8; i++ {
		if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', 'o-1', 'Step', jsonb_build_object('n', $2::int))`,
			fmt.Sprintf("11111111-0000-0000-0000-00000000000%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	m.CreateStream(t, "outbox.event.Payment", 1)
	pay := m.Await(t, "outbox.event.Payment", 1, time.Minute, p.Done())
	orders := m.Await(t, "outbox.event.Order", 7, time.Minute, p.Done())
	byKey := map[string][]string{}
	for _, r := range orders {
		byKey[r.PartitionKey] = append(byKey[r.PartitionKey], string(r.Data))
	}
	key := func(id string) string {
		return `{"schema":{"type":"string","optional":false},"payload":"` + id + `"}`
	}
	want := map[string][]string{
		key("o-1"): {`"{\"n\": 1}"`, `"{\"n\": 3}"`, `"{\"n\": 5}"`, `"{\"n\": 6}"`, `"{\"n\": 7}"`, `"{\"n\": 8}"`},
		key("o-2"): {`"{\"n\": 2}"`},
	}
	if len(byKey) != len(want) || !slices.Equal(byKey[key("o-1")], want[key("o-1")]) || !slices.Equal(byKey[key("o-2")], want[key("o-2")]) {
		t.Errorf("stream outbox.event.Order by partition key:\n%v\nwant, each once and in order:\n%v\n%s", byKey, want, p.Out.String())
	}
	if len(pay) != 1 || pay[0].PartitionKey != key("p-1") || string(pay[0].Data) != `"{\"n\": 4}"` {
		t.Errorf("stream outbox.event.Payment: %+v", pay)
	}
	if out := p.Out.String(); strings.Contains(out, "kinesis-s3cr3t-never-logged") ||
		!strings.Contains(out, `"sink":"kinesis"`) || !strings.Contains(out, `"delivery":"at-least-once, each partition key's events written in order`) {
		t.Errorf("the log shows the secret key, or its start line names neither the sink nor its guarantee:\n%s", out)
	}
}

// kinesisEvents are a stream's records as load events, checking that
// each record's partition key is its event's aggregate id.
func kinesisEvents(t *testing.T, recs []mototest.Record) []testenv.LoadEvent {
	t.Helper()
	var events []testenv.LoadEvent
	for i, r := range recs {
		var ev testenv.LoadEvent // a structured CloudEvent
		if err := json.Unmarshal(r.Data, &ev); err != nil {
			t.Fatalf("record %d: %v: %s", i, err, r.Data)
		}
		if r.PartitionKey != ev.PartitionKey {
			t.Errorf("record %d: partition key %q, aggregate id %q", i, r.PartitionKey, ev.PartitionKey)
		}
		events = append(events, ev)
	}
	return events
}

// Kinesis not answering under load (moto_server stopped with SIGSTOP for
// a few seconds), streaming and polling: the binary's requests time out,
// it starts again from its last confirmed position, and once Kinesis
// answers nothing is lost and each aggregate's events are in order
// (their first copies); what is written twice is what was in flight.
func TestKinesisPausedUnderLoad(t *testing.T) {
	// moto answers one request at a time (mototest): reading the stream
	// while it grows holds pgoutbox's writes back, so the load is smaller
	// than the other sinks'.
	const burst, inFlight = 3000, 1000
	for _, mode := range []string{"wal", "poll"} {
		t.Run(mode, func(t *testing.T) {
			e := testenv.New(t)
			e.Setup(e.Config())
			m := mototest.Start(t)
			m.CreateStream(t, "outbox.event.account", 4)
			p := testenv.StartBinaryEnv(t, kinesisEnv(), e.RunArgs(e.URL, "--sink", "kinesis", "--kinesis-region", mototest.Region,
				"--kinesis-endpoint", m.Endpoint(), "--kinesis-timeout", "2s", "--mode", mode, "--poll-interval", "50ms",
				"--max-buffered-records", fmt.Sprint(inFlight))...)
			load := e.StartLoad(t, 2)
			testenv.Eventually(t, 30*time.Second, "the load's first events in the stream", func() bool {
				return m.Len(t, "outbox.event.account") > 0
			})
			bulk := insertCommits(t, e, burst)
			testenv.Eventually(t, 60*time.Second, "a part of the burst in the stream", func() bool {
				return m.Len(t, "outbox.event.account") > 1000
			})
			atPause := m.Len(t, "outbox.event.account") // -1: moto did not answer in time
			m.Pause(t)
			time.Sleep(5 * time.Second)
			m.Continue(t)
			time.Sleep(2 * time.Second)
			committed := load.Finish()
			for id, seq := range bulk {
				committed[id] = seq
			}
			// Each read of the whole stream holds pgoutbox's writes back
			// (one request at a time): on a busy machine, reading it
			// often timed them out again and again.
			var recs []mototest.Record
			for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(2 * time.Second) {
				got, ok := m.TryReadStream(t, "outbox.event.account")
				if ok { // else moto lagging behind: ask again
					recs = got
					if rep, _ := testenv.CheckEvents(t, kinesisEvents(t, recs), committed); rep.Lost == 0 {
						break
					} else if time.Now().After(deadline) {
						t.Fatalf("every committed event not in the stream after 4m: %v", rep)
					}
				} else if time.Now().After(deadline) {
					t.Fatal("moto did not answer reads of the stream for 4m")
				}
			}
			time.Sleep(time.Second) // a late copy would show
			recs = m.ReadStream(t, "outbox.event.account")
			rep, _ := testenv.CheckEvents(t, kinesisEvents(t, recs), committed)
			t.Log(rep)
			if rep.Lost != 0 || rep.OrderViolations != 0 || rep.Delivered < 100 {
				t.Errorf("%v: want nothing lost, no order violation, at least 100 delivered", rep)
			}
			t.Logf("%d copies; %d records in the stream at the pause", rep.Duplicates, atPause)
			if rep.Duplicates > 2*inFlight {
				t.Errorf("%d duplicates, want at most %d", rep.Duplicates, 2*inFlight)
			}
			if !strings.Contains(p.Out.String(), `"msg":"reconnecting"`) {
				t.Errorf("the pause failed no request: it tested nothing\n%s", p.Out.String())
			}
		})
	}
}
