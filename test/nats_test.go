package test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/pgoutbox/pgoutbox/test/natstest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// checkNATS reads the stream and compares it with what committed: nothing
// lost, no event twice (the duplicate window drops copies), and per
// aggregate the events in commit order.
func checkNATS(t *testing.T, s *natstest.Server, stream string, committed map[string]int) testenv.Report {
	t.Helper()
	var msgs []natstest.Message
	deadline := time.Now().Add(60 * time.Second)
	for {
		msgs = s.Messages(stream)
		if len(msgs) >= len(committed) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	var events []testenv.LoadEvent
	for _, m := range msgs {
		var ev testenv.LoadEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("message %d: %v: %s", m.Seq, err, m.Data)
		}
		if got := m.Header.Get("Nats-Msg-Id"); got != ev.ID {
			t.Errorf("message %d: Nats-Msg-Id %q, event id %q", m.Seq, got, ev.ID)
		}
		events = append(events, ev)
	}
	rep, _ := testenv.CheckEvents(t, events, committed)
	if rep.Lost > 0 {
		t.Logf("lost: %s; the stream holds %d messages", strings.Join(testenv.Missing(events, committed), ", "), len(events))
	}
	return rep
}

// The NATS server killed (SIGKILL) under load and started again on its
// store, streaming and polling: the relay binary publishes with many
// messages in flight, loses nothing, keeps each aggregate's order, and
// what it sends again is dropped by the stream's duplicate window.
func TestNATSServerKilledUnderLoad(t *testing.T) {
	for _, mode := range []string{"wal", "poll"} {
		t.Run(mode, func(t *testing.T) {
			e := testenv.New(t)
			e.Setup(e.Config()) // the slot, before the first event
			s := natstest.Start(t)
			s.CreateStream("outbox", "outbox.event.>", "pgoutbox.dlq")
			p := e.Run(t, "--sink", "nats-jetstream", "--nats-url", s.URL, "--nats-ack-timeout", "2s", "--mode", mode,
				"--poll-interval", "50ms")
			load := e.StartLoad(t, 4)
			time.Sleep(2 * time.Second)
			// A large transaction, and the kill once part of it is
			// stored: many messages are in flight then.
			before := s.Count("outbox")
			bulk := testenv.InsertBulk(t, e, 20000)
			testenv.Eventually(t, 30*time.Second, "a part of the large transaction stored", func() bool { return s.Count("outbox") > before+3000 })
			s.Kill()
			time.Sleep(time.Second)
			s.Start()
			time.Sleep(3 * time.Second)
			committed := load.Finish()
			for id, seq := range bulk {
				committed[id] = seq
			}
			rep := checkNATS(t, s, "outbox", committed)
			t.Log(rep)
			if rep.Lost != 0 || rep.Duplicates != 0 || rep.OrderViolations != 0 || rep.Delivered < 100 {
				t.Errorf("%v: want nothing lost, no duplicate, no order violation, at least 100 delivered\nnats-server:\n%s", rep, s.Log())
			}
			// Streaming, messages are always in flight, and the kill
			// fails some; polling waits for each batch's acks, and a kill
			// between two batches fails none (the next batch waits in the
			// client's reconnect buffer).
			if mode == "wal" && !strings.Contains(p.Out.String(), `"msg":"reconnecting"`) {
				t.Errorf("the kill failed no message in flight (no reconnecting line): it tested nothing\n%s", p.Out.String())
			}
			if !strings.Contains(p.Out.String(), `"sink":"nats-jetstream"`) ||
				!strings.Contains(p.Out.String(), `"delivery":"at-least-once, deduplicated by event id within the stream's duplicate window"`) {
				t.Errorf("the start line names neither the sink nor its guarantee:\n%s", p.Out.String())
			}
		})
	}
}

