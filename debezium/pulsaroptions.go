package debezium

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// pulsarSink starts the Pulsar sink's options.
const pulsarSink = "debezium.sink.pulsar."

// pulsarTokenAuth is the Pulsar client's token authentication plugin.
const pulsarTokenAuth = "org.apache.pulsar.client.impl.auth.AuthenticationToken"

// pulsarOptions are Debezium Server's pulsar sink's options
// (PulsarChangeConsumerConfig, and the Pulsar client's own under client.
// and producer.).
var pulsarOptions = []Option{
	{Part: Server, Key: pulsarSink + "client.serviceUrl", Setting: "pulsar-url", Takes: "`pulsar://` or `pulsar+ssl://` URL", read: toFlag("pulsar-url")},
	{Part: Server, Key: pulsarSink + "tenant", Default: "public", Setting: "pulsar-tenant", Takes: "a tenant", read: toFlag("pulsar-tenant")},
	{Part: Server, Key: pulsarSink + "namespace", Default: "default", Setting: "pulsar-namespace", Takes: "a namespace", read: toFlag("pulsar-namespace")},
	{Part: Server, Key: pulsarSink + "null.key", Default: "default", Setting: "pulsar-null-key", Takes: "any", read: toFlag("pulsar-null-key")},
	{Part: Server, Key: pulsarSink + "timeout", Default: "0", Setting: "pulsar-send-timeout",
		Takes: "milliseconds a batch may wait for its confirms, each message's in pgoutbox; `0`, Debezium Server's wait without end, pgoutbox's default 30 s",
		read: func(r *reading, k, v string) {
			ms, err := strconv.Atoi(strings.TrimSpace(v))
			switch {
			case err != nil || ms < 0:
				r.refuse(k, fmt.Sprintf("%q: milliseconds, 0 or more", v))
			case ms > 0:
				r.set("pulsar-send-timeout", (time.Duration(ms) * time.Millisecond).String())
			}
		}},
	{Part: Server, Key: pulsarSink + "producer.batcherBuilder", Default: "DEFAULT", Setting: Ignored,
		Takes: "`DEFAULT`, `KEY_BASED`: ignored, every message is a batch of its own, so of one key, as `KEY_BASED` asks", Refuses: "another value",
		read: func(r *reading, k, v string) {
			switch strings.TrimSpace(v) {
			case "KEY_BASED", "DEFAULT":
				r.ignore(k + " (every message is a batch of its own)")
			default:
				r.refuse(k, fmt.Sprintf("%q: DEFAULT or KEY_BASED", v))
			}
		}},
	{Part: Server, Key: pulsarSink + "producer.sendTimeoutMs", Setting: "pulsar-send-timeout", Takes: "milliseconds, each message's wait for its confirm",
		Refuses: "a value that is not a positive number", read: millis("pulsar-send-timeout")},
	{Part: Server, Key: pulsarSink + "client.authPluginClassName", Takes: "`" + pulsarTokenAuth + "` (a JWT, with `client.authParams`)",
		Refuses: "another plugin (TLS, OAuth 2.0, Athenz, Basic): not implemented", read: func(r *reading, k, v string) {
			if strings.TrimSpace(v) != pulsarTokenAuth {
				r.refuse(k, fmt.Sprintf("%q: token authentication (%s) is implemented, the other plugins are not", v, pulsarTokenAuth))
			}
		}},
	{Part: Server, Key: pulsarSink + "client.authParams", Setting: "pulsar-token", Takes: "`token:<JWT>`, `file:<path>` or the JWT, as the token plugin reads them",
		read: func(r *reading, _, v string) {
			v = strings.TrimSpace(v)
			switch {
			case strings.HasPrefix(v, "token:"):
				r.set("pulsar-token", strings.TrimPrefix(v, "token:"))
			case strings.HasPrefix(v, "file:"):
				r.set("pulsar-token-file", strings.TrimPrefix(strings.TrimPrefix(v, "file:"), "//"))
			default:
				r.set("pulsar-token", v)
			}
		}},
	{Part: Server, Key: pulsarSink + "client.tlsTrustCertsFilePath", Setting: "pulsar-tls-trust-certs", Takes: "a PEM file", read: toFlag("pulsar-tls-trust-certs")},
	{Part: Server, Key: pulsarSink + "client.tlsAllowInsecureConnection", Default: "false", Setting: "pulsar-tls-allow-insecure", Takes: "`true`, `false`",
		Refuses: "another value", read: boolFlag("pulsar-tls-allow-insecure")},
	{Part: Server, Key: pulsarSink + "client.tlsHostnameVerificationEnable", Default: "false", Setting: "pulsar-tls-validate-hostname", Takes: "`true`, `false`",
		Refuses: "another value", read: boolFlag("pulsar-tls-validate-hostname")},
	{Part: Server, Key: pulsarSink + "client.", Setting: Ignored,
		Takes: "ignored: the client's other settings (timeouts, threads, connections), which change no message",
		read:  ignore("the Pulsar client's other settings change no message")},
	{Part: Server, Key: pulsarSink + "producer.", Setting: Ignored,
		Takes: "ignored: the producer's other settings (batching, compression, pending messages), which change no message a consumer reads",
		read:  ignore("the Pulsar producer's other settings change no message a consumer reads")},
}

func init() { options = append(options, pulsarOptions...) }

// pulsarSettings reads what the sink's formats say: a value of text is a
// STRING-schema message, one of bytes a message without schema; a key
// or header in bytes fails the sink's first record (its key and
// properties are text), and pgoutbox refuses it at start.
func pulsarSettings(c config, r *reading) {
	if strings.TrimSpace(c.other["debezium.sink.type"]) != "pulsar" {
		return
	}
	switch f := strings.TrimSpace(c.other["debezium.format.value"]); f {
	case "jsonbytearray", "binary":
		r.set("pulsar-schema", "bytes")
	}
	switch f := strings.TrimSpace(c.other["debezium.format.key"]); f {
	case "jsonbytearray", "binary":
		r.refuse("debezium.format.key", fmt.Sprintf("%q with debezium.sink.type=pulsar: the sink sends the key as text and fails at the first record of bytes (use json or simplestring)", f))
	}
	if strings.TrimSpace(c.other["debezium.format.header"]) == "jsonbytearray" {
		r.refuse("debezium.format.header", `"jsonbytearray" with debezium.sink.type=pulsar: the sink sends headers as text properties and fails at the first record with a header (use json)`)
	}
	if _, ok := c.other[pulsarSink+"client.authParams"]; ok {
		if _, plugin := c.other[pulsarSink+"client.authPluginClassName"]; !plugin {
			r.refuse(pulsarSink+"client.authParams", "without client.authPluginClassName, which names how to read it")
		}
	}
}
