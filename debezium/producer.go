package debezium

import (
	"fmt"
	"strconv"
	"strings"
)

// The Kafka producer's settings, as a Kafka Connect connector overrides
// them (producer.override.*, which the worker allows with
// connector.client.config.override.policy) and as Debezium Server passes
// them to its producer (debezium.sink.kafka.producer.*). They are read
// together at the end (finishProducer): a compression level belongs to
// its codec, SASL and TLS settings to the security protocol.
const (
	connectProducer = "producer.override."
	serverProducer  = "debezium.sink.kafka.producer."
)

// producerRow is one producer setting, a row of both parts' tables.
type producerRow struct {
	key, def, setting, takes, refuses string
}

var producerRows = []producerRow{
	{key: "bootstrap.servers", setting: "kafka-brokers", takes: "any"},
	{key: "client.id", setting: "kafka-client-id", takes: "any"},
	{key: "compression.type", def: "none", setting: "kafka-compression",
		takes: "`none`, `gzip`, `snappy`, `lz4`, `zstd`", refuses: "another codec, as Kafka does"},
	{key: "compression.gzip.level", def: "-1", setting: "kafka-compression-level",
		takes: "1-9 (-1 the codec's default), with `compression.type=gzip`; ignored with another codec", refuses: "other values, as Kafka does"},
	{key: "compression.lz4.level", def: "9", setting: "kafka-compression-level",
		takes: "1-17 with `compression.type=lz4` (the Go encoder has 9 levels: 10-17 are its 9th); unset, the Go encoder's fastest, not Kafka's 9", refuses: "other values, as Kafka does"},
	{key: "compression.zstd.level", def: "3", setting: "kafka-compression-level",
		takes: "-131072-22 with `compression.type=zstd`, mapped to the Go encoder's four speeds", refuses: "other values, as Kafka does"},
	{key: "linger.ms", def: "5", setting: "linger",
		takes: "milliseconds; unset, pgoutbox's 0 (latency first), not Kafka 4's 5", refuses: "a negative or non-numeric value"},
	{key: "batch.size", def: "16384", setting: Ignored,
		takes: "ignored: a batch is bounded by the largest record (`--max-message-bytes`, the topic's `max.message.bytes`), as franz-go refuses a record larger than its batch limit where Kafka's producer sends it alone"},
	{key: "max.request.size", def: "1048576", setting: "max-message-bytes",
		takes: "the largest record and the largest request (`--max-message-bytes`, `--kafka-max-request-bytes`), as Kafka's producer checks both against it", refuses: "a value below 1024"},
	{key: "request.timeout.ms", def: "30000", setting: "kafka-request-timeout", takes: "milliseconds", refuses: "a non-positive or non-numeric value"},
	{key: "acks", def: "all", takes: "`all`, `-1`; `0` and `1` run as `all`, with a warning: pgoutbox confirms an event to PostgreSQL only once every in-sync replica has it",
		refuses: "other values, as Kafka does"},
	{key: "enable.idempotence", def: "true", takes: "`true`; `false` runs idempotent, with a warning: without it a retried batch is written twice and may overtake the one before it",
		refuses: "other values, as Kafka does"},
	{key: "max.in.flight.requests.per.connection", def: "5", takes: "1-5; more runs with 5, with a warning: Kafka keeps an idempotent producer's order with at most 5",
		refuses: "a non-positive or non-numeric value"},
	{key: "security.protocol", def: "PLAINTEXT", setting: "kafka-tls",
		takes: "`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`; the `ssl.*` settings are read with `SSL`, the `sasl.*` ones with `SASL_*`, as Kafka reads them", refuses: "other values"},
	{key: "sasl.mechanism", def: "GSSAPI", setting: "kafka-sasl-mechanism",
		takes: "`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` (with a token endpoint), `AWS_MSK_IAM`", refuses: "`GSSAPI` (Kerberos)"},
	{key: "sasl.jaas.config", setting: "kafka-username",
		takes:   "`PlainLoginModule`, `ScramLoginModule` (`username`, `password`); `OAuthBearerLoginModule` (`clientId`, `clientSecret`, `scope`: `--kafka-oauth-*`); `IAMLoginModule` (`awsProfileName`, `awsRoleArn`, `awsRoleSessionName`, `awsStsRegion`: `--kafka-aws-*`)",
		refuses: "another login module, or one that is not the mechanism's"},
	{key: "sasl.oauthbearer.token.endpoint.url", setting: "kafka-oauth-token-url", takes: "an `http` or `https` URL (the client credentials grant)",
		refuses: "`OAUTHBEARER` without it: Kafka's unsecured development tokens"},
	{key: "sasl.login.callback.handler.class", takes: "Kafka's `OAuthBearerLoginCallbackHandler`", refuses: "another handler"},
	{key: "sasl.client.callback.handler.class", takes: "`software.amazon.msk.auth.iam.IAMClientCallbackHandler`", refuses: "another handler"},
	{key: "ssl.truststore.type", def: "JKS", setting: "kafka-tls-ca", takes: "`JKS`, `PKCS12`, `PEM`",
		refuses: "another type (`BCFKS`, ...)"},
	{key: "ssl.truststore.location", setting: "kafka-tls-ca", takes: "the trust store: a JKS or PKCS12 store, or a PEM file of CA certificates"},
	{key: "ssl.truststore.password", setting: "kafka-tls-ca-password", takes: "the trust store's password (a PEM file has none)"},
	{key: "ssl.keystore.type", def: "JKS", setting: "kafka-tls-cert", takes: "`JKS`, `PKCS12`, `PEM`",
		refuses: "another type (`BCFKS`, ...)"},
	{key: "ssl.keystore.location", setting: "kafka-tls-cert", takes: "the key store: a JKS or PKCS12 store, or a PEM file with the client's private key and certificate chain (`--kafka-tls-cert` and `--kafka-tls-key`)"},
	{key: "ssl.keystore.password", setting: "kafka-tls-cert-password", takes: "the key store's password (a PEM file has none)"},
	{key: "ssl.key.password", setting: "kafka-tls-key-password", takes: "the key's password in a JKS or PKCS12 key store",
		refuses: "with a PEM key store: an encrypted private key; pgoutbox reads unencrypted PEM keys"},
	{key: "ssl.keystore.key", refuses: "any: the key inline; write it to a file with the certificate chain (`ssl.keystore.location`)"},
	{key: "ssl.keystore.certificate.chain", refuses: "any: the chain inline; write it to a file with the key (`ssl.keystore.location`)"},
	{key: "ssl.truststore.certificates", refuses: "any: certificates inline; write them to a file (`ssl.truststore.location`)"},
}