// A nats-server that goes away is named as what it is: status and
// /readyz say nats-jetstream is unreachable, not Kafka; with it back the
// problem clears and what waited is delivered.
func TestNATSProblemNamedInStatus(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config()) // the pipeline, before status reads it
	s := natstest.Start(t)
	s.CreateStream("outbox", "outbox.event.>", "pgoutbox.dlq")
	addr := testenv.FreeAddr(t)
	e.Run(t, "--sink", "nats-jetstream", "--nats-url", s.URL, "--metrics-addr", addr, "--metrics-interval", "200ms")
	e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	testenv.Eventually(t, 30*time.Second, "a healthy status naming the broker", func() bool {
		st, ok := e.Status(t)
		return ok && st.KafkaKnown && st.KafkaProblem == "" && st.Broker == "nats-jetstream" && s.Count("outbox") == 1
	})

	s.Kill()
	var st testenv.Status
	testenv.Eventually(t, 30*time.Second, "status naming nats-jetstream unreachable", func() bool {
		var ok bool
		st, ok = e.Status(t)
		return !ok && strings.Contains(st.KafkaProblem, "unreachable") &&
			strings.Contains(strings.Join(st.Problems, "\n"), "nats-jetstream: unreachable")
	})
	t.Logf("status problems: %q", st.Problems)
	if code, body := readyz(t, addr); code != http.StatusServiceUnavailable || !strings.Contains(body, "nats-jetstream: unreachable") {
		t.Errorf("/readyz with nats-server gone: %d %q", code, body)
	}
	out, _ := testenv.CLIOutput(t, "status", "--database-url", e.URL)
	if !strings.Contains(out, "nats-jetstream unreachable") || strings.Contains(out, "kafka") {
		t.Errorf("status names another broker than nats-jetstream:\n%s", out)
	}

	s.Start()
	e.Insert(testenv.NewRow("order", "o-1", "Paid", `{}`))
	testenv.Eventually(t, 60*time.Second, "the problem cleared and the event delivered", func() bool {
		st, ok := e.Status(t)
		return ok && st.KafkaProblem == "" && s.Count("outbox") == 2
	})
}

// readyz is GET /readyz on the relay's metrics address.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A Debezium Server file whose sink is nats-jetstream runs through the
// binary against a database that already holds the table and rows: the
// stream is created, the rows already there (snapshot.mode initial) and
// those written later are published with Debezium's routing,
// value and id header, each with its id as Nats-Msg-Id. Exactly-once is
// refused at start.
func TestNATSFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb,
  seq bigint GENERATED ALWAYS AS IDENTITY);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-1', 'Paid', '{"n": 2}')`)
	s := natstest.Start(t)
	conf := testenv.WriteFile(t, "application.properties", testenv.DebeziumServer(t, e)+`debezium.sink.type=nats-jetstream
debezium.sink.nats-jetstream.url=`+s.URL+`
debezium.sink.nats-jetstream.create-stream=true
debezium.sink.nats-jetstream.storage=file
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
	if ok || !strings.Contains(out, "exactly-once delivery needs Kafka transactions; NATS JetStream has none") {
		t.Errorf("exactly-once with NATS: exit 0 %v, want it refused with the reason:\n%s", ok, out)
	}
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	// Debezium Server's default subjects (*.*.*) also take other
	// clients' three-token subjects: the events are those under outbox.
	events := func() []natstest.Message {
		var out []natstest.Message
		for _, m := range s.Messages("DebeziumStream") {
			if strings.HasPrefix(m.Subject, "outbox.") {
				out = append(out, m)
			}
		}
		return out
	}
	testenv.Eventually(t, 60*time.Second, "the rows already in the table", func() bool { return len(events()) >= 2 })
	if _, err := e.Conn.Exec(context.Background(), `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000003', 'Payment', 'p-9', 'Captured', '{"n": 3}')`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the row written later", func() bool { return len(events()) >= 3 })
	var got []string
	for _, m := range events() {
		got = append(got, fmt.Sprintf("%s %s id=%s msgid=%s", m.Subject, m.Data, m.Header.Get("id"), m.Header.Get("Nats-Msg-Id")))
	}
	// Debezium's rendering (the corpus checks it against Debezium): a jsonb
	// payload is a JSON string without value schemas, the id header a uuid
	// with its schema (header schemas stay on).
	idHeader := func(id string) string {
		return `{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"` + id + `"}`
	}
	want := []string{
		`outbox.event.Order "{\"n\": 1}" id=` + idHeader("11111111-0000-0000-0000-000000000001") + ` msgid=11111111-0000-0000-0000-000000000001`,
		`outbox.event.Order "{\"n\": 2}" id=` + idHeader("11111111-0000-0000-0000-000000000002") + ` msgid=11111111-0000-0000-0000-000000000002`,
		`outbox.event.Payment "{\"n\": 3}" id=` + idHeader("11111111-0000-0000-0000-000000000003") + ` msgid=11111111-0000-0000-0000-000000000003`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), p.Out.String())
	}
}

