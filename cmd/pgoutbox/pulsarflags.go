package main

import (
	"errors"
	"flag"
	"net/url"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/pulsar"
)

// sinkPulsar is Debezium Server's name of the Apache Pulsar sink.
const sinkPulsar = "pulsar"

// pulsarFlags are the flags of the Pulsar sink, each Debezium Server's
// debezium.sink.pulsar.* key of the same name.
type pulsarFlags struct {
	url, tenant, namespace, nullKey, schema string
	token, tokenFile, trustCerts            string
	allowInsecure, validateHost             bool
	maxMessageBytes                         int
	sendTimeout                             time.Duration
}

func (f *pulsarFlags) register(fs *flag.FlagSet) {
	const p = "--sink pulsar: "
	fs.StringVar(&f.url, "pulsar-url", "", p+"the broker, pulsar://host:6650 or pulsar+ssl://host:6651 (client.serviceUrl)")
	fs.StringVar(&f.tenant, "pulsar-tenant", pulsar.DefaultTenant, p+"the tenant of every topic (tenant)")
	fs.StringVar(&f.namespace, "pulsar-namespace", pulsar.DefaultNamespace, p+"the namespace of every topic (namespace)")
	fs.StringVar(&f.nullKey, "pulsar-null-key", pulsar.DefaultNullKey, p+"the key of an event without a key (null.key)")
	fs.StringVar(&f.schema, "pulsar-schema", "string", p+"string: messages of the STRING schema, as Debezium Server sends a format of text; bytes: without schema, as it sends one of bytes")
	fs.StringVar(&f.token, "pulsar-token", "", p+"a JWT the broker authenticates (client.authParams token:...); prefer PGOUTBOX_PULSAR_TOKEN")
	fs.StringVar(&f.tokenFile, "pulsar-token-file", "", p+"a file holding that token (client.authParams file:...)")
	fs.StringVar(&f.trustCerts, "pulsar-tls-trust-certs", "", p+"the CAs a pulsar+ssl:// broker is checked against, PEM (client.tlsTrustCertsFilePath)")
	fs.BoolVar(&f.allowInsecure, "pulsar-tls-allow-insecure", false, p+"take any broker certificate (client.tlsAllowInsecureConnection)")
	fs.BoolVar(&f.validateHost, "pulsar-tls-validate-hostname", false, p+"check the broker certificate's name (client.tlsHostnameVerificationEnable)")
	fs.IntVar(&f.maxMessageBytes, "pulsar-max-message-bytes", pulsar.DefaultMaxMessageBytes, p+"the largest payload the broker takes (its maxMessageSize): a larger event is dead-lettered")
	fs.DurationVar(&f.sendTimeout, "pulsar-send-timeout", pulsar.DefaultSendTimeout, p+"how long a message may wait for the broker's confirm (timeout)")
}

// secrets are the values the logger must mask: the token, and the URL's
// password.
func (f *pulsarFlags) secrets() []string {
	var out []string
	if f.token != "" {
		out = append(out, f.token)
	}
	if u, err := url.Parse(f.url); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw)
		}
	}
	return out
}

// opener is the Pulsar sink these flags describe; maxPending is
// --max-buffered-records.
func (f *pulsarFlags) opener(maxPending int) (*broker.Pulsar, error) {
	if f.schema != "string" && f.schema != "bytes" {
		return nil, errors.New("--pulsar-schema: string or bytes")
	}
	cfg := pulsar.Config{ServiceURL: f.url, Tenant: f.tenant, Namespace: f.namespace, NullKey: f.nullKey, Text: f.schema == "string",
		Token: f.token, TokenFile: f.tokenFile, TLSTrustCertsFile: f.trustCerts, TLSAllowInsecure: f.allowInsecure,
		TLSValidateHostname: f.validateHost, MaxMessageBytes: f.maxMessageBytes, SendTimeout: f.sendTimeout, MaxPending: maxPending}
	return &broker.Pulsar{Config: cfg}, nil
}

// pulsarGuarantee is what run's start line says of the Pulsar sink.
const pulsarGuarantee = "at-least-once, each message confirmed by the broker, each topic's in order"
