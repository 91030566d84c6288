package rabbitmqcompat

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/rabbitmqtest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

// casesEnv picks cases by a regular expression of their names (make
// compat sets it from RABBITMQ_CASES); unset, every case runs.
const casesEnv = "PGOUTBOX_RABBITMQ_CASES"

func TestMain(m *testing.M) { pgcluster.Main(m) }

// TestRabbitMQCorpus runs each case through Debezium Server and through
// pgoutbox into one rabbitmq-server and compares their messages. It needs
// Debezium Server's distribution (about 780 MB, installed on first use by
// .ci/install-debezium-server), so make test leaves it out; make compat
// and make chaos run it.
func TestRabbitMQCorpus(t *testing.T) {
	corpus(t, "testdata/cases", rabbitmqtest.Options{}, func(s *rabbitmqtest.Server) {
		s.Queue("pgo.dlq", "", "") // pgoutbox's dead letters; the cases write none
	}, run)
}

// corpus runs each case of dir that casesEnv picks with run, against one
// server started with opts and prepared by prepare.
func corpus(t *testing.T, dir string, opts rabbitmqtest.Options, prepare func(*rabbitmqtest.Server),
	run func(*testing.T, Case, *rabbitmqtest.Server, string)) {
	cases, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	pick := regexp.MustCompile(os.Getenv(casesEnv))
	s := rabbitmqtest.Start(t, opts)
	prepare(s)
	pgo := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	ran := 0
	for _, c := range cases {
		if !pick.MatchString(c.Name) {
			continue
		}
		ran++
		t.Run(c.Name, func(t *testing.T) { run(t, c, s, pgo) })
	}
	t.Logf("%d cases in %s, %d run", len(cases), dir, ran)
}

// caseDB creates the case's database with its table, and returns a
// connection to it and its properties for a slot: the case's, then sink
// (the server's address), then the database's.
func caseDB(t *testing.T, c Case, sink string) (*pgx.Conn, func(slot string) string) {
	t.Helper()
	ctx := context.Background()
	db := pgcluster.New(t)
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, c.Table); err != nil {
		t.Fatalf("table: %v", err)
	}
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	return conn, func(slot string) string {
		return strings.TrimRight(c.Server, "\n") + "\n" + sink + fmt.Sprintf(`debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), slot, slot)
	}
}

// run runs one case: pgoutbox's slot first, then Debezium Server
// streaming, the rows, Debezium Server's messages taken from the queue;
// then pgoutbox from its slot, and the comparison.
func run(t *testing.T, c Case, s *rabbitmqtest.Server, pgo string) {
	ctx := context.Background()
	queue := "corpus_" + c.Name
	for _, b := range c.Bindings {
		s.Queue(queue, b.Exchange, b.Kind, b.Key)
	}
	t.Cleanup(func() { _, _ = s.Channel().QueueDelete(queue, false, false, false) })
	_, port, _ := strings.Cut(s.Addr(), ":")
	conn, props := caseDB(t, c, "debezium.sink.rabbitmq.connection.host=127.0.0.1\ndebezium.sink.rabbitmq.connection.port="+port+"\n")
	pgoProps := corpusrun.FirstRun(t, conn, pgo, props("pgo"), "--dlq-topic", "pgo.dlq")

	dbz := dbzserver.Start(t, props("dbz"))
	corpusrun.AwaitSlot(t, conn, "dbz")
	for _, row := range c.Rows {
		if _, err := conn.Exec(ctx, row); err != nil {
			t.Fatalf("%s: %v", row, err)
		}
	}
	dbzMsgs := await(t, s, queue, c, dbz.Exited())
	dbz.Stop()

	p := corpusrun.StartPgoutbox(t, pgo, pgoProps, "--dlq-topic", "pgo.dlq")
	pgoMsgs := await(t, s, queue, c, p.Exited())
	if os.Getenv("PGOUTBOX_TEST_OUTPUT") != "" || t.Failed() {
		for i, m := range dbzMsgs {
			t.Logf("Debezium Server %d: %s %s %s %v", i, m.Exchange, m.RoutingKey, m.Body, m.Headers)
		}
		for i, m := range pgoMsgs {
			t.Logf("pgoutbox %d: %s %s %s %v", i, m.Exchange, m.RoutingKey, m.Body, m.Headers)
		}
	}
	dbzMsgs, dbzBeats := SplitHeartbeats(dbzMsgs, c.Heartbeats)
	pgoMsgs, pgoBeats := SplitHeartbeats(pgoMsgs, c.Heartbeats)
	diffs := Compare(dbzMsgs, pgoMsgs, c.Varies, c.WithoutID)
	if c.Heartbeats != "" {
		diffs = append(diffs, CompareHeartbeats(c.Heartbeats, dbzBeats, pgoBeats, c.Varies)...)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// await takes the case's messages from queue (and a heartbeat, when it
// writes them), or fails when the process that publishes them exits
// first; a message too many fails the case.
func await(t *testing.T, s *rabbitmqtest.Server, queue string, c Case, exited <-chan struct{}) []rabbitmqtest.Message {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var msgs []rabbitmqtest.Message
	for {
		msgs = append(msgs, s.Drain(queue)...)
		rest, beats := SplitHeartbeats(msgs, c.Heartbeats)
		if len(rest) >= c.Messages && (c.Heartbeats == "" || len(beats) > 0) {
			break
		}
		select {
		case <-exited:
			t.Fatalf("the publisher exited after %d of %d messages (%d heartbeats)", len(rest), c.Messages, len(beats))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages (%d heartbeats) after 2 minutes", len(rest), c.Messages, len(beats))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // a message too many would show
	return append(msgs, s.Drain(queue)...)
}
