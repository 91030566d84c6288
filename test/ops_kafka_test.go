package test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

func createTopic(t *testing.T, brokers []string, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// A topic that does not exist, with topic creation off: the records wait
// (the slot keeps them), /readyz is not ready and status exits non-zero,
// both naming the topic, and the log names the topic and the event. Once
// the topic is created, every event is delivered and the problem clears.
func TestKafkaMissingTopicReported(t *testing.T) {
	e := testenv.NewKafka(t) // creates topics only when a client asks it to
	const topic = "outbox.event.order"
	var ids []string
	for i := 0; i < 5; i++ { // the user's rows, there before the relay starts
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%2), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	addr := testenv.FreeAddr(t)
	out := testenv.StartBinary(t, "run", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","),
		"--kafka-create-topics=false", "--metrics-addr", addr, "--metrics-interval", "200ms",
		"--status-interval", "100ms", "--heartbeat-interval", "200ms", "--log-format", "json").Out

	testenv.Eventually(t, 30*time.Second, "/readyz not ready, naming the topic", func() bool {
		code, body := testenv.HTTPGet("http://" + addr + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, topic) && strings.Contains(body, "does not exist")
	})
	var st testenv.Status
	var ok bool
	testenv.Eventually(t, 30*time.Second, "status naming the topic", func() bool {
		st, ok = e.Status(t)
		return !ok && strings.Contains(strings.Join(st.Problems, "\n"), topic) && strings.Contains(st.KafkaProblem, topic)
	})
	t.Logf("status problems: %q", st.Problems)
	// Written while the topic is missing: they wait too.
	for i := 5; i < 10; i++ {
		ids = append(ids, e.Insert(testenv.NewRow("order", fmt.Sprint("o-", i%2), "Placed", fmt.Sprintf(`{"i":%d}`, i)))...)
	}
	named := false
	for _, id := range ids {
		named = named || len(out.Lines(topic, id, "UNKNOWN_TOPIC_OR_PARTITION")) > 0
	}
	if !named {
		t.Errorf("no log line names the topic, an event id and the error")
	}

	createTopic(t, e.Brokers, topic)
	testenv.AwaitIDs(t, e.Brokers, topic, ids, 60*time.Second)
	testenv.Eventually(t, 30*time.Second, "/readyz ready again", func() bool {
		code, _ := testenv.HTTPGet("http://" + addr + "/readyz")
		return code == http.StatusOK
	})
	testenv.Eventually(t, 30*time.Second, "status without the Kafka problem", func() bool {
		st, ok = e.Status(t)
		return ok && st.KafkaProblem == "" && len(st.Problems) == 0
	})
	if len(out.Lines("kafka acknowledges records again", topic)) == 0 {
		t.Error("no log line says the topic takes records again")
	}
}

// With the broker down, status says Kafka is unreachable (exit non-zero);
// with it back, the problem clears and what waited is delivered.
func TestKafkaUnreachableInStatus(t *testing.T) {
	e := testenv.New(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.Brokers = broker.Brokers
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))
	testenv.StartBinary(t, "run", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","),
		"--status-interval", "100ms", "--heartbeat-interval", "200ms", "--log-format", "json")
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "a healthy status", func() bool {
		st, ok := e.Status(t)
		return ok && st.KafkaKnown && st.KafkaProblem == ""
	})

	broker.Kill()
	ids = append(ids, e.Insert(testenv.NewRow("order", "o-1", "Shipped", `{}`))...)
	var st testenv.Status
	testenv.Eventually(t, 30*time.Second, "status naming Kafka unreachable", func() bool {
		var ok bool
		st, ok = e.Status(t)
		return !ok && strings.Contains(st.KafkaProblem, "unreachable") &&
			strings.Contains(strings.Join(st.Problems, "\n"), "kafka: unreachable")
	})
	t.Logf("status problems: %q", st.Problems)

	broker.Start()
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 60*time.Second)
	testenv.Eventually(t, 30*time.Second, "the problem cleared", func() bool {
		st, ok := e.Status(t)
		return ok && st.KafkaProblem == ""
	})
}

