package natscompat

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
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/natstest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

// casesEnv picks cases by a regular expression of their names (make
// compat-nats sets it from NATS_CASES); unset, every case runs.
const casesEnv = "PGOUTBOX_NATS_CASES"

func TestMain(m *testing.M) { pgcluster.Main(m) }

// TestNATSCorpus runs each case through Debezium Server and through
// pgoutbox into one nats-server and compares their messages. It needs
// Debezium Server's distribution (about 780 MB, installed on first use by
// .ci/install-debezium-server), so make test leaves it out; make compat
// and make chaos run it.
func TestNATSCorpus(t *testing.T) {
	cases, err := Load("testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	pick := regexp.MustCompile(os.Getenv(casesEnv))
	s := natstest.Start(t)
	pgo := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	ran := 0
	for _, c := range cases {
		if !pick.MatchString(c.Name) {
			continue
		}
		ran++
		t.Run(c.Name, func(t *testing.T) { run(t, c, s, pgo) })
	}
	t.Logf("%d cases in testdata/cases, %d run", len(cases), ran)
}

// run runs one case: pgoutbox's slot first, then Debezium Server
// streaming, the rows, Debezium Server's messages; the stream emptied;
// then pgoutbox from its slot, and the comparison.
func run(t *testing.T, c Case, s *natstest.Server, pgo string) {
	ctx := context.Background()
	db := pgcluster.New(t)
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, c.Table); err != nil {
		t.Fatalf("table: %v", err)
	}
	stream := "corpus_" + strings.ReplaceAll(c.Name, "-", "_")
	_, js := s.Connect()
	// pgoutbox's dead letters (pgo.dlq) go to the same stream; the cases
	// write none.
	subjects := append(append([]string(nil), c.Subjects...), "pgo.dlq")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: subjects, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) }) // the next case's subjects may overlap
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The harness's own properties, in the file also when the case's
	// come from the environment (Environment): the sink's url has a '-',
	// which a variable cannot spell.
	harness := func(slot string) string {
		return fmt.Sprintf(`debezium.sink.nats-jetstream.url=%s
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, s.URL, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), slot, slot)
	}
	props := func(slot string) string { return strings.TrimRight(c.Server, "\n") + "\n" + harness(slot) }
	var env []string
	if c.Environment {
		env = corpusrun.Environment(t, c.Server)
		props = harness
	}
	// pgoutbox's slot first, by a run stopped once it streams: the rows
	// are then in its slot's stream, after Debezium Server published
	// them.
	pgoProps := corpusrun.WriteFile(t, "pgoutbox.properties", props("pgo"))
	startPgoutbox := func() *proc.Process { return corpusrun.StartPgoutboxEnv(t, pgo, env, "--config", pgoProps) }
	first := startPgoutbox()
	corpusrun.AwaitSlot(t, conn, "pgo")
	if err := first.Stop(30 * time.Second); err != nil {
		t.Fatalf("pgoutbox's first run: %v\n%s", err, first.Output())
	}

	dbz := dbzserver.StartEnv(t, props("dbz"), env)
	corpusrun.AwaitSlot(t, conn, "dbz")
	for _, row := range c.Rows {
		if _, err := conn.Exec(ctx, row); err != nil {
			t.Fatalf("%s: %v", row, err)
		}
	}
	dbzMsgs := await(t, s, stream, c, dbz.Exited())
	dbz.Stop()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}

	p := startPgoutbox()
	pgoMsgs := await(t, s, stream, c, p.Exited())
	if os.Getenv("PGOUTBOX_TEST_OUTPUT") != "" || t.Failed() {
		for i, m := range dbzMsgs {
			t.Logf("Debezium Server %d: %s %s %v", i, m.Subject, m.Data, m.Header)
		}
		for i, m := range pgoMsgs {
			t.Logf("pgoutbox %d: %s %s %v", i, m.Subject, m.Data, m.Header)
		}
	}
	dbzMsgs, dbzBeats := SplitHeartbeats(dbzMsgs, c.Heartbeats)
	pgoMsgs, pgoBeats := SplitHeartbeats(pgoMsgs, c.Heartbeats)
	for _, msgs := range [][]Message{dbzMsgs, pgoMsgs} {
		for i := range msgs {
			msgs[i].Data = corpusrun.NullJSONPaths(msgs[i].Data, c.Normalize)
		}
	}
	diffs := Compare(dbzMsgs, pgoMsgs, c.Varies)
	if c.Heartbeats != "" {
		diffs = append(diffs, CompareHeartbeats(c.Heartbeats, dbzBeats, pgoBeats, c.Varies)...)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// await waits for the case's messages in stream (and a heartbeat, when
// it writes them), or for the process that publishes them to exit, and
// returns the messages.
func await(t *testing.T, s *natstest.Server, stream string, c Case, exited <-chan struct{}) []Message {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		msgs := messages(t, s, stream)
		rest, beats := SplitHeartbeats(msgs, c.Heartbeats)
		if len(rest) >= c.Messages && (c.Heartbeats == "" || len(beats) > 0) {
			time.Sleep(time.Second) // a message too many would show
			return messages(t, s, stream)
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
}

func messages(t *testing.T, s *natstest.Server, stream string) []Message {
	t.Helper()
	var out []Message
	for _, m := range s.Messages(stream) {
		out = append(out, Message{Subject: m.Subject, Data: m.Data, Header: m.Header})
	}
	return out
}
