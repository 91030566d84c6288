package httpcompat

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/corpusrun"
	"github.com/pgoutbox/pgoutbox/test/dbzserver"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

func TestMain(m *testing.M) { pgcluster.Main(m) }

// secret is the cases' Standard Webhooks secret.
var secret = []byte("0123456789abcdef0123456789abcdef")

// request is one request the endpoint took.
type request struct {
	body    string
	headers http.Header
}

// endpoint keeps the requests it takes, by path.
type endpoint struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string][]request
}

func (e *endpoint) at(path string) []request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got[path])
}

// The cases: the table, Debezium Server's properties without the
// database, the slot and the URL, the rows, how many requests.
var cases = []struct {
	name, table, server string
	rows                []string
	requests            int
}{
	{"defaults", `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, payload jsonb)`,
		`debezium.sink.type=http
debezium.format.value=json
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`, []string{
			`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', '{"a": [1, 2], "note": "caf\u00e9"}')`,
			`INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', NULL)`,
			`INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Payment', 'p-1', '{"amount": "12.50"}')`,
		}, 3},
	{"signed-raw-headers", `CREATE TABLE public.outbox_event (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb)`,
		`debezium.sink.type=http
debezium.format.value=json
debezium.sink.http.headers.encode.base64=false
debezium.sink.http.headers.prefix=X-Outbox-
debezium.sink.http.authentication.type=standard-webhooks
debezium.sink.http.authentication.webhook.secret=whsec_` + base64.StdEncoding.EncodeToString(secret) + `
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox_event
debezium.source.extended.headers.enabled=false
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.route.by.field=aggregate_type
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.table.fields.additional.placement=event_type:header:eventType
debezium.transforms.outbox.route.tombstone.on.empty.payload=true
debezium.format.value.schemas.enable=false
debezium.format.header.schemas.enable=false
`, []string{
			`INSERT INTO public.outbox_event VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderPlaced', '{"total": 12.5}')`,
			`BEGIN; INSERT INTO public.outbox_event VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'order', 'o-1', 'OrderPaid', NULL); INSERT INTO public.outbox_event VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'payment', 'p-7', 'PaymentCaptured', '{"amount": 12.5}'); COMMIT`,
		}, 2},
}

// TestHTTPCorpus runs each case through Debezium Server and through
// pgoutbox and compares their requests. It needs Debezium Server's
// distribution (installed on first use by .ci/install-debezium-server):
// make compat runs it, make test does not.
func TestHTTPCorpus(t *testing.T) {
	e := &endpoint{got: map[string][]request{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.got[r.URL.Path] = append(e.got[r.URL.Path], request{body: string(b), headers: r.Header})
		e.mu.Unlock()
	}))
	defer e.Close()
	pgo := testbin.Build(t, "github.com/pgoutbox/pgoutbox/cmd/pgoutbox")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db := pgcluster.New(t)
			conn, err := pgx.Connect(ctx, db.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, c.table); err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(db.URL)
			props := func(slot string) string {
				return c.server + fmt.Sprintf(`debezium.sink.http.url=%s/%s/%s
debezium.source.database.hostname=%s
debezium.source.database.port=%s
debezium.source.database.user=%s
debezium.source.database.dbname=%s
debezium.source.slot.name=%s
debezium.source.publication.name=%s_publication
`, e.URL, c.name, slot, u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), slot, slot)
			}
			pgoProps := corpusrun.FirstRun(t, conn, pgo, props("pgo"))
			dbz := dbzserver.Start(t, props("dbz"))
			corpusrun.AwaitSlot(t, conn, "dbz")
			for _, row := range c.rows {
				if _, err := conn.Exec(ctx, row); err != nil {
					t.Fatal(err)
				}
			}
			dbzReqs := await(t, e, "/"+c.name+"/dbz", c.requests, dbz.Exited())
			dbz.Stop()
			p := corpusrun.StartPgoutbox(t, pgo, pgoProps)
			pgoReqs := await(t, e, "/"+c.name+"/pgo", c.requests, p.Exited())
			for _, d := range compare(dbzReqs, pgoReqs) {
				t.Error(d)
			}
		})
	}
}

// await takes n requests of path, or fails when the process that sends
// them exits first; one too many fails the case.
func await(t *testing.T, e *endpoint, path string, n int, exited <-chan struct{}) []request {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for len(e.at(path)) < n {
		select {
		case <-exited:
			t.Fatalf("the sender exited after %d of %d requests", len(e.at(path)), n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests after 2 minutes", len(e.at(path)), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	return e.at(path)
}

// compare compares Debezium Server's requests with pgoutbox's, in order:
// body, content-type, the record headers (the run's id not compared), and
// a signature each side's own message id and time verify.
func compare(dbz, pgo []request) []string {
	var diffs []string
	if len(dbz) != len(pgo) {
		diffs = append(diffs, fmt.Sprintf("Debezium Server sent %d requests, pgoutbox %d", len(dbz), len(pgo)))
	}
	for i := range min(len(dbz), len(pgo)) {
		d, p := dbz[i], pgo[i]
		if d.body != p.body {
			diffs = append(diffs, fmt.Sprintf("request %d: body\n  %s\npgoutbox\n  %s", i, d.body, p.body))
		}
		if dh, ph := recordHeaders(d.headers), recordHeaders(p.headers); !maps.Equal(dh, ph) {
			diffs = append(diffs, fmt.Sprintf("request %d: headers\n  %v\npgoutbox\n  %v", i, dh, ph))
		}
		for side, r := range map[string]request{"Debezium Server": d, "pgoutbox": p} {
			if r.headers.Get("webhook-id") == "" {
				continue
			}
			mac := hmac.New(sha256.New, secret)
			mac.Write([]byte(r.headers.Get("webhook-id") + "." + r.headers.Get("webhook-timestamp") + "." + r.body))
			if r.headers.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
				diffs = append(diffs, fmt.Sprintf("request %d: %s's signature does not verify", i, side))
			}
		}
		if (d.headers.Get("webhook-id") == "") != (p.headers.Get("webhook-id") == "") {
			diffs = append(diffs, fmt.Sprintf("request %d: one side signed, the other not", i))
		}
	}
	return diffs
}

// recordHeaders are the headers a record's headers and the sink make: the
// content-type and those of the prefix, by name; Debezium's run id and the
// transport's own left out.
func recordHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		switch {
		case k == "Content-Type", strings.HasPrefix(k, "X-"):
			if strings.Contains(strings.ToUpper(k), "RUNID") {
				out[k] = "(varies)"
				continue
			}
			out[k] = strings.Join(v, ",")
		}
	}
	return out
}
