package httpcompat

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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
	method, body string
	headers      http.Header
}

// endpoint keeps the requests it takes, by path. It is also the user's
// auth server: under /<case>/<side>/, token (OAuth2) and auth/authenticate,
// auth/refreshToken (JWT) grant tokens numbered in order for that side,
// expiring after the case's expiresIn.
type endpoint struct {
	*httptest.Server
	mu      sync.Mutex
	got     map[string][]request
	granted map[string]int // tokens, by /<case>/<side>
}

// serve records r and answers it: a token on the auth paths, else 200.
func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got[r.URL.Path] = append(e.got[r.URL.Path], request{method: r.Method, body: string(b), headers: r.Header})
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 3 {
		return
	}
	expiresIn := 0
	for _, c := range cases {
		if c.name == parts[0] {
			expiresIn = c.expiresIn
		}
	}
	side := "/" + parts[0] + "/" + parts[1]
	switch parts[2] {
	case "token":
		e.granted[side]++
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, e.granted[side], expiresIn)
	case "auth/authenticate", "auth/refreshToken":
		e.granted[side]++
		n := e.granted[side]
		fmt.Fprintf(w, `{"expires_in":%d,"jwt":"jwt-%d","jwt_refresh_token":"refresh-%d","refresh_token_expires_in":%d}`, expiresIn, n, n, 24*expiresIn)
	}
}

// authRequests are the requests of the auth paths under /<case>/<side>/,
// by the path after it.
func (e *endpoint) authRequests(side string) map[string][]request {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string][]request{}
	for path, reqs := range e.got {
		if rest, ok := strings.CutPrefix(path, side+"/"); ok {
			out[rest] = slices.Clone(reqs)
		}
	}
	return out
}

func (e *endpoint) at(path string) []request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got[path])
}

// outboxTable is the auth cases' table.
const outboxTable = `CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, payload jsonb)`

// authServer are the auth cases' properties but the authentication's.
const authServer = `debezium.sink.type=http
debezium.format.value=json
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.plugin.name=pgoutput
debezium.source.topic.prefix=corpus
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
`

// authRows are the auth cases' rows.
var authRows = []string{
	`INSERT INTO public.outbox VALUES ('406c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', '{"n": 1}')`,
	`INSERT INTO public.outbox VALUES ('506c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-1', '{"n": 2}')`,
	`INSERT INTO public.outbox VALUES ('606c07f3-26f0-4eea-a50c-109940064b8f', 'Order', 'o-2', '{"n": 3}')`,
}

// The cases: the table, Debezium Server's properties without the
// database, the slot and the URL (AUTH_BASE stands for /<case>/<side>
// on the endpoint), the rows, how many requests, how many requests each
// side makes to the auth paths, and the tokens' expires_in.
var cases = []struct {
	name, table, server string
	rows                []string
	requests            int
	authRequests        int
	expiresIn           int
	batch               int // batch.max-size; requests counts the values then
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
		}, 3, 0, 0, 0},
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
		}, 2, 0, 0, 0},
	// One token for every request: the client credentials grant with a
	// scope, the id and secret in HTTP basic authentication, in Java's
	// encodings.
	{"oauth2", outboxTable, authServer + `debezium.sink.http.authentication.type=oauth2
debezium.sink.http.authentication.oauth2.token-url=AUTH_BASE/token
debezium.sink.http.authentication.oauth2.client-id=relay:one
debezium.sink.http.authentication.oauth2.client-secret=s3cr&t+/=~*
debezium.sink.http.authentication.oauth2.scope=orders:write read~*
`, authRows, 3, 1, 3600, 0},
	// A token that expires at once (expires_in 0) is asked for before each
	// request; client_auth_method, which Debezium Server's sink does not
	// read, changes nothing: basic authentication still.
	{"oauth2-expired", outboxTable, authServer + `debezium.sink.http.authentication.type=OAUTH2
debezium.sink.http.authentication.oauth2.token-url=AUTH_BASE/token
debezium.sink.http.authentication.oauth2.client-id=relay
debezium.sink.http.authentication.oauth2.client-secret=s3cret
debezium.sink.http.authentication.oauth2.client_auth_method=client_secret_post
debezium.sink.http.authentication.webhook.secret=whsec_` + base64.StdEncoding.EncodeToString(secret) + `
`, authRows, 3, 3, 0, 0},
	// auth/authenticate with the user's credentials (JSON that needs no
	// HTML escaping) and the lifetimes, once; "Bearer: <jwt>" on each
	// request.
	{"jwt", outboxTable, authServer + `debezium.sink.http.authentication.type=jwt
debezium.sink.http.authentication.jwt.url=AUTH_BASE/
debezium.sink.http.authentication.jwt.username=relay
debezium.sink.http.authentication.jwt.password=p&ss<w>rd"\u00e9
debezium.sink.http.authentication.jwt.token_expiration=5
debezium.sink.http.authentication.jwt.refresh_token_expiration=30
`, authRows, 3, 1, 3_600_000, 0},
	// Batches: a JSON array of at most batch.max-size values a request,
	// with its first record's headers; where a batch ends depends on
	// timing on either side, so the values are compared in order across
	// the requests.
	{"batch", outboxTable, authServer + `debezium.sink.http.batch.enabled=true
debezium.sink.http.batch.max-size=3
debezium.sink.http.authentication.type=standard-webhooks
debezium.sink.http.authentication.webhook.secret=whsec_` + base64.StdEncoding.EncodeToString(secret) + `
`, batchRows(), 10, 0, 0, 3},
}

