package debezium

import (
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
		{"debezium.sink.http.batch.enabled=true\n", "batch.enabled"},
		{"debezium.sink.http.authentication.type=oauth2\n", "authentication.type"},
		{"debezium.sink.http.authentication.jwt.username=u\n", "authentication.jwt.username"},
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
