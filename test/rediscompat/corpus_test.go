package rediscompat

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
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/redistest"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

// casesEnv picks cases by a regular expression of their names (make
// compat sets it from REDIS_CASES); unset, every case runs.
const casesEnv = "PGOUTBOX_REDIS_CASES"

func TestMain(m *testing.M) { pgcluster.Main(m) }

// TestRedisCorpus runs each case through Debezium Server and through
// pgoutbox into one redis-server and compares their entries. It needs
// Debezium Server's distribution (about 780 MB, installed on first use by
// .ci/install-debezium-server), so make test leaves it out; make compat
// and make chaos run it.
func TestRedisCorpus(t *testing.T) {
	cases, err := Load("testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	pick := regexp.MustCompile(os.Getenv(casesEnv))
	s := redistest.Start(t)
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
// streaming, the rows, Debezium Server's entries; the streams removed;
// then pgoutbox from its slot, and the comparison.
func run(t *testing.T, c Case, s *redistest.Server, pgo string) {
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
	removeStreams(t, s) // the case before may have left some
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	harness := func(slot string) string {
		return fmt.Sprintf(`debezium.sink.redis.address=%s
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, s.Addr, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), slot, slot)
	}
	props := func(slot string) string { return strings.TrimRight(c.Server, "\n") + "\n" + harness(slot) }
	// pgoutbox's slot first, by a run stopped once it streams: the rows
	// are then in its slot's stream, after Debezium Server wrote them.
	pgoProps := corpusrun.WriteFile(t, "pgoutbox.properties", props("pgo"))
	startPgoutbox := func() *proc.Process {
		switch {
		case c.YAML != "":
			// The case's application.yaml, the harness's settings in the
			// environment.
			yaml := corpusrun.WriteFile(t, "application.yaml", c.YAML)
			return corpusrun.StartPgoutboxEnv(t, pgo, corpusrun.Environment(t, harness("pgo")), "--config", yaml)
		case c.Environment:
			return corpusrun.StartPgoutboxEnv(t, pgo, corpusrun.Environment(t, props("pgo")))
		}
		return corpusrun.StartPgoutbox(t, pgo, pgoProps)
	}
	first := startPgoutbox()
	corpusrun.AwaitSlot(t, conn, "pgo")
	if err := first.Stop(30 * time.Second); err != nil {
		t.Fatalf("pgoutbox's first run: %v\n%s", err, first.Output())
	}

	var dbz *dbzserver.Server
	switch {
	case c.YAML != "":
		dbz = dbzserver.StartYAML(t, harness("dbz"), c.YAML, nil)
	case c.Environment:
		dbz = dbzserver.StartEnv(t, "", corpusrun.Environment(t, props("dbz")))
	default:
		dbz = dbzserver.Start(t, props("dbz"))
	}
	corpusrun.AwaitSlot(t, conn, "dbz")
	for _, row := range c.Rows {
		if _, err := conn.Exec(ctx, row); err != nil {
			t.Fatalf("%s: %v", row, err)
		}
	}
	dbzEntries := await(t, s, c, dbz.Exited())
	dbz.Stop()
	removeStreams(t, s)

	p := startPgoutbox()
	pgoEntries := await(t, s, c, p.Exited())
	if os.Getenv("PGOUTBOX_TEST_OUTPUT") != "" || t.Failed() {
		for name, es := range dbzEntries {
			for i, e := range es {
				t.Logf("Debezium Server %s %d: %q", name, i, e.Fields)
			}
		}
		for name, es := range pgoEntries {
			for i, e := range es {
				t.Logf("pgoutbox %s %d: %q", name, i, e.Fields)
			}
		}
	}
	for _, streams := range []Streams{dbzEntries, pgoEntries} {
		for _, es := range streams {
			for _, e := range es {
				for i := 1; i < len(e.Fields); i += 2 {
					e.Fields[i] = string(corpusrun.NullJSONPaths([]byte(e.Fields[i]), c.Normalize))
				}
			}
		}
	}
	var diffs []string
	if c.Heartbeats != "" {
		diffs = CompareHeartbeats(c.Heartbeats, dbzEntries, pgoEntries, c.Varies)
	}
	for _, d := range append(diffs, Compare(dbzEntries, pgoEntries, c.Varies)...) {
		t.Error(d)
	}
}

// streams reads every stream of the server.
func streams(t *testing.T, s *redistest.Server) Streams {
	t.Helper()
	var keys []string
	out := Streams{}
	var cursor uint64
	for {
		page, next, err := s.Client().ScanType(context.Background(), cursor, "*", 1000, "stream").Result()
		if err != nil {
			t.Fatal(err)
		}
		keys, cursor = append(keys, page...), next
		if cursor == 0 {
			break
		}
	}
	for _, k := range keys {
		out[k] = s.Entries(k)
	}
	return out
}

func removeStreams(t *testing.T, s *redistest.Server) {
	t.Helper()
	for k := range streams(t, s) {
		if err := s.Client().Del(context.Background(), k).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// await waits for the case's entries over all streams (and a heartbeat,
// when it writes them), or for the process that writes them to exit, and
// returns the streams.
func await(t *testing.T, s *redistest.Server, c Case, exited <-chan struct{}) Streams {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := streams(t, s)
		beats := len(got[c.Heartbeats])
		n := got.Count() - beats
		if n >= c.Entries && (c.Heartbeats == "" || beats > 0) {
			time.Sleep(time.Second) // an entry too many would show
			return streams(t, s)
		}
		select {
		case <-exited:
			t.Fatalf("the writer exited after %d of %d entries (%d heartbeats)", n, c.Entries, beats)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d entries (%d heartbeats) after 2 minutes", n, c.Entries, beats)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