// --kafka-tls against a plaintext listener stops the relay at start with
// a clear message, as the docs say; it is not retried.
func TestKafkaTLSToPlaintextStops(t *testing.T) {
	e := testenv.NewKafka(t)
	start := time.Now()
	code, out := testenv.RunOnce(t, 60*time.Second, []string{"PGOUTBOX_KAFKA_PASSWORD=Kafka-Secret-31"}, "run", "--database-url", e.URL,
		"--kafka-brokers", strings.Join(e.Brokers, ","), "--kafka-tls",
		"--kafka-sasl-mechanism", "PLAIN", "--kafka-username", "relay", "--log-format", "json")
	took := time.Since(start)
	t.Logf("exit %d after %v", code, took.Round(time.Millisecond))
	if code == 0 || took > 20*time.Second {
		t.Errorf("exit %d after %v; want a non-zero exit within 20s", code, took)
	}
	if !strings.Contains(out, "speaks plaintext, not TLS") || !strings.Contains(out, "--kafka-tls") {
		t.Errorf("the output does not say the broker speaks plaintext and what to change")
	}
	if strings.Contains(out, "Kafka-Secret-31") {
		t.Errorf("the output shows the SASL password")
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// Apache Kafka's authorizer: the relay's user may connect but write
// nowhere. Its first event is refused with TOPIC_AUTHORIZATION_FAILED and
// dead-lettered in the table, and status names the topic and the grant
// that is missing (the dead-letter topic is refused too, so the relay
// retries that). Once WRITE is granted on the relay's topics, the relay
// tries the topic again (5 s after its refusal: events until then are
// dead-lettered too), a new event is delivered, and the dead letter
// reaches its topic.
func TestKafkaAuthorization(t *testing.T) {
	e := testenv.NewKafka(t)
	b := kafkatest.SharedLocal(t)
	cfg := e.Config()
	e.Setup(cfg)
	p := testenv.StartBinaryEnv(t, []string{"PGOUTBOX_KAFKA_PASSWORD=" + kafkatest.LimitedPassword}, e.RunArgs(e.URL,
		"--kafka-brokers", strings.Join(b.SASLPlaintext, ","), "--kafka-sasl-mechanism", "SCRAM-SHA-256",
		"--kafka-username", kafkatest.LimitedUser, "--mode", "wal")...)
	first := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`))[0]
	var st testenv.Status
	testenv.Eventually(t, 30*time.Second, "status naming the refused topic", func() bool {
		var ok bool
		st, ok = e.Status(t)
		return !ok && strings.Contains(st.KafkaProblem, "not authorized to write to topic") &&
			strings.Contains(st.KafkaProblem, "grant the relay's Kafka user WRITE")
	})
	t.Logf("status: %s", st.KafkaProblem)
	var n map[string]int
	var reasons map[string]string
	testenv.Eventually(t, 30*time.Second, "the event dead-lettered", func() bool {
		n, reasons = testenv.DeadLetterRows(t, e)
		return len(n) > 0
	})
	if n[first] != 1 || !strings.Contains(reasons[first], "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("dead letters %v %v: want event %s once, refused as not authorized", n, reasons, first)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	acl := kadm.NewACLs().Allow("User:"+kafkatest.LimitedUser).AllowHosts("*").Topics("outbox.event.", "pgoutbox.").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpDescribe, kadm.OpCreate, kadm.OpDescribeConfigs)
	results, err := adm.CreateACLs(testenv.TimeoutContext(t, 15*time.Second), acl)
	for _, r := range results {
		err = errors.Join(err, r.Err)
	}
	if err != nil {
		t.Fatalf("granting WRITE: %v", err)
	}
	granted := time.Now()
	time.Sleep(6 * time.Second) // past the refusal's 5 s
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.Brokers...))
		if err == nil {
			_, err = kadm.NewClient(cl).DeleteACLs(testenv.TimeoutContext(t, 15*time.Second), acl)
			cl.Close()
		}
		if err != nil {
			t.Errorf("removing the grants: %v", err)
		}
	})
	second := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", second, 60*time.Second)
	t.Logf("an event delivered %v after the grant", time.Since(granted).Round(time.Millisecond))
	dead := 0
	for _, rec := range testenv.Drain(t, e.Brokers, "pgoutbox.dlq", 0) {
		if strings.Contains(string(rec.Value), first) {
			dead++
		}
	}
	if dead != 1 {
		t.Errorf("the dead letter of %s reached pgoutbox.dlq %d times, want once", first, dead)
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

// A poll session waiting for a broker that is down, whose connection to
// PostgreSQL is then lost, says so once, not at every tick: the session cannot end
// before Kafka answers for what it sent, and its housekeeping used to
// log "saving the Kafka health failed: conn closed" ten times a second
// meanwhile (nemesis seed 11: 750 lines in two minutes).
func TestLostConnectionWhileKafkaIsDownSaidOnce(t *testing.T) {
	e := testenv.New(t)
	broker := kafkatest.StartDevbroker(t, t.TempDir())
	e.Brokers = broker.Brokers
	p := e.Run(t, "--mode", "poll", "--poll-interval", "100ms")
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", e.Insert(testenv.NewRow("order", "o-1", "Placed", `{}`)), 30*time.Second)

	broker.Kill()
	ids := e.InsertN("order", 20)
	time.Sleep(500 * time.Millisecond) // the poll has read the rows and waits for their acks
	if _, err := e.Conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND datname = current_database() AND backend_type = 'client backend'`); err != nil {
		t.Fatal(err)
	}
	// Kafka's health changes after the connection is gone: housekeeping
	// has something to save and cannot.
	testenv.Eventually(t, 30*time.Second, "kafka unreachable", func() bool {
		return len(p.Logged("kafka is not reachable; records wait for it")) > 0
	})
	time.Sleep(3 * time.Second)
	spam := len(p.Logged("saving the Kafka health failed")) + len(p.Logged("saving liveness failed"))
	said := len(p.Logged("the session's connection to PostgreSQL is closed; the session ends at its next statement, or once Kafka has answered for what it sent"))
	broker.Start()
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 60*time.Second)
	if spam > 0 || said != 1 {
		t.Fatalf("on a closed connection housekeeping logged its failures %d times in 3 s and said the connection was closed %d times, want 0 and 1:\n%s",
			spam, said, p.Out.String())
	}
}

