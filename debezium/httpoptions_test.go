package debezium

import (
	"slices"
	"strings"
	"testing"
)

const httpServerBase = `debezium.sink.type=http
debezium.format.value=json
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.topic.prefix=app
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`

// Debezium Server's http sink keys set the --http-* flags, the
// content-type follows debezium.format.value; what the sink fails on at
// its first record, or what is not implemented, is refused naming the key.
func TestHTTPSinkOptions(t *testing.T) {
	tr, _, err := Read([]byte(httpServerBase + `debezium.sink.http.url=https://hooks.example.com/orders
debezium.sink.http.timeout.ms=2500
debezium.sink.http.retries=3
debezium.sink.http.headers.encode.base64=false
debezium.sink.http.headers.prefix=X-Outbox-
debezium.sink.http.authentication.type=standard-webhooks
debezium.sink.http.authentication.webhook.secret=whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
` + "debezium.format.value=cloudevents\n"))
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"sink": "http", "http-url": "https://hooks.example.com/orders", "http-timeout": "2500ms", "http-headers-base64": "false",
		"http-headers-prefix": "X-Outbox-", "http-content-type": "application/cloudevents+json",
		"http-webhook-secret": "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
	} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
	if _, _, err := Read([]byte(strings.Replace(httpServerBase, "debezium.format.value=json\n", "", 1))); err == nil || !strings.Contains(err.Error(), "SRCFG00014") {
		t.Errorf("without debezium.format.value: %v, want it refused as Debezium Server refuses it", err)
	}
	if !strings.Contains(strings.Join(tr.Ignored, "\n"), httpSink+"retries") {
		t.Errorf("retries not named among the ignored: %v", tr.Ignored)
	}
	for _, tc := range []struct{ props, key string }{
		{"debezium.sink.http.batch.enabled=yes\n", "batch.enabled"},
		{"debezium.sink.http.batch.enabled=true\ndebezium.sink.http.batch.max-size=0\n", "batch.max-size"},
		{"debezium.sink.http.authentication.type=standard-webhooks\n", "authentication.type"},
		{"debezium.format.value=avro\n", "debezium.format.value"},
		{"debezium.format.header=jsonbytearray\n", "debezium.format.header"},
	} {
		_, _, err := Read([]byte(httpServerBase + tc.props))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want a refusal naming %s", strings.TrimSpace(tc.props), err, tc.key)
		}
	}
}

// batch.enabled=true sets --http-batch-max-size to batch.max-size (200
// unset); without it batch.max-size is ignored, as Debezium Server reads it
// only in batch mode.
func TestHTTPBatchOptions(t *testing.T) {
	for _, tc := range []struct {
		props, want string // want "": the flag not set
		ignored     bool   // batch.max-size named among the ignored
	}{
		{"batch.enabled=true\n", "200", false},
		{"batch.enabled=TRUE\nbatch.max-size= 3\n", "3", false},
		{"batch.enabled=false\nbatch.max-size=3\n", "", true},
		{"batch.max-size=3\n", "", true},
		{"", "", false},
	} {
		props := httpServerBase
		for _, line := range strings.Split(strings.TrimSpace(tc.props), "\n") {
			if line != "" {
				props += httpSink + line + "\n"
			}
		}
		tr, _, err := Read([]byte(props))
		if err != nil {
			t.Fatalf("%q: %v", tc.props, err)
		}
		if got, set := settingOf(tr, "http-batch-max-size"); got != tc.want || set != (tc.want != "") {
			t.Errorf("%q: --http-batch-max-size = %q (set %v), want %q", tc.props, got, set, tc.want)
		}
		if got := strings.Contains(strings.Join(tr.Ignored, "\n"), "batch.max-size"); got != tc.ignored {
			t.Errorf("%q: batch.max-size among the ignored: %v, want %v (%v)", tc.props, got, tc.ignored, tr.Ignored)
		}
	}
}

// authentication.type chooses which authentication.* keys are read, as
// Debezium Server reads only its kind's: they set the --http-oauth2-*,
// --http-jwt-* or --http-webhook-secret flags, the others are named among
// the ignored, and so is a key Debezium Server's sink never reads; a kind
// without a key Debezium Server does not start without is refused.
func TestHTTPAuthOptions(t *testing.T) {
	const auth = "debezium.sink.http.authentication."
	for _, tc := range []struct {
		name, props string
		flags       map[string]string // "" for a flag not set
		ignored     []string
		refusal     string
	}{
		{"oauth2", `type=OAuth2
oauth2.token-url=https://auth.example.com/oauth2/token
oauth2.client-id=relay
oauth2.client-secret=s3cret
oauth2.scope=orders:write
oauth2.client_auth_method=client_secret_post
webhook.secret=whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
jwt.username=u
`, map[string]string{"http-oauth2-token-url": "https://auth.example.com/oauth2/token", "http-oauth2-client-id": "relay",
			"http-oauth2-client-secret": "s3cret", "http-oauth2-scope": "orders:write", "http-oauth2-client-auth": "", "http-webhook-secret": "", "http-jwt-username": ""},
			[]string{"oauth2.client_auth_method", "webhook.secret", "jwt.username"}, ""},
		{"jwt", `type=jwt
jwt.url=https://auth.example.com/
jwt.username=relay
jwt.password=p4ss
jwt.token_expiration=5
jwt.refresh_token_expiration= 30
oauth2.client-id=relay
`, map[string]string{"http-jwt-url": "https://auth.example.com/", "http-jwt-username": "relay", "http-jwt-password": "p4ss",
			"http-jwt-token-expiration": "5m", "http-jwt-refresh-token-expiration": "30m", "http-oauth2-client-id": ""},
			[]string{"oauth2.client-id"}, ""},
		{"no-type", `webhook.secret=whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
oauth2.token-url=https://auth.example.com/token
`, map[string]string{"http-webhook-secret": "", "http-oauth2-token-url": ""}, []string{"webhook.secret", "oauth2.token-url"}, ""},
		{"oauth2-no-secret", "type=oauth2\noauth2.token-url=https://auth.example.com/token\noauth2.client-id=relay\n", nil, nil,
			auth + "type: oauth2 without authentication.oauth2.client-secret: Debezium Server does not start without it"},
		{"jwt-no-url", "type=jwt\njwt.username=relay\njwt.password=p\n", nil, nil, auth + "type: jwt without authentication.jwt.url"},
		{"jwt-expiration", "type=jwt\njwt.url=https://a/\njwt.username=relay\njwt.password=p\njwt.token_expiration=1h\n", nil, nil,
			auth + `jwt.token_expiration: "1h": not a positive whole number of minutes`},
		{"unknown-type", "type=basic\n", nil, nil, auth + `type: "basic": Debezium Server knows jwt, oauth2 and standard-webhooks`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := httpServerBase + "debezium.sink.http.url=https://hooks.example.com/\n"
			for _, line := range strings.Split(strings.TrimSpace(tc.props), "\n") {
				props += auth + line + "\n"
			}
			tr, _, err := Read([]byte(props))
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("%v, want a refusal saying %q", err, tc.refusal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for flag, want := range tc.flags {
				if got, set := settingOf(tr, flag); got != want || set != (want != "") {
					t.Errorf("--%s = %q (set %v), want %q", flag, got, set, want)
				}
			}
			for _, key := range tc.ignored {
				if !slices.ContainsFunc(tr.Ignored, func(s string) bool { return strings.HasPrefix(s, auth+key+" ") }) {
					t.Errorf("%s not named among the ignored: %v", key, tr.Ignored)
				}
			}
		})
	}
}