// batchRows are the batch case's 10 rows in 4 transactions, the id the
// row's number, which its payload holds.
func batchRows() []string {
	var rows []string
	n := 0
	for _, size := range []int{3, 3, 1, 3} {
		stmt := "BEGIN;"
		for range size {
			n++
			stmt += fmt.Sprintf(` INSERT INTO public.outbox VALUES ('%s', 'Order', 'o-%d', '{"n": %d}');`, batchID(n), n%3, n)
		}
		rows = append(rows, stmt+" COMMIT")
	}
	return rows
}

func batchID(n int) string { return fmt.Sprintf("%08d-0000-4000-8000-000000000000", n) }

// TestHTTPCorpus runs each case through Debezium Server and through
// pgoutbox and compares their requests. It needs Debezium Server's
// distribution (installed on first use by .ci/install-debezium-server):
// make compat runs it, make test does not.
func TestHTTPCorpus(t *testing.T) {
	e := &endpoint{got: map[string][]request{}, granted: map[string]int{}}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
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
				return strings.ReplaceAll(c.server, "AUTH_BASE", e.URL+"/"+c.name+"/"+slot) + fmt.Sprintf(`debezium.sink.http.url=%s/%s/%s
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
			wait, cmp := await, compare
			if c.batch > 0 {
				wait = awaitValues
				cmp = func(dbz, pgo []request) []string { return compareBatches(dbz, pgo, c.batch) }
			}
			dbzReqs := wait(t, e, "/"+c.name+"/dbz", c.requests, dbz.Exited())
			dbz.Stop()
			p := corpusrun.StartPgoutbox(t, pgo, pgoProps)
			pgoReqs := wait(t, e, "/"+c.name+"/pgo", c.requests, p.Exited())
			if c.batch > 0 {
				t.Logf("values a request: Debezium Server %v, pgoutbox %v", batchSizes(dbzReqs), batchSizes(pgoReqs))
			}
			for _, d := range cmp(dbzReqs, pgoReqs) {
				t.Error(d)
			}
			dbzAuth, pgoAuth := e.authRequests("/"+c.name+"/dbz"), e.authRequests("/"+c.name+"/pgo")
			n := 0
			for _, reqs := range dbzAuth {
				n += len(reqs)
			}
			if n != c.authRequests {
				t.Errorf("Debezium Server made %d requests to the auth paths, the case expects %d", n, c.authRequests)
			}
			for _, d := range compareAuth(dbzAuth, pgoAuth) {
				t.Error(d)
			}
		})
	}
}

// compareAuth compares the requests each side made to each auth path, in
// order: method, content-type, Authorization and body.
func compareAuth(dbz, pgo map[string][]request) []string {
	var diffs []string
	paths := slices.Sorted(maps.Keys(dbz))
	for p := range pgo {
		if _, ok := dbz[p]; !ok {
			paths = append(paths, p)
		}
	}
	for _, path := range paths {
		d, p := dbz[path], pgo[path]
		if len(d) != len(p) {
			diffs = append(diffs, fmt.Sprintf("%s: Debezium Server made %d requests, pgoutbox %d", path, len(d), len(p)))
		}
		for i := range min(len(d), len(p)) {
			show := func(r request) string {
				return fmt.Sprintf("%s content-type %q, Authorization %q, body %s", r.method, r.headers.Get("Content-Type"), r.headers.Get("Authorization"), r.body)
			}
			if show(d[i]) != show(p[i]) {
				diffs = append(diffs, fmt.Sprintf("%s request %d:\n  %s\npgoutbox\n  %s", path, i, show(d[i]), show(p[i])))
			}
		}
	}
	return diffs
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

// values are the values of a batch request's JSON array, as sent.
func values(r request) ([]string, error) {
	var vs []json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &vs); err != nil {
		return nil, fmt.Errorf("body %q: %w", r.body, err)
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out, nil
}

func batchSizes(reqs []request) []int {
	var out []int
	for _, r := range reqs {
		vs, _ := values(r)
		out = append(out, len(vs))
	}
	return out
}

// awaitValues takes the batch requests of path until they hold n values,
// or fails when the process that sends them exits first.
func awaitValues(t *testing.T, e *endpoint, path string, n int, exited <-chan struct{}) []request {
	t.Helper()
	count := func() int {
		got := 0
		for _, r := range e.at(path) {
			vs, _ := values(r)
			got += len(vs)
		}
		return got
	}
	deadline := time.Now().Add(2 * time.Minute)
	for count() < n {
		select {
		case <-exited:
			t.Fatalf("the sender exited after %d of %d values", count(), n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d values after 2 minutes", count(), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	return e.at(path)
}

// compareBatches compares the values of Debezium Server's batch requests
// with pgoutbox's, in order across the requests, and checks on each side
// that a request holds at most max values, carries its first value's
// record headers (the id header is the row's, whose number the value
// holds; and the same headers as the other side's request that starts
// with that value, if any), and a signature that verifies.
func compareBatches(dbz, pgo []request, max int) []string {
	var diffs []string
	all := map[string][]string{}
	firsts := map[string]map[string]map[string]string{} // side, first value: headers
	for side, reqs := range map[string][]request{"Debezium Server": dbz, "pgoutbox": pgo} {
		firsts[side] = map[string]map[string]string{}
		for i, r := range reqs {
			vs, err := values(r)
			if err != nil || len(vs) == 0 || len(vs) > max {
				diffs = append(diffs, fmt.Sprintf("%s request %d: %d values (at most %d): %v", side, i, len(vs), max, err))
				continue
			}
			all[side] = append(all[side], vs...)
			// The payload, jsonb, is a JSON string of the object.
			var text string
			var first struct{ N int }
			_ = json.Unmarshal([]byte(vs[0]), &text)
			_ = json.Unmarshal([]byte(text), &first)
			// The id header is the JSON of the id with its schema.
			if got, _ := base64.StdEncoding.DecodeString(r.headers.Get("X-DEBEZIUM-ID")); !strings.Contains(string(got), `"`+batchID(first.N)+`"`) {
				diffs = append(diffs, fmt.Sprintf("%s request %d: id header %s, not its first value's (%s)", side, i, got, vs[0]))
			}
			firsts[side][vs[0]] = recordHeaders(r.headers)
			mac := hmac.New(sha256.New, secret)
			mac.Write([]byte(r.headers.Get("webhook-id") + "." + r.headers.Get("webhook-timestamp") + "." + r.body))
			if r.headers.Get("webhook-id") == "" || r.headers.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
				diffs = append(diffs, fmt.Sprintf("%s request %d: the signature does not verify", side, i))
			}
		}
	}
	if d, p := strings.Join(all["Debezium Server"], "\n  "), strings.Join(all["pgoutbox"], "\n  "); d != p {
		diffs = append(diffs, fmt.Sprintf("values\n  %s\npgoutbox\n  %s", d, p))
	}
	for v, dh := range firsts["Debezium Server"] {
		if ph, ok := firsts["pgoutbox"][v]; ok && !maps.Equal(dh, ph) {
			diffs = append(diffs, fmt.Sprintf("the request starting with %s: headers\n  %v\npgoutbox\n  %v", v, dh, ph))
		}
	}
	return diffs
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
// content-type, the Authorization and those of the prefix, by name;
// Debezium's run id and the transport's own left out.
func recordHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		switch {
		case k == "Content-Type", k == "Authorization", strings.HasPrefix(k, "X-"):
			if strings.Contains(strings.ToUpper(k), "RUNID") {
				out[k] = "(varies)"
				continue
			}
			out[k] = strings.Join(v, ",")
		}
	}
	return out
}
