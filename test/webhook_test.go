package test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// receiver is an HTTP endpoint that keeps the requests it answered 2xx,
// by path; while down it answers 503, and it refuses (400) bodies that
// contain refuse, but at /dead.
type receiver struct {
	*httptest.Server
	down   atomic.Bool
	refuse string
	mu     sync.Mutex
	got    map[string][]received
}

type received struct {
	body    string
	headers http.Header
}

func newReceiver(t *testing.T, refuse string) *receiver {
	rc := &receiver{refuse: refuse, got: map[string][]received{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case rc.down.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case rc.refuse != "" && strings.Contains(string(b), rc.refuse) && r.URL.Path != "/dead":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, "malformed order")
			return
		}
		rc.mu.Lock()
		rc.got[r.URL.Path] = append(rc.got[r.URL.Path], received{body: string(b), headers: r.Header})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) at(path string) []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got[path])
}

// A Debezium Server file whose sink is http runs through the binary
// against a database that already holds its table and rows: the rows
// already there and those written later are POSTed in order, each body
// Debezium's value, its headers X-DEBEZIUM-* in base64; while the endpoint
// answers 503 nothing is lost and the order holds once it is back.
// Exactly-once, batches of no events and JWT without its auth server are
// refused at start.
func TestHTTPFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('11111111-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('11111111-0000-0000-0000-000000000002', 'Order', 'o-1', 'Paid', '{"n": 2}')`)
	rc := newReceiver(t, "")
	props := testenv.DebeziumServer(t, e) + `debezium.sink.type=http
debezium.format.value=json
debezium.sink.http.url=` + rc.URL + `/hooks/orders
debezium.sink.http.timeout.ms=5000
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
	for flag, want := range map[string]string{
		"exactly-once": "exactly-once delivery needs Kafka transactions; an HTTP endpoint has none",
	} {
		if out, ok := testenv.CLIOutput(t, "run", "--config", conf, "--delivery", flag); ok || !strings.Contains(out, want) {
			t.Errorf("%s: exit 0 %v, want %q:\n%s", flag, ok, want, out)
		}
	}
	for key, want := range map[string]string{
		"debezium.sink.http.batch.enabled=true\ndebezium.sink.http.batch.max-size=0\n": "not a positive number",
		"debezium.sink.http.authentication.type=jwt\n":                                 "jwt without authentication.jwt.url",
		"debezium.format.value=jsonbytearray\n":                                        "fails at the first record of bytes",
	} {
		c := testenv.WriteFile(t, "refused.properties", props+key)
		if out, ok := testenv.CLIOutput(t, "run", "--config", c); ok || !strings.Contains(out, want) {
			t.Errorf("%s: exit 0 %v, want %q:\n%s", strings.TrimSpace(key), ok, want, out)
		}
	}
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	testenv.Eventually(t, 60*time.Second, "the rows already there POSTed", func() bool { return len(rc.at("/hooks/orders")) >= 2 })
	rc.down.Store(true)
	ctx := context.Background()
	for i := 3; i <= 6; i++ {
		if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', 'o-1', 'Step', jsonb_build_object('n', $2::int))`,
			fmt.Sprintf("11111111-0000-0000-0000-00000000000%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the failures reported", func() bool { return strings.Contains(p.Out.String(), "webhook: the endpoint answered 503") })
	rc.down.Store(false)
	testenv.Eventually(t, 60*time.Second, "every event POSTed", func() bool { return len(rc.at("/hooks/orders")) >= 6 })
	time.Sleep(time.Second) // a copy would show
	got := rc.at("/hooks/orders")
	var bodies []string
	for _, r := range got {
		bodies = append(bodies, r.body)
	}
	want := []string{`"{\"n\": 1}"`, `"{\"n\": 2}"`, `"{\"n\": 3}"`, `"{\"n\": 4}"`, `"{\"n\": 5}"`, `"{\"n\": 6}"`}
	if !slices.Equal(bodies, want) {
		t.Errorf("bodies %v, want %v in order, each once\n%s", bodies, want, p.Out.String())
	}
	h := got[0].headers
	id, _ := base64.StdEncoding.DecodeString(h.Get("X-Debezium-Id"))
	if h.Get("Content-Type") != "application/json" || !strings.Contains(string(id), "11111111-0000-0000-0000-000000000001") {
		t.Errorf("headers %v (id %s)", h, id)
	}
}

