package main

import (
	"errors"
	"flag"
	"net/url"
	"os"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/webhook"
)

// sinkHTTP is Debezium Server's name of the HTTP sink.
const sinkHTTP = "http"

// webhookFlags are the flags of the HTTP sink, each Debezium Server's
// debezium.sink.http.* key of the same name.
type webhookFlags struct {
	url, dlqURL, contentType, prefix, secret string
	base64                                   bool
	timeout                                  time.Duration
	batchMaxSize                             int
	tls                                      tlsFiles
	oauth2                                   webhook.OAuth2
	jwt                                      webhook.JWT
}

func (w *webhookFlags) register(fs *flag.FlagSet) {
	const p = "--sink http: "
	fs.StringVar(&w.url, "http-url", "", p+"the endpoint every event is POSTed to, http:// or https:// (url; default the K_SINK environment variable, as Knative sets it); prefer PGOUTBOX_HTTP_URL when it holds credentials")
	fs.StringVar(&w.dlqURL, "http-dlq-url", "", p+"where dead letters are POSTed; empty: they stay in pgoutbox's dead-letter table (pgoutbox dlq list)")
	fs.StringVar(&w.contentType, "http-content-type", "", p+"every request's content-type (default application/json; application/cloudevents+json for CloudEvents, as Debezium Server sets it from debezium.format.value)")
	fs.StringVar(&w.prefix, "http-headers-prefix", webhook.DefaultHeaderPrefix, p+"the start of each event header's name, upper-cased after it (headers.prefix)")
	fs.BoolVar(&w.base64, "http-headers-base64", true, p+"header values in base64 (headers.encode.base64)")
	fs.StringVar(&w.secret, "http-webhook-secret", "", p+"sign each request as Standard Webhooks do, with this whsec_ secret, the event id as webhook-id (authentication.webhook.secret); prefer PGOUTBOX_HTTP_WEBHOOK_SECRET")
	fs.IntVar(&w.batchMaxSize, "http-batch-max-size", 0, p+"POST the events that waited while a request was out together, up to this many a request, as a JSON array of their values with the first event's headers; 0: one event a request (batch.enabled, batch.max-size)")
	fs.DurationVar(&w.timeout, "http-timeout", webhook.DefaultTimeout, p+"how long a request may take (timeout.ms)")
	fs.StringVar(&w.oauth2.TokenURL, "http-oauth2-token-url", "", p+"send each request with a bearer token of this OAuth2 token endpoint's client credentials grant, asked for again once 0.9 of its expires_in passed (authentication.type=oauth2, authentication.oauth2.token-url)")
	fs.StringVar(&w.oauth2.ClientID, "http-oauth2-client-id", "", p+"the OAuth2 client's id (authentication.oauth2.client-id)")
	fs.StringVar(&w.oauth2.ClientSecret, "http-oauth2-client-secret", "", p+"the OAuth2 client's secret (authentication.oauth2.client-secret); prefer PGOUTBOX_HTTP_OAUTH2_CLIENT_SECRET")
	fs.StringVar(&w.oauth2.Scope, "http-oauth2-scope", "", p+"the scope asked for; empty: none (authentication.oauth2.scope)")
	fs.Func("http-oauth2-client-auth", p+"how the client's id and secret are sent: basic (HTTP basic authentication, Debezium Server's) or post (in the form) (default basic)", func(v string) error {
		if v != string(webhook.ClientSecretBasic) && v != string(webhook.ClientSecretPost) {
			return errors.New("basic or post")
		}
		w.oauth2.ClientAuth = webhook.ClientAuth(v)
		return nil
	})
	fs.StringVar(&w.jwt.URL, "http-jwt-url", "", p+"send each request with a token of this JWT auth server, asked for at <url>auth/authenticate, renewed at <url>auth/refreshToken once 0.9 of its expires_in passed; end it with / (authentication.type=jwt, authentication.jwt.url)")
	fs.StringVar(&w.jwt.Username, "http-jwt-username", "", p+"the JWT auth server's user (authentication.jwt.username)")
	fs.StringVar(&w.jwt.Password, "http-jwt-password", "", p+"its password (authentication.jwt.password); prefer PGOUTBOX_HTTP_JWT_PASSWORD")
	fs.DurationVar(&w.jwt.TokenExpiration, "http-jwt-token-expiration", webhook.DefaultJWTTokenExpiration, p+"the token's lifetime asked for, whole minutes (authentication.jwt.token_expiration)")
	fs.DurationVar(&w.jwt.RefreshTokenExpiration, "http-jwt-refresh-token-expiration", webhook.DefaultJWTRefreshTokenExpiration, p+"the refresh token's lifetime asked for, whole minutes (authentication.jwt.refresh_token_expiration)")
	w.tls.register(fs, "http-tls", "the HTTP endpoint")
}

// secrets are the values the logger must mask: the secrets, the
// password, and the URLs' passwords.
func (w *webhookFlags) secrets() []string {
	out := w.tls.secrets()
	for _, s := range []string{w.secret, w.oauth2.ClientSecret, w.jwt.Password} {
		if s != "" {
			out = append(out, s)
		}
	}
	for _, s := range []string{w.url, w.dlqURL, os.Getenv("K_SINK"), w.oauth2.TokenURL, w.jwt.URL} {
		if u, err := url.Parse(s); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && pw != "" {
				out = append(out, pw)
			}
		}
	}
	return out
}

// opener is the HTTP sink these flags describe; deadLetters is the
// dead-letter topic ("" under --on-poison halt), cloudEvents tells a
// structured CloudEvents format, and maxPending is --max-buffered-records.
func (w *webhookFlags) opener(deadLetters string, cloudEvents bool, maxPending int) (*broker.Webhook, error) {
	t, err := w.tls.config()
	if err != nil {
		return nil, err
	}
	u := w.url
	if u == "" {
		u = os.Getenv("K_SINK")
	}
	ct := w.contentType
	if ct == "" && cloudEvents {
		ct = "application/cloudevents+json"
	}
	cfg := webhook.Config{URL: u, DeadLetterURL: w.dlqURL, DeadLetterTopic: deadLetters, ContentType: ct,
		HeaderPrefix: w.prefix, RawHeaders: !w.base64, WebhookSecret: w.secret, Timeout: w.timeout, TLS: t, MaxPending: maxPending,
		BatchMaxSize: w.batchMaxSize}
	// Any of a kind's flags chooses it; Validate names what it lacks.
	if o := w.oauth2; o.TokenURL != "" || o.ClientID != "" || o.ClientSecret != "" || o.Scope != "" {
		cfg.OAuth2 = &o
	}
	if j := w.jwt; j.URL != "" || j.Username != "" || j.Password != "" {
		cfg.JWT = &j
	}
	return &broker.Webhook{Config: cfg}, nil
}

// webhookGuarantee is what run's start line says of the HTTP sink.
const webhookGuarantee = "at-least-once, each event POSTed in order and answered 2xx; a request sent again is not deduplicated by the endpoint unless it reads the webhook-id, the event id (a batch's: its first event's id and its count)"