func init() {
	for _, p := range producerRows {
		rows := []Option{{Part: Connector, Key: connectProducer + p.key}}
		if p.key != "bootstrap.servers" { // a row of options.go's
			rows = append(rows, Option{Part: Server, Key: serverProducer + p.key})
		}
		for _, o := range rows {
			o.Default, o.Setting, o.Takes, o.Refuses, o.read = p.def, p.setting, p.takes, p.refuses, stashProducer
			options = append(options, o)
		}
	}
}

// stashProducer keeps a producer setting for finishProducer.
func stashProducer(r *reading, k, v string) {
	name := strings.TrimPrefix(strings.TrimPrefix(k, serverProducer), connectProducer)
	if r.producer == nil {
		r.producer = map[string]keyValue{}
	}
	r.producer[name] = keyValue{k, strings.TrimSpace(v)}
}

// keyValue is a setting's key, as the file writes it, and its value.
type keyValue struct{ key, value string }

// finishProducer reads the producer settings stashed.
func (r *reading) finishProducer() {
	p := r.producer
	if p == nil {
		return
	}
	if kv, ok := p["bootstrap.servers"]; ok {
		r.set("kafka-brokers", kv.value)
	}
	if kv, ok := p["client.id"]; ok {
		r.set("kafka-client-id", kv.value)
	}
	r.millis(p, "linger.ms", "linger", 0)
	r.millis(p, "request.timeout.ms", "kafka-request-timeout", 1)
	if kv, ok := p["max.request.size"]; ok {
		if n, err := strconv.Atoi(kv.value); err != nil || n < 1024 {
			r.refuse(kv.key, fmt.Sprintf("%q: want a number of bytes, at least 1024", kv.value))
		} else {
			r.set("max-message-bytes", kv.value)
			r.set("kafka-max-request-bytes", kv.value)
		}
	}
	if kv, ok := p["batch.size"]; ok {
		r.ignore(kv.key + " (a batch is bounded by the largest record, --max-message-bytes)")
	}
	r.guarantees(p)
	r.compression(p)
	r.security(p)
}

