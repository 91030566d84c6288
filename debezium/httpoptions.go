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
	{Part: Server, Key: httpSink + "batch.enabled", Default: "false", Setting: "http-batch-max-size",
		Takes:   "`true` (the events that waited while a request was out are POSTed together, up to `batch.max-size` a request, as a JSON array of their values with the first event's headers), `false`",
		Refuses: "another value", read: accept},
	{Part: Server, Key: httpSink + "batch.max-size", Default: "200", Setting: "http-batch-max-size", Takes: "a positive number, with `batch.enabled=true`; ignored without it",
		Refuses: "a value that is not a positive number", read: accept},
	{Part: Server, Key: httpSink + "authentication.type",
		Takes:   "`standard-webhooks` (Standard Webhooks signatures), `oauth2` (a bearer token of an OAuth2 token endpoint), `jwt` (a token of a JWT auth server), in any case; unset, none: the other `authentication.*` keys are ignored, as Debezium Server ignores them",
		Refuses: "another value, which Debezium Server refuses; a kind without the keys Debezium Server does not start without",
		read: func(r *reading, k, v string) {
			if _, ok := httpAuthKinds[strings.ToLower(strings.TrimSpace(v))]; !ok {
				r.refuse(k, fmt.Sprintf("%q: Debezium Server knows jwt, oauth2 and standard-webhooks, and does not start with another", v))
			}
		}},
	{Part: Server, Key: httpSink + "authentication.webhook.secret", Setting: "http-webhook-secret", Takes: "a `whsec_` secret, with `authentication.type=standard-webhooks`",
		read: accept},
	{Part: Server, Key: httpSink + "authentication.oauth2.token-url", Setting: "http-oauth2-token-url",
		Takes: "an `http://` or `https://` URL, with `authentication.type=oauth2`: the client credentials grant, the client's id and secret in HTTP basic authentication, as Debezium Server sends them", read: accept},
	{Part: Server, Key: httpSink + "authentication.oauth2.client-id", Setting: "http-oauth2-client-id", Takes: "any", read: accept},
	{Part: Server, Key: httpSink + "authentication.oauth2.client-secret", Setting: "http-oauth2-client-secret", Takes: "any", read: accept},
	{Part: Server, Key: httpSink + "authentication.oauth2.scope", Setting: "http-oauth2-scope", Takes: "any; unset or empty, no scope is asked for", read: accept},
	{Part: Server, Key: httpSink + "authentication.jwt.url", Setting: "http-jwt-url",
		Takes:   "the auth server's URL, with `authentication.type=jwt`: `auth/authenticate` and `auth/refreshToken` are appended to it as written, as Debezium Server appends them",
		Refuses: "a URL without a path, to which they would be appended after the host", read: accept},
	{Part: Server, Key: httpSink + "authentication.jwt.username", Setting: "http-jwt-username", Takes: "any", read: accept},
	{Part: Server, Key: httpSink + "authentication.jwt.password", Setting: "http-jwt-password", Takes: "any", read: accept},
	{Part: Server, Key: httpSink + "authentication.jwt.token_expiration", Default: "60", Setting: "http-jwt-token-expiration",
		Takes: "minutes, the lifetime asked for", Refuses: "a value that is not a positive whole number", read: accept},
	{Part: Server, Key: httpSink + "authentication.jwt.refresh_token_expiration", Default: "1440", Setting: "http-jwt-refresh-token-expiration",
		Takes: "minutes, the refresh token's lifetime asked for", Refuses: "a value that is not a positive whole number", read: accept},
	{Part: Server, Key: httpSink + "authentication.", Setting: Ignored,
		Takes: "ignored, as Debezium Server 3.6.1's sink reads no other: its OAuth2 client always sends the client's id and secret in HTTP basic authentication, with no other parameter (`--http-oauth2-client-auth post` sends them in the form)",
		read:  ignore("Debezium Server's sink does not read it")},
}

// httpAuthKinds are authentication.type's values, each with its keys
// (after authentication.), their flags, and the keys Debezium Server does
// not start without.
var httpAuthKinds = map[string]struct {
	keys     map[string]string
	required []string
}{
	"standard-webhooks": {keys: map[string]string{"webhook.secret": "http-webhook-secret"}, required: []string{"webhook.secret"}},
	"oauth2": {keys: map[string]string{"oauth2.token-url": "http-oauth2-token-url", "oauth2.client-id": "http-oauth2-client-id",
		"oauth2.client-secret": "http-oauth2-client-secret", "oauth2.scope": "http-oauth2-scope"},
		required: []string{"oauth2.token-url", "oauth2.client-id", "oauth2.client-secret"}},
	"jwt": {keys: map[string]string{"jwt.url": "http-jwt-url", "jwt.username": "http-jwt-username", "jwt.password": "http-jwt-password",
		"jwt.token_expiration": "http-jwt-token-expiration", "jwt.refresh_token_expiration": "http-jwt-refresh-token-expiration"},
		required: []string{"jwt.url", "jwt.username", "jwt.password"}},
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
	c.httpAuth(r)
	c.httpBatch(r)
}

// httpBatch sets --http-batch-max-size from batch.enabled and
// batch.max-size, which Debezium Server reads only with batch.enabled.
func (c config) httpBatch(r *reading) {
	const enabled, maxSize = httpSink + "batch.enabled", httpSink + "batch.max-size"
	on := false
	if v, ok := c.other[enabled]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			r.refuse(enabled, fmt.Sprintf("%q: true or false", v))
			return
		}
		on = b
	}
	v, set := c.other[maxSize]
	if !on {
		if set {
			r.ignore(maxSize + " (read with batch.enabled=true only)")
		}
		return
	}
	n := 200
	if set {
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil || n <= 0 {
			r.refuse(maxSize, fmt.Sprintf("%q: not a positive number", v))
			return
		}
	}
	r.set("http-batch-max-size", strconv.Itoa(n))
}

// httpAuth sets the flags of the keys of authentication.type's kind, as
// Debezium Server reads only those, and names the others among the
// ignored; it refuses a kind without a key Debezium Server does not start
// without.
func (c config) httpAuth(r *reading) {
	const prefix = httpSink + "authentication."
	typ, set := c.other[prefix+"type"]
	name := strings.ToLower(strings.TrimSpace(typ))
	for other, k := range httpAuthKinds {
		if other == name {
			continue
		}
		for key := range k.keys {
			if _, ok := c.other[prefix+key]; ok {
				r.ignore(prefix + key + " (read with authentication.type=" + other + " only)")
			}
		}
	}
	kind, known := httpAuthKinds[name]
	if !set || !known {
		return
	}
	for _, key := range kind.required {
		if v := strings.TrimSpace(c.other[prefix+key]); v == "" {
			r.refuse(prefix+"type", fmt.Sprintf("%s without %s: Debezium Server does not start without it", strings.TrimSpace(typ), "authentication."+key))
		}
	}
	for _, key := range sortedKeys(kind.keys) {
		flag := kind.keys[key]
		v, ok := c.other[prefix+key]
		if !ok {
			continue
		}
		if strings.HasSuffix(key, "expiration") {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n <= 0 {
				r.refuse(prefix+key, fmt.Sprintf("%q: not a positive whole number of minutes", v))
				continue
			}
			v = strconv.Itoa(n) + "m"
		}
		r.set(flag, v)
	}
}