// A row too large for its stream is dead-lettered to the dead-letter
// subject on the same server, its aggregate's later event held behind it,
// other aggregates go on; once the row is fixed, dlq replay publishes both
// in order, each under its event id.
func TestNATSPoisonRowDeadLettered(t *testing.T) {
	ctx := context.Background()
	e := testenv.New(t)
	e.Setup(e.Config())
	s := natstest.Start(t)
	_, js := s.Connect()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "outbox", Subjects: []string{"outbox.event.>"}, MaxMsgSize: 2048}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "dlq", Subjects: []string{"pgoutbox.dlq"}}); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--sink", "nats-jetstream", "--nats-url", s.URL, "--mode", "wal")
	ok := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	big := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{"blob":"`+strings.Repeat("x", 4000)+`"}`))
	held := e.Insert(testenv.NewRow("order", "o-2", "Paid", `{"n":3}`))
	other := e.Insert(testenv.NewRow("order", "o-3", "Placed", `{"n":4}`))
	ids := func(stream string) []string {
		var out []string
		for _, m := range s.Messages(stream) {
			out = append(out, m.Header.Get("Nats-Msg-Id"))
		}
		return out
	}
	testenv.Eventually(t, 30*time.Second, "the other aggregate's event", func() bool { return len(ids("outbox")) >= 2 })
	testenv.Eventually(t, 30*time.Second, "two dead letters", func() bool { return len(ids("dlq")) >= 2 })
	if got, want := ids("outbox"), []string{ok[0], other[0]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("stream: %v, want %v (o-2 held)\n%s", got, want, p.Out.String())
	}
	if got, want := ids("dlq"), []string{"dlq:" + big[0], "dlq:" + held[0]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("dead letters: %v, want %v", got, want)
	}
	if _, err := e.Conn.Exec(ctx, `UPDATE outbox SET payload = '{"fixed":true}' WHERE id = $1`, big[0]); err != nil {
		t.Fatal(err)
	}
	out, stderr, okExit := testenv.CLI(t, "dlq", "replay", "--database-url", e.URL, "--sink", "nats-jetstream", "--nats-url", s.URL)
	if !okExit {
		t.Fatalf("dlq replay: %s%s", out, stderr)
	}
	if got, want := ids("outbox"), []string{ok[0], other[0], big[0], held[0]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after the replay: %v, want %v", got, want)
	}
}

// CloudEvents through NATS follow its protocol binding: the structured
// mode's content-type says application/cloudevents, the binary mode's
// attributes are ce- headers, percent-encoded, datacontenttype among them.
func TestNATSCloudEventsBinding(t *testing.T) {
	for _, tc := range []struct {
		format string
		check  func(m natstest.Message) string
	}{
		{"cloudevents", func(m natstest.Message) string {
			var ev struct{ Type, Datacontenttype string }
			if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Type != "Order Placed" || ev.Datacontenttype != "application/json" ||
				!strings.HasPrefix(m.Header.Get("content-type"), "application/cloudevents+json") {
				return fmt.Sprintf("structured: %s %v (%v)", m.Data, m.Header, err)
			}
			return ""
		}},
		{"cloudevents-binary", func(m natstest.Message) string {
			if string(m.Data) != `{"n": 1}` || m.Header.Get("ce-type") != "Order%20Placed" || m.Header.Get("ce-specversion") != "1.0" ||
				m.Header.Get("ce-datacontenttype") != "application/json" || m.Header.Get("ce-partitionkey") != "o-1" ||
				m.Header.Get("content-type") != "" || m.Header.Get("ce_type") != "" {
				return fmt.Sprintf("binary: %s %v", m.Data, m.Header)
			}
			return ""
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			e := testenv.New(t)
			e.Setup(e.Config())
			s := natstest.Start(t)
			s.CreateStream("outbox", "outbox.event.>", "pgoutbox.dlq")
			p := e.Run(t, "--sink", "nats-jetstream", "--nats-url", s.URL, "--mode", "wal", "--format", tc.format)
			e.Insert(testenv.NewRow("order", "o-1", "Order Placed", `{"n": 1}`))
			testenv.Eventually(t, 30*time.Second, "the event", func() bool { return s.Count("outbox") >= 1 })
			if why := tc.check(s.Messages("outbox")[0]); why != "" {
				t.Errorf("%s\n%s", why, p.Out.String())
			}
		})
	}
}

// A Debezium Server file whose NATS JetStream sink takes TLS from one Java
// key store (auth.tls.keystore: the client's key and the CA it trusts, as
// Debezium Server uses it), against a server that requires TLS: the
// binary publishes a row of a table that already holds it, and never
// shows the store's password.
func TestNATSJavaKeyStoreFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}')`)
	ca := tlstest.New(t)
	s := natstest.StartTLS(t, ca)
	dir := t.TempDir()
	store := natsKeyStore(t, dir, ca)
	conf := testenv.WriteFile(t, "application.properties", testenv.DebeziumServer(t, e)+`debezium.sink.type=nats-jetstream
debezium.sink.nats-jetstream.url=`+s.URL+`
debezium.sink.nats-jetstream.create-stream=true
debezium.sink.nats-jetstream.auth.tls.keystore=`+store+`
debezium.sink.nats-jetstream.auth.tls.keystore.password=${NATS_STORE_PASSWORD}
debezium.sink.nats-jetstream.auth.tls.password=${NATS_STORE_PASSWORD}
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`)
	p := testenv.StartBinaryEnv(t, []string{"NATS_STORE_PASSWORD=Nats-Store-Pass-9"}, "run", "--config", conf, "--log-format", "json")
	testenv.Eventually(t, 60*time.Second, "the row already in the table", func() bool {
		for _, m := range s.Messages("DebeziumStream") {
			if m.Subject == "outbox.event.Order" {
				return true
			}
		}
		return false
	})
	p.Stop(t)
	if out := p.Out.String(); strings.Contains(out, "Nats-Store-Pass-9") {
		t.Errorf("the store's password in the output:\n%s", out)
	}
}