// millis reads a number of milliseconds, at least least, into flag.
func (r *reading) millis(p map[string]keyValue, name, flag string, least int) {
	kv, ok := p[name]
	if !ok {
		return
	}
	n, err := strconv.Atoi(kv.value)
	if err != nil || n < least {
		r.refuse(kv.key, fmt.Sprintf("%q: want a number of milliseconds, at least %d", kv.value, least))
		return
	}
	r.set(flag, strconv.Itoa(n)+"ms")
}

// guarantees keeps what pgoutbox promises, a confirmed event on every
// in-sync replica, once, in order, under settings that would weaken it,
// which Kafka's producer runs: they run with pgoutbox's stronger ones,
// each named in a warning. Values Kafka refuses are refused.
func (r *reading) guarantees(p map[string]keyValue) {
	if kv, ok := p["acks"]; ok {
		switch strings.ToLower(kv.value) {
		case "all", "-1":
		case "0", "1":
			r.warnings = append(r.warnings, fmt.Sprintf("%s=%s runs as acks=all: pgoutbox confirms an event to PostgreSQL only once every in-sync replica has it, where acks=%[2]s loses what a failed leader acknowledged", kv.key, kv.value))
		default:
			r.refuse(kv.key, fmt.Sprintf("%q: all, -1, 0 or 1, as Kafka takes", kv.value))
		}
	}
	if kv, ok := p["enable.idempotence"]; ok {
		switch strings.ToLower(kv.value) {
		case "true":
		case "false":
			r.warnings = append(r.warnings, fmt.Sprintf("%s=false runs idempotent: without it a retried batch is written twice and may overtake the one before it", kv.key))
		default:
			r.refuse(kv.key, fmt.Sprintf("%q: true or false, as Kafka takes", kv.value))
		}
	}
	if kv, ok := p["max.in.flight.requests.per.connection"]; ok {
		switch n, err := strconv.Atoi(kv.value); {
		case err != nil || n < 1:
			r.refuse(kv.key, fmt.Sprintf("%q: a positive number, as Kafka takes", kv.value))
		case n > 5:
			r.warnings = append(r.warnings, fmt.Sprintf("%s=%d runs with 5: Kafka keeps an idempotent producer's order with at most 5", kv.key, n))
		}
	}
}

// compression reads compression.type and the level of its codec.
func (r *reading) compression(p map[string]keyValue) {
	codec := "none"
	if kv, ok := p["compression.type"]; ok {
		codec = strings.ToLower(kv.value)
		switch codec {
		case "none", "gzip", "snappy", "lz4", "zstd":
			r.set("kafka-compression", codec)
		default:
			r.refuse(kv.key, fmt.Sprintf("%q: want none, gzip, snappy, lz4 or zstd", kv.value))
			return
		}
	}
	// gzip's -1 is Deflater's default level, which is the codec's.
	for _, c := range []struct {
		codec  string
		lo, hi int
	}{{"gzip", 1, 9}, {"lz4", 1, 17}, {"zstd", -131072, 22}} {
		kv, ok := p["compression."+c.codec+".level"]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(kv.value)
		gzipDefault := c.codec == "gzip" && n == -1
		if err != nil || (n < c.lo || n > c.hi) && !gzipDefault {
			r.refuse(kv.key, fmt.Sprintf("%q: want %d to %d", kv.value, c.lo, c.hi))
			continue
		}
		if c.codec == codec && !gzipDefault {
			r.set("kafka-compression-level", kv.value)
		}
	}
}