// An event the endpoint refuses (400) is dead-lettered to --http-dlq-url
// with its reason, its aggregate's later event held behind it, other
// aggregates go on.
func TestHTTPRefusedEventDeadLettered(t *testing.T) {
	e := testenv.New(t)
	e.Setup(e.Config())
	rc := newReceiver(t, "poison")
	p := e.Run(t, "--sink", "http", "--http-url", rc.URL+"/events", "--http-dlq-url", rc.URL+"/dead", "--mode", "wal", "--format", "debezium-outbox")
	ok := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	bad := e.Insert(testenv.NewRow("order", "o-2", "Placed", `{"poison":true}`))
	held := e.Insert(testenv.NewRow("order", "o-2", "Paid", `{"n":3}`))
	other := e.Insert(testenv.NewRow("order", "o-3", "Placed", `{"n":4}`))
	testenv.Eventually(t, 60*time.Second, "two events and two dead letters", func() bool {
		return len(rc.at("/events")) >= 2 && len(rc.at("/dead")) >= 2
	})
	var events, dead []string
	for _, r := range rc.at("/events") {
		events = append(events, r.body)
	}
	for _, r := range rc.at("/dead") {
		id, _ := base64.StdEncoding.DecodeString(r.headers.Get("X-Debezium-Id"))
		dead = append(dead, string(id))
	}
	if len(events) != 2 || !strings.Contains(events[0], `\"n\": 1`) || !strings.Contains(events[1], `\"n\": 4`) {
		t.Errorf("events %v, want o-1's and o-3's (o-2 held)\n%s", events, p.Out.String())
	}
	if !slices.Equal(dead, []string{bad[0], held[0]}) {
		t.Errorf("dead letters %v, want %s and %s (ok %s, other %s)", dead, bad[0], held[0], ok[0], other[0])
	}
	if !strings.Contains(p.Out.String(), "malformed order") {
		t.Errorf("the endpoint's reason is not in the log:\n%s", p.Out.String())
	}
}

// A Debezium Server file with batch.enabled runs through the binary
// against a table that already holds rows: the rows already there and
// those written later arrive as JSON arrays of at most batch.max-size
// values, every value once and in order, each request with its first
// event's id header.
func TestHTTPBatchesFromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload)
  SELECT ('11111111-0000-0000-0000-0000000000' || lpad(n::text, 2, '0'))::uuid, 'Order', 'o-1', 'Step', jsonb_build_object('n', n)
  FROM generate_series(1, 5) AS n`)
	rc := newReceiver(t, "")
	conf := testenv.WriteFile(t, "application.properties", testenv.DebeziumServer(t, e)+`debezium.sink.type=http
debezium.sink.http.url=`+rc.URL+`/hooks/orders
debezium.format.value=json
debezium.sink.http.batch.enabled=true
debezium.sink.http.batch.max-size=2
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
`)
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	testenv.Eventually(t, 60*time.Second, "the rows already there POSTed", func() bool { return len(rc.at("/hooks/orders")) > 0 })
	ctx := context.Background()
	for n := 6; n <= 9; n++ {
		if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', 'o-1', 'Step', jsonb_build_object('n', $2::int))`,
			fmt.Sprintf("11111111-0000-0000-0000-0000000000%02d", n), n); err != nil {
			t.Fatal(err)
		}
	}
	var values []string
	read := func() {
		values = values[:0]
		for i, r := range rc.at("/hooks/orders") {
			var batch []string
			if err := json.Unmarshal([]byte(r.body), &batch); err != nil || len(batch) == 0 || len(batch) > 2 {
				t.Fatalf("request %d: %q is not a JSON array of one or two values (%v)", i, r.body, err)
			}
			id, _ := base64.StdEncoding.DecodeString(r.headers.Get("X-Debezium-Id"))
			var first struct{ N int }
			_ = json.Unmarshal([]byte(batch[0]), &first)
			if want := fmt.Sprintf("11111111-0000-0000-0000-0000000000%02d", first.N); !strings.Contains(string(id), want) {
				t.Errorf("request %d: id header %s, want its first event's, %s", i, id, want)
			}
			values = append(values, batch...)
		}
	}
	testenv.Eventually(t, 60*time.Second, "nine events", func() bool { read(); return len(values) >= 9 })
	time.Sleep(time.Second) // a copy would show
	read()
	var want []string
	for n := 1; n <= 9; n++ {
		want = append(want, fmt.Sprintf(`{"n": %d}`, n))
	}
	if !slices.Equal(values, want) {
		t.Errorf("values %v, want %v in order, each once\n%s", values, want, p.Out.String())
	}
}