// natsKeyStore writes a PKCS12 store, as keytool writes them, holding a
// client key and certificate ca signed, and ca itself as a trusted
// certificate.
func natsKeyStore(t *testing.T, dir string, ca *tlstest.CA) string {
	t.Helper()
	cert, key := ca.ClientFiles(t, dir, "relay", time.Now().Add(time.Hour))
	caFile := ca.WritePEM(t, dir)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	p12, err := pkcs12.Modern.Encode(pair.PrivateKey, pair.Leaf, nil, "Nats-Store-Pass-9")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nats.p12")
	if err := os.WriteFile(path, p12, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", caFile, "-keystore", path,
		"-storetype", "PKCS12", "-storepass", "Nats-Store-Pass-9").CombinedOutput(); err != nil {
		t.Fatalf("keytool: %v\n%s", err, out)
	}
	return path
}

// Debezium Server needs no dead-letter subject, so a stream made before
// that does not take the default one (<slot>.dlq) is a warning at start,
// not a refusal: events flow. An event that cannot be published then stops
// pgoutbox, naming the subject, before anything after it is published or
// confirmed, as it stops Debezium Server; once a stream takes the subject,
// a restart dead-letters it and publishes what followed, nothing lost.
func TestNATSDeadLetterSubjectWithoutStream(t *testing.T) {
	ctx := context.Background()
	e := testenv.New(t)
	e.Setup(e.Config())
	s := natstest.Start(t)
	_, js := s.Connect()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "outbox", Subjects: []string{"outbox.event.>"}, MaxMsgSize: 2048}); err != nil {
		t.Fatal(err)
	}
	ids := func(stream string) []string {
		var out []string
		for _, m := range s.Messages(stream) {
			out = append(out, m.Header.Get("Nats-Msg-Id"))
		}
		return out
	}
	args := []string{"--sink", "nats-jetstream", "--nats-url", s.URL, "--mode", "wal"}
	p := e.Run(t, args...)
	first := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	testenv.Eventually(t, 30*time.Second, "the first event", func() bool { return len(ids("outbox")) >= 1 })
	if !strings.Contains(p.Out.String(), "no stream takes the dead-letter subject") {
		t.Errorf("no warning of the dead-letter subject no stream takes:\n%s", p.Out)
	}
	big := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{"blob":"`+strings.Repeat("x", 4000)+`"}`))
	after := e.Insert(testenv.NewRow("order", "o-3", "Placed", `{"n":3}`))
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60s after an event it cannot publish, with no stream for dead letters:\n%s", p.Out)
	}
	if !strings.Contains(p.Out.String(), "no JetStream stream takes the dead-letter subject pgoutbox.dlq") {
		t.Errorf("the exit does not name the dead-letter subject:\n%s", p.Out)
	}
	if got := ids("outbox"); len(got) != 1 || got[0] != first[0] {
		t.Errorf("published past the event it could not publish: %v", got)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "dlq", Subjects: []string{"pgoutbox.dlq"}}); err != nil {
		t.Fatal(err)
	}
	p = e.Run(t, args...)
	testenv.Eventually(t, 30*time.Second, "the dead letter and the event after it", func() bool {
		return len(ids("dlq")) >= 1 && len(ids("outbox")) >= 2
	})
	p.Stop(t)
	if got, want := ids("dlq"), []string{"dlq:" + big[0]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("dead letters %v, want %v", got, want)
	}
	if got, want := ids("outbox"), []string{first[0], after[0]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("stream %v, want %v", got, want)
	}
}

// A Debezium Server file with heartbeat.interval.ms and
// provide.transaction.metadata into NATS JetStream: the heartbeat and
// transaction records go to their subjects as Debezium Server delivers
// them. A stream over Debezium Server's default subjects (*.*.*) takes
// neither, and Debezium Server fails at the first of them: pgoutbox
// refuses it at start, naming the subject. With the subjects taken, the
// rows already in the table go out, a transaction's events between its
// BEGIN and END records, heartbeats on their subject, and the slot is
// confirmed past the last transaction.
func TestNATSHeartbeatAndTransactionRecords(t *testing.T) {
	ctx := context.Background()
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('22222222-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('22222222-0000-0000-0000-000000000002', 'Order', 'o-2', 'Placed', '{"n": 2}')`)
	s := natstest.Start(t)
	base := testenv.DebeziumServer(t, e) + `debezium.sink.type=nats-jetstream
debezium.sink.nats-jetstream.url=` + s.URL + `
debezium.sink.nats-jetstream.create-stream=true
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.heartbeat.interval.ms=200
debezium.source.provide.transaction.metadata=true
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
`
	refused := testenv.WriteFile(t, "default-subjects.properties", base)
	if out, ok := testenv.CLIOutput(t, "run", "--config", refused); ok || !strings.Contains(out, "no JetStream stream takes subject __debezium-heartbeat.dbserver1") {
		t.Errorf("the default subjects: exit 0 %v, want the heartbeat subject named:\n%s", ok, out)
	}
	_, js := s.Connect()
	if err := js.DeleteStream(ctx, "DebeziumStream"); err != nil { // created before the check, as Debezium Server creates it
		t.Fatal(err)
	}
	conf := testenv.WriteFile(t, "application.properties", base+`debezium.sink.nats-jetstream.stream-name=Outbox
debezium.sink.nats-jetstream.subjects=outbox.>,__debezium-heartbeat.>,dbserver1.transaction
`)
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json")
	bySubject := func(subject string) []natstest.Message {
		var out []natstest.Message
		for _, m := range s.Messages("Outbox") {
			if m.Subject == subject {
				out = append(out, m)
			}
		}
		return out
	}
	testenv.Eventually(t, 60*time.Second, "the rows already in the table", func() bool { return len(bySubject("outbox.event.Order")) >= 2 })
	tx, err := e.Conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"22222222-0000-0000-0000-000000000003", "22222222-0000-0000-0000-000000000004"} {
		if _, err := tx.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', 'o-3', 'Paid', '{}')`, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var commitEnd string
	if err := e.Conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&commitEnd); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the transaction's records and heartbeats", func() bool {
		return len(bySubject("dbserver1.transaction")) >= 2 && len(bySubject("__debezium-heartbeat.dbserver1")) >= 2
	})
	testenv.Eventually(t, 30*time.Second, "the slot confirmed past the transaction", func() bool {
		var past bool
		err := e.Conn.QueryRow(ctx, "SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'debezium'", commitEnd).Scan(&past)
		return err == nil && past
	})
	p.Stop(t)

	var order []string
	for _, m := range s.Messages("Outbox") {
		switch m.Subject {
		case "dbserver1.transaction":
			var r struct {
				Status string `json:"status"`
				Count  *int   `json:"event_count"`
			}
			if err := json.Unmarshal(m.Data, &r); err != nil {
				t.Fatalf("transaction record %s: %v", m.Data, err)
			}
			order = append(order, fmt.Sprintf("%s %v", r.Status, r.Count != nil && *r.Count == 2))
		case "outbox.event.Order":
			order = append(order, m.Header.Get("Nats-Msg-Id"))
		}
	}
	want := []string{"22222222-0000-0000-0000-000000000001", "22222222-0000-0000-0000-000000000002",
		"BEGIN false", "22222222-0000-0000-0000-000000000003", "22222222-0000-0000-0000-000000000004", "END true"}
	if strings.Join(order, "\n") != strings.Join(want, "\n") {
		t.Errorf("events and transaction records:\n%s\nwant\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
	for _, m := range bySubject("__debezium-heartbeat.dbserver1") {
		var v map[string]int64
		if err := json.Unmarshal(m.Data, &v); err != nil || len(v) != 1 || v["ts_ms"] <= 0 {
			t.Errorf("heartbeat %s: want {\"ts_ms\": …} (%v)", m.Data, err)
		}
	}
}
