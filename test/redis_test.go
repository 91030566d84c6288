package test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/redistest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// checkRedis reads the stream (compact entries: the key, the aggregate id,
// holding the structured CloudEvent) and compares it with what committed:
// nothing lost, no event twice, and per aggregate the events in commit
// order.
func checkRedis(t *testing.T, read func(stream string) []redistest.Entry, stream string, committed map[string]int) testenv.Report {
	t.Helper()
	var entries []redistest.Entry
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Until every committed event is there: copies do not count.
		entries = read(stream)
		ids := map[string]bool{}
		for _, e := range entries {
			var ev struct{ ID string }
			if len(e.Fields) == 2 && json.Unmarshal([]byte(e.Fields[1]), &ev) == nil {
				if _, ok := committed[ev.ID]; ok {
					ids[ev.ID] = true
				}
			}
		}
		if len(ids) >= len(committed) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	var events []testenv.LoadEvent
	for _, e := range entries {
		if len(e.Fields) != 2 {
			t.Fatalf("entry %s: %d fields, want one (compact): %q", e.ID, len(e.Fields)/2, e.Fields)
		}
		var ev testenv.LoadEvent // the structured CloudEvent, as NATS carries it
		if err := json.Unmarshal([]byte(e.Fields[1]), &ev); err != nil {
			t.Fatalf("entry %s: %v: %s", e.ID, err, e.Fields[1])
		}
		if e.Fields[0] != ev.PartitionKey {
			t.Errorf("entry %s: field %q, the event's aggregate %q", e.ID, e.Fields[0], ev.PartitionKey)
		}
		events = append(events, ev)
	}
	rep, _ := testenv.CheckEvents(t, events, committed)
	if rep.Lost > 0 {
		t.Logf("lost: %s; the stream holds %d entries", strings.Join(testenv.Missing(events, committed), ", "), len(events))
	}
	return rep
}

// The Redis server killed (SIGKILL) under load and started again on its
// append-only file (appendfsync always), streaming and polling: the relay
// binary writes batches with many records in flight, loses nothing, keeps
// each aggregate's order, and writes nothing twice: a batch whose reply
// the kill took is found in the stream and not written again.
func TestRedisServerKilledUnderLoad(t *testing.T) {
	for _, mode := range []string{"wal", "poll"} {
		t.Run(mode, func(t *testing.T) {
			e := testenv.New(t)
			e.Setup(e.Config()) // the slot, before the first event
			s := redistest.Start(t)
			p := e.Run(t, "--sink", "redis", "--redis-address", s.Addr, "--mode", mode, "--poll-interval", "50ms")
			load := e.StartLoad(t, 4)
			time.Sleep(2 * time.Second)
			// A large transaction, and the kill once part of it is
			// written: many records are in flight then.
			before := s.Count("outbox.event.account")
			bulk := testenv.InsertBulk(t, e, 20000)
			testenv.Eventually(t, 30*time.Second, "a part of the large transaction written", func() bool {
				return s.Count("outbox.event.account") > before+3000
			})
			s.Kill()
			time.Sleep(time.Second)
			s.Start()
			time.Sleep(3 * time.Second)
			committed := load.Finish()
			for id, seq := range bulk {
				committed[id] = seq
			}
			rep := checkRedis(t, s.Entries, "outbox.event.account", committed)
			t.Log(rep)
			if rep.Lost != 0 || rep.Duplicates != 0 || rep.OrderViolations != 0 || rep.Delivered < 100 {
				t.Errorf("%v: want nothing lost, no duplicate, no order violation, at least 100 delivered\nredis-server:\n%s", rep, s.Log())
			}
			out := p.Out.String()
			if mode == "wal" && !strings.Contains(out, `"msg":"reconnecting"`) {
				t.Errorf("the kill failed no batch in flight (no reconnecting line): it tested nothing\n%s", out)
			}
			if !strings.Contains(out, `"sink":"redis"`) || !strings.Contains(out, `"delivery":"at-least-once;`) {
				t.Errorf("the start line names neither the sink nor its guarantee:\n%s", out)
			}
		})
	}
}