// --topic-partitions and --topic-configs, on a table that holds rows: the
// topic the snapshot's first record goes to is created with them, before
// that record, and every row arrives in it.
func TestKafkaTopicCreationFlags(t *testing.T) {
	e := testenv.ExistingLedger(t, 100)
	b := kafkatest.Shared(t)
	e.Kafka, e.Apache, e.Brokers = &kafkatest.Cluster{Brokers: b.Brokers}, b, b.Brokers
	const topic = "topiccreation.TRANSACTION"
	args := append([]string{"--mode", "wal", "--snapshot-mode", "initial", "--topic", "topiccreation.{aggregatetype}",
		"--topic-partitions", "5", "--topic-configs", "retention.ms=3600000"}, testenv.LedgerFlags...)
	p := e.Run(t, args...)
	recs := kafkatest.Consume(t, e.Brokers, []string{topic}, 100, 60*time.Second)
	p.Stop(t)
	if len(recs) != 100 {
		t.Fatalf("%d records, want the table's 100", len(recs))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testenv.TimeoutContext(t, 15*time.Second)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details[topic].Partitions); n != 5 {
		t.Errorf("%s has %d partitions, want 5", topic, n)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	retention := ""
	for _, rc := range configs {
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				retention = *c.Value
			}
		}
	}
	if retention != "3600000" {
		t.Errorf("%s: retention.ms set on the topic %q, want 3600000", topic, retention)
	}
}
