package debezium

import (
	"fmt"
	"strconv"
	"strings"
)

// httpSink starts the HTTP sink's options.
const httpSink = "debezium.sink.http."

// httpOptions are Debezium Server's http sink's options
// (HttpChangeConsumerConfig).
var httpOptions = []Option{
	{Part: Server, Key: httpSink + "url", Setting: "http-url", Takes: "an `http://` or `https://` URL; unset, the `K_SINK` environment variable, as Debezium Server reads it",
		read: toFlag("http-url")},
	{Part: Server, Key: httpSink + "timeout.ms", Default: "60000", Setting: "http-timeout", Takes: "milliseconds, each request's",
		Refuses: "a value that is not a positive number", read: millis("http-timeout")},
	{Part: Server, Key: httpSink + "retries", Default: "5", Setting: Ignored,
		Takes: "ignored: pgoutbox sends a failed request again, in order, from the last confirmed position, with backoff, until the endpoint takes it (Debezium Server stops after this many attempts)",
		read:  ignore("pgoutbox sends a failed request again, with backoff, until the endpoint takes it")},
	{Part: Server, Key: httpSink + "retry.interval.ms", Default: "1000", Setting: Ignored, Takes: "ignored: pgoutbox's backoff",
		read: ignore("pgoutbox's backoff")},
	{Part: Server, Key: httpSink + "headers.encode.base64", Default: "true", Setting: "http-headers-base64", Takes: "`true`, `false`",
		Refuses: "another value", read: boolFlag("http-headers-base64")},
	{Part: Server, Key: httpSink + "headers.prefix", Default: "X-DEBEZIUM-", Setting: "http-headers-prefix", Takes: "any", read: toFlag("http-headers-prefix")},
	{Part: Server, Key: httpSink + "batch.enabled", Default: "false", Takes: "`false`",
		Refuses: "`true`: batches (a JSON array of values per request) are not implemented",
		read: func(r *reading, k, v string) {
			if b, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil || b {
				r.refuse(k, fmt.Sprintf("%q: batches (a JSON array of values per request) are not implemented; each event is its own request", v))
			}
		}},
	{Part: Server, Key: httpSink + "batch.max-size", Default: "200", Setting: Ignored, Takes: "ignored without `batch.enabled`",
		read: ignore("without batch.enabled")},
	{Part: Server, Key: httpSink + "authentication.type", Takes: "`standard-webhooks` (Standard Webhooks signatures), in any case",
		Refuses: "`jwt`, `oauth2`: not implemented; another value, which Debezium Server refuses",
		read: func(r *reading, k, v string) {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "standard-webhooks":
			case "jwt", "oauth2":
				r.refuse(k, fmt.Sprintf("%q authentication is not implemented (standard-webhooks is)", v))
			default:
				r.refuse(k, fmt.Sprintf("%q: Debezium Server knows jwt, oauth2 and standard-webhooks, and does not start with another", v))
			}
		}},
	{Part: Server, Key: httpSink + "authentication.webhook.secret", Setting: "http-webhook-secret", Takes: "a `whsec_` secret, with `authentication.type=standard-webhooks`",
		read: toFlag("http-webhook-secret")},
	{Part: Server, Key: httpSink + "authentication.", Refuses: "the `jwt` and `oauth2` keys: not implemented",
		read: func(r *reading, k, _ string) {
			r.refuse(k, "JWT and OAuth2 authentication are not implemented (authentication.type=standard-webhooks is)")
		}},
}

func init() { options = append(options, httpOptions...) }

// httpSettings reads what the sink's options and formats say together:
// the content-type Debezium Server sends (from debezium.format.value),
// and the formats its sink fails on at the first record: the body is the
// value as text, the headers are text.
func (c config) httpSettings(r *reading) {
	if strings.TrimSpace(c.other["debezium.sink.type"]) != "http" {
		return
	}
	f, set := c.other["debezium.format.value"]
	if !set {
		// The sink reads it with getValue, which fails without it.
		r.refuse("debezium.sink.type", `"http" without debezium.format.value: Debezium Server's http sink requires it and does not start (SRCFG00014); set json or cloudevents`)
	}
	switch f = strings.TrimSpace(f); f {
	case "jsonbytearray", "binary", "avro", "protobuf":
		r.refuse("debezium.format.value", fmt.Sprintf("%q with debezium.sink.type=http: the sink sends the value as text and fails at the first record of bytes (use json or cloudevents)", f))
	case "cloudevents":
		r.set("http-content-type", "application/cloudevents+json")
	default:
		r.set("http-content-type", "application/json")
	}
	if strings.TrimSpace(c.other["debezium.format.header"]) == "jsonbytearray" {
		r.refuse("debezium.format.header", `"jsonbytearray" with debezium.sink.type=http: the sink sends headers as text and fails at the first record with a header (use json)`)
	}
	if t := strings.ToLower(strings.TrimSpace(c.other[httpSink+"authentication.type"])); t == "standard-webhooks" && strings.TrimSpace(c.other[httpSink+"authentication.webhook.secret"]) == "" {
		r.refuse(httpSink+"authentication.type", "standard-webhooks without authentication.webhook.secret")
	}
}