// A Debezium Server file whose sink is redis runs through the binary
// against a database that already holds the table and rows: the rows
// already there (snapshot.mode initial) and those written later become
// the entries Debezium Server writes (extended: key, value, the headers
// upper-cased). Exactly-once is refused at start.
func TestRedisFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb,
  seq bigint GENERATED ALWAYS AS IDENTITY);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-1', 'Paid', '{"n": 2}')`)
	s := redistest.Start(t)
	conf := testenv.WriteFile(t, "application.properties", testenv.DebeziumServer(t, e)+`debezium.sink.type=redis
debezium.sink.redis.address=`+s.Addr+`
debezium.sink.redis.message.format=extended
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.source.extended.headers.enabled=false
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
debezium.format.header.schemas.enable=false
debezium.format.key=simplestring
`)
	out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--delivery", "exactly-once")
	if ok || !strings.Contains(out, "exactly-once delivery needs Kafka transactions; Redis Streams have none") {
		t.Errorf("exactly-once with Redis: exit 0 %v, want it refused with the reason:\n%s", ok, out)
	}
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	testenv.Eventually(t, 60*time.Second, "the rows already in the table", func() bool { return s.Count("outbox.event.Order") >= 2 })
	if _, err := e.Conn.Exec(context.Background(), `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000003', 'Order', 'o-2', 'Placed', '{"n": 3}')`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the row written later", func() bool { return s.Count("outbox.event.Order") >= 3 })
	var got []string
	for _, en := range s.Entries("outbox.event.Order") {
		got = append(got, strings.Join(en.Fields, " | "))
	}
	want := []string{
		`key | o-1 | value | "{\"n\": 1}" | ID | "11111111-0000-0000-0000-000000000001"`,
		`key | o-1 | value | "{\"n\": 2}" | ID | "11111111-0000-0000-0000-000000000002"`,
		`key | o-2 | value | "{\"n\": 3}" | ID | "11111111-0000-0000-0000-000000000003"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), p.Out.String())
	}
	if !strings.Contains(p.Out.String(), `"sink":"redis"`) {
		t.Errorf("the start line does not name the sink:\n%s", p.Out.String())
	}
}

// A row too large for the server (proto-max-bulk-len), and one whose
// stream's key holds a string, are dead-lettered to the dead-letter stream,
// each aggregate's later event held behind them, other aggregates go on;
// once the row is fixed and the key removed, dlq replay writes them in
// order.
func TestRedisPoisonRowsDeadLettered(t *testing.T) {
	ctx := context.Background()
	e := testenv.New(t)
	e.Setup(e.Config())
	s := redistest.Start(t, "--proto-max-bulk-len", "1mb")
	if err := s.Client().Set(ctx, "outbox.event.blocked", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--sink", "redis", "--redis-address", s.Addr, "--mode", "wal")
	ok := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	big := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{"blob":"`+strings.Repeat("x", 1<<20)+`"}`))
	held := e.Insert(testenv.NewRow("order", "o-2", "Paid", `{"n":3}`))
	blocked := e.Insert(testenv.NewRow("blocked", "b-1", "Placed", `{"n":4}`))
	other := e.Insert(testenv.NewRow("order", "o-3", "Placed", `{"n":5}`))
	ids := func(stream string) []string {
		var out []string
		for _, en := range s.Entries(stream) {
			var ev struct {
				ID    string `json:"id"`
				Event struct {
					ID string `json:"id"`
				} `json:"event"`
			}
			_ = json.Unmarshal([]byte(en.Fields[1]), &ev)
			out = append(out, ev.ID)
		}
		return out
	}
	testenv.Eventually(t, 30*time.Second, "the other aggregate's event", func() bool { return len(ids("outbox.event.order")) >= 2 })
	testenv.Eventually(t, 30*time.Second, "three dead letters", func() bool { return s.Count("pgoutbox.dlq") >= 3 })
	if got, want := ids("outbox.event.order"), []string{ok[0], other[0]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("stream: %v, want %v (o-2 held)\n%s", got, want, p.Out.String())
	}
	var reasons []string
	for _, en := range s.Entries("pgoutbox.dlq") {
		reasons = append(reasons, en.Fields[1])
	}
	all := strings.Join(reasons, "\n")
	for _, want := range []string{big[0], held[0], blocked[0], "proto-max-bulk-len", "not a stream"} {
		if !strings.Contains(all, want) {
			t.Errorf("the dead letters do not name %q:\n%.2000s", want, all)
		}
	}
	if _, err := e.Conn.Exec(ctx, `UPDATE outbox SET payload = '{"fixed":true}' WHERE id = $1`, big[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Client().Del(ctx, "outbox.event.blocked").Err(); err != nil {
		t.Fatal(err)
	}
	out, stderr, okExit := testenv.CLI(t, "dlq", "replay", "--database-url", e.URL, "--sink", "redis", "--redis-address", s.Addr)
	if !okExit {
		t.Fatalf("dlq replay: %s%s", out, stderr)
	}
	if got, want := ids("outbox.event.order"), []string{ok[0], other[0], big[0], held[0]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after the replay: %v, want %v", got, want)
	}
	if got := ids("outbox.event.blocked"); strings.Join(got, " ") != blocked[0] {
		t.Errorf("the stream that was blocked: %v, want %v", got, blocked)
	}
}

// CloudEvents through Redis: the structured mode, the event as JSON the
// entry's value; the binary mode, which has no Redis binding, is refused
// at start.
func TestRedisCloudEvents(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	s := redistest.Start(t)
	out, ok := testenv.CLIOutput(t, "run", "--database-url", e.URL, "--sink", "redis", "--redis-address", s.Addr, "--format", "cloudevents-binary")
	if ok || !strings.Contains(out, "CloudEvents has no Redis protocol binding") {
		t.Errorf("cloudevents-binary: exit 0 %v, want it refused:\n%s", ok, out)
	}
	p := e.Run(t, "--sink", "redis", "--redis-address", s.Addr, "--mode", "wal", "--redis-message-format", "extended")
	id := e.Insert(testenv.NewRow("order", "o-1", "Order Placed", `{"n": 1}`))[0]
	testenv.Eventually(t, 30*time.Second, "the event", func() bool { return s.Count("outbox.event.order") >= 1 })
	en := s.Entries("outbox.event.order")[0]
	var ev struct{ ID, Type, Datacontenttype, Partitionkey string }
	if err := json.Unmarshal([]byte(en.Get("value")), &ev); err != nil || ev.ID != id || ev.Type != "Order Placed" ||
		ev.Datacontenttype != "application/json" || ev.Partitionkey != "o-1" || en.Get("key") != "o-1" ||
		!strings.HasPrefix(en.Get("CONTENT-TYPE"), "application/cloudevents+json") {
		t.Errorf("entry %q (%v)\n%s", en.Fields, err, p.Out.String())
	}
}

// Redis down, through the binary: the relay's problem gauge, readiness
// and status say so, naming redis, while the events wait; with the server
// back on its data they are written, and the problem clears.
func TestRedisDownShowsInMetricsAndStatus(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	s := redistest.Start(t)
	addr := testenv.FreeAddr(t)
	p := e.Run(t, "--sink", "redis", "--redis-address", s.Addr, "--mode", "wal", "--metrics-addr", addr,
		"--metrics-interval", "200ms")
	base := "http://" + addr
	e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	testenv.Eventually(t, 30*time.Second, "the first event", func() bool { return s.Count("outbox.event.order") == 1 })
	s.Kill()
	e.Insert(testenv.NewRow("order", "o-1", "Paid", `{"n":2}`))
	testenv.Eventually(t, 30*time.Second, "the problem gauge", func() bool { return testenv.Scrape(t, base)["pgoutbox_kafka_problem"] == 1 })
	testenv.Eventually(t, 30*time.Second, "a redis problem in status", func() bool {
		st, _ := e.Status(t)
		return strings.Contains(st.KafkaProblem, "redis")
	})
	if code := testenv.HTTPStatus(base + "/readyz"); code == 200 {
		t.Errorf("ready while Redis is down")
	}
	s.Start()
	testenv.Eventually(t, 60*time.Second, "the waiting event", func() bool { return s.Count("outbox.event.order") == 2 })
	testenv.Eventually(t, 30*time.Second, "the problem cleared", func() bool { return testenv.Scrape(t, base)["pgoutbox_kafka_problem"] == 0 })
	if t.Failed() {
		t.Log(p.Out.String())
	}
}

// A Redis Cluster of three primaries, the node that holds the stream
// killed under load and started again on its data: through the binary
// (--redis-cluster), nothing lost, each aggregate in order, nothing twice.
func TestRedisClusterNodeKilledUnderLoad(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	cl := redistest.StartCluster(t, 3)
	p := e.Run(t, "--sink", "redis", "--redis-cluster", "--redis-address", cl.Addrs(), "--mode", "wal")
	const stream = "outbox.event.account"
	count := func() int { return len(cl.Entries(stream)) }
	load := e.StartLoad(t, 4)
	time.Sleep(2 * time.Second)
	before := count()
	bulk := testenv.InsertBulk(t, e, 20000)
	testenv.Eventually(t, 30*time.Second, "a part of the large transaction written", func() bool { return count() > before+3000 })
	node := cl.Node(stream)
	node.Kill()
	time.Sleep(time.Second)
	node.Start()
	cl.AwaitOK()
	time.Sleep(3 * time.Second)
	committed := load.Finish()
	for id, seq := range bulk {
		committed[id] = seq
	}
	rep := checkRedis(t, cl.Entries, stream, committed)
	t.Log(rep)
	if rep.Lost != 0 || rep.Duplicates != 0 || rep.OrderViolations != 0 || rep.Delivered < 100 {
		t.Errorf("%v: want nothing lost, no duplicate, no order violation, at least 100 delivered\n%s", rep, node.Log())
	}
	if !strings.Contains(p.Out.String(), `"msg":"reconnecting"`) {
		t.Errorf("the kill failed no batch in flight (no reconnecting line): it tested nothing\n%s", p.Out.String())
	}
}
