package debezium

import (
	"strings"
	"testing"
)

// Debezium Server's sinks name their TLS stores in keys of their own: each
// becomes --*-tls-ca or --*-tls-cert with its passwords where the sink
// uses it (NATS: one store for both, unless auth.jwt or auth.user is set;
// RabbitMQ and Redis: with their ssl.enabled), and is named among the
// ignored where it does not.
func TestSinkStores(t *testing.T) {
	const source = "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
	for _, tc := range []struct {
		name, props string
		want        map[string]string // "" for a flag that must be unset
		ignored     string
	}{
		{"nats", "debezium.sink.type=nats-jetstream\ndebezium.sink.nats-jetstream.url=nats://n:4222\n" +
			"debezium.sink.nats-jetstream.auth.tls.keystore=/etc/nats.p12\ndebezium.sink.nats-jetstream.auth.tls.keystore.password=S3cret-1\n" +
			"debezium.sink.nats-jetstream.auth.tls.password=S3cret-2\n",
			map[string]string{"nats-tls-cert": "/etc/nats.p12", "nats-tls-ca": "/etc/nats.p12", "nats-tls-cert-password": "S3cret-1",
				"nats-tls-ca-password": "S3cret-1", "nats-tls-key-password": "S3cret-2"}, ""},
		{"nats with a user", "debezium.sink.type=nats-jetstream\ndebezium.sink.nats-jetstream.url=nats://n:4222\n" +
			"debezium.sink.nats-jetstream.auth.user=u\ndebezium.sink.nats-jetstream.auth.password=p\n" +
			"debezium.sink.nats-jetstream.auth.tls.keystore=/etc/nats.p12\n",
			map[string]string{"nats-tls-cert": "", "nats-tls-ca": ""}, "debezium.sink.nats-jetstream.auth.tls.keystore (unused with"},
		{"rabbitmq", "debezium.sink.type=rabbitmq\ndebezium.sink.rabbitmq.connection.ssl.enabled=true\n" +
			"debezium.sink.rabbitmq.connection.ssl.key.store=/etc/client.p12\ndebezium.sink.rabbitmq.connection.ssl.key.store.password=S3cret-3\n" +
			"debezium.sink.rabbitmq.connection.ssl.trust.store=/etc/trust.jks\ndebezium.sink.rabbitmq.connection.ssl.trust.store.password=S3cret-4\n" +
			"debezium.sink.rabbitmq.connection.ssl.trust.store.type=JKS\n",
			map[string]string{"rabbitmq-tls": "true", "rabbitmq-tls-cert": "/etc/client.p12", "rabbitmq-tls-cert-password": "S3cret-3",
				"rabbitmq-tls-ca": "/etc/trust.jks", "rabbitmq-tls-ca-password": "S3cret-4"}, ""},
		{"rabbitmq without ssl", "debezium.sink.type=rabbitmq\ndebezium.sink.rabbitmq.connection.ssl.trust.store=/etc/trust.jks\n",
			map[string]string{"rabbitmq-tls-ca": ""}, "debezium.sink.rabbitmq.connection.ssl.trust.store (debezium.sink.rabbitmq.connection.ssl.enabled is not true)"},
		{"redis", "debezium.sink.type=redis\ndebezium.sink.redis.address=r:6379\ndebezium.sink.redis.ssl.enabled=true\n" +
			"debezium.sink.redis.ssl.truststore.path=/etc/trust.p12\ndebezium.sink.redis.ssl.truststore.password=S3cret-5\n" +
			"debezium.sink.redis.ssl.truststore.type=PKCS12\ndebezium.sink.redis.ssl.keystore.path=/etc/client.jks\n" +
			"debezium.sink.redis.ssl.keystore.password=S3cret-6\n",
			map[string]string{"redis-tls-ca": "/etc/trust.p12", "redis-tls-ca-password": "S3cret-5", "redis-tls-cert": "/etc/client.jks",
				"redis-tls-cert-password": "S3cret-6"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, err := Read([]byte(source + tc.props))
			if err != nil {
				t.Fatal(err)
			}
			for flag, want := range tc.want {
				got, ok := settingOf(tr, flag)
				if want == "" && ok || want != "" && got != want {
					t.Errorf("--%s = %q (set %v), want %q", flag, got, ok, want)
				}
			}
			if tc.ignored != "" && !strings.Contains(strings.Join(tr.Ignored, "\n"), tc.ignored) {
				t.Errorf("ignored %v, want %s", tr.Ignored, tc.ignored)
			}
		})
	}
	if _, _, err := Read([]byte(source + "debezium.sink.type=rabbitmq\ndebezium.sink.rabbitmq.connection.ssl.enabled=true\n" +
		"debezium.sink.rabbitmq.connection.ssl.key.store=/k.bks\ndebezium.sink.rabbitmq.connection.ssl.key.store.type=BKS\n" +
		"debezium.sink.rabbitmq.connection.ssl.key.store.password=S3cret-7\n")); err == nil ||
		!strings.Contains(err.Error(), "connection.ssl.key.store.type") || strings.Contains(err.Error(), "S3cret-7") {
		t.Errorf("a BKS store: %v", err)
	}
}
