package test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// tokenEndpoint is the user's OAuth2 token endpoint: it grants tokens
// numbered in order, living one second, to the client relay with secret
// and the scope orders, the credentials in HTTP basic authentication;
// while refuse is set it answers 401.
type tokenEndpoint struct {
	*httptest.Server
	refuse  atomic.Bool
	granted atomic.Int32
}

func newTokenEndpoint(t *testing.T, secret string) *tokenEndpoint {
	te := &tokenEndpoint{}
	te.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		switch {
		case te.refuse.Load():
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"client relay is disabled"}`)
		case r.URL.Path != "/oauth2/token" || !ok || user != "relay" || pass != secret ||
			r.FormValue("grant_type") != "client_credentials" || r.FormValue("scope") != "orders":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_request"}`)
		default:
			fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":1}`, te.granted.Add(1))
		}
	}))
	t.Cleanup(te.Close)
	return te
}

// A Debezium Server file with authentication.type=oauth2 runs through the
// binary against a database that already holds its table and rows: each
// event is POSTed with "Bearer <token>" of the user's token endpoint, the
// client's secret never in the output. While the token endpoint refuses
// the client (401), run sends nothing, keeps trying and says why in its
// log, naming the endpoint and the status; once it grants a token again,
// every event arrives, in order, each once. A JWT auth server's URL that
// auth/authenticate cannot be appended to is refused at start.
func TestHTTPOAuth2FromDebeziumServerFile(t *testing.T) {
	e := testenv.NewBare(t, `CREATE TABLE public.outbox (
  id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES
  ('22222222-0000-0000-0000-000000000001', 'Order', 'o-1', 'Placed', '{"n": 1}'),
  ('22222222-0000-0000-0000-000000000002', 'Order', 'o-1', 'Paid', '{"n": 2}')`)
	const secret = "cl13nt-s3cr3t-9f2e"
	rc := newReceiver(t, "")
	te := newTokenEndpoint(t, secret)
	base := testenv.DebeziumServer(t, e) + `debezium.sink.type=http
debezium.format.value=json
debezium.sink.http.url=` + rc.URL + `/hooks/orders
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.topic.prefix=dbserver1
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox
debezium.source.snapshot.mode=initial
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.format.value.schemas.enable=false
`
	oauth2 := `debezium.sink.http.authentication.type=oauth2
debezium.sink.http.authentication.oauth2.token-url=` + te.URL + `/oauth2/token
debezium.sink.http.authentication.oauth2.client-id=relay
debezium.sink.http.authentication.oauth2.client-secret=` + secret + `
debezium.sink.http.authentication.oauth2.scope=orders
`
	for auth, want := range map[string]string{
		"debezium.sink.http.authentication.type=oauth2\ndebezium.sink.http.authentication.oauth2.client-id=relay\n": "oauth2 without authentication.oauth2.token-url",
		"debezium.sink.http.authentication.type=jwt\ndebezium.sink.http.authentication.jwt.url=http://auth.example.com\n" +
			"debezium.sink.http.authentication.jwt.username=relay\ndebezium.sink.http.authentication.jwt.password=" + secret + "\n": "the JWT auth server's URL must end with /",
	} {
		c := testenv.WriteFile(t, "refused.properties", base+auth)
		if out, ok := testenv.CLIOutput(t, "run", "--config", c); ok || !strings.Contains(out, want) || strings.Contains(out, secret) {
			t.Errorf("%s: exit 0 %v, want %q without the secret:\n%s", strings.TrimSpace(auth), ok, want, out)
		}
	}

	conf := testenv.WriteFile(t, "application.properties", base+oauth2)
	p := testenv.StartBinary(t, "run", "--config", conf, "--log-format", "json", "--status-interval", "100ms")
	testenv.Eventually(t, 60*time.Second, "the rows already there POSTed", func() bool { return len(rc.at("/hooks/orders")) >= 2 })
	te.refuse.Store(true)
	time.Sleep(time.Second) // the token's lifetime passes
	ctx := context.Background()
	for i := 3; i <= 6; i++ {
		if _, err := e.Conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', 'o-1', 'Step', jsonb_build_object('n', $2::int))`,
			fmt.Sprintf("22222222-0000-0000-0000-00000000000%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	refusal := "webhook: the OAuth2 token endpoint " + te.URL + "/oauth2/token answered 401: invalid_client: client relay is disabled"
	testenv.Eventually(t, 60*time.Second, "the refusal reported, and tried again", func() bool {
		n := 0
		for _, line := range strings.Split(p.Out.String(), "\n") {
			if strings.Contains(line, `"msg":"reconnecting"`) && strings.Contains(line, refusal) {
				n++
			}
		}
		return n >= 2
	})
	if n := len(rc.at("/hooks/orders")); n != 2 {
		t.Errorf("%d events POSTed while the token endpoint refused, want the 2 sent before", n)
	}
	te.refuse.Store(false)
	testenv.Eventually(t, 60*time.Second, "every event POSTed", func() bool { return len(rc.at("/hooks/orders")) >= 6 })
	time.Sleep(time.Second) // a copy would show
	got := rc.at("/hooks/orders")
	var bodies []string
	token := regexp.MustCompile(`^Bearer tok-[0-9]+$`)
	for i, r := range got {
		bodies = append(bodies, r.body)
		if h := r.headers.Get("Authorization"); !token.MatchString(h) {
			t.Errorf("event %d: Authorization %q, want a granted token", i, h)
		}
	}
	want := []string{`"{\"n\": 1}"`, `"{\"n\": 2}"`, `"{\"n\": 3}"`, `"{\"n\": 4}"`, `"{\"n\": 5}"`, `"{\"n\": 6}"`}
	if !slices.Equal(bodies, want) {
		t.Errorf("bodies %v, want %v in order, each once\n%s", bodies, want, p.Out.String())
	}
	if got[0].headers.Get("Authorization") == got[len(got)-1].headers.Get("Authorization") {
		t.Errorf("the first and last events carried the same token %q: no new token was asked for", got[0].headers.Get("Authorization"))
	}
	if out := p.Out.String(); strings.Contains(out, secret) {
		t.Errorf("the client secret is in run's output:\n%s", out)
	}
}
