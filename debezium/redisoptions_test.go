package debezium

import (
	"strings"
	"testing"
)

const redisServerBase = `debezium.sink.type=redis
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.topic.prefix=app
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`

// Debezium Server's redis sink keys set the --redis-* flags; what the sink
// fails at its first record, pgoutbox refuses at start, naming the key.
func TestRedisSinkOptions(t *testing.T) {
	tr, _, err := Read([]byte(redisServerBase + `debezium.sink.redis.address=127.0.0.1:6379
debezium.sink.redis.password=pw
debezium.sink.redis.db.index=3
debezium.sink.redis.ssl.enabled=true
debezium.sink.redis.ssl.truststore.type=JKS
debezium.sink.redis.wait.enabled=true
debezium.sink.redis.wait.timeout.ms=250
debezium.sink.redis.wait.retry.enabled=true
debezium.sink.redis.batch.size=50
debezium.sink.redis.null.key=nokey
debezium.sink.redis.message.format=extended
debezium.sink.redis.memory.limit.mb=64
debezium.sink.redis.skip.heartbeat.messages=false
debezium.sink.redis.retry.max.attempts=3
`))
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"sink": "redis", "redis-address": "127.0.0.1:6379", "redis-password": "pw", "redis-db": "3", "redis-tls": "true",
		"redis-wait": "true", "redis-wait-timeout": "250ms", "redis-batch-size": "50", "redis-null-key": "nokey",
		"redis-message-format": "extended", "redis-memory-limit-mb": "64",
	} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
	ignored := strings.Join(tr.Ignored, "\n")
	for _, k := range []string{"wait.retry.enabled", "retry.max.attempts"} {
		if !strings.Contains(ignored, "debezium.sink.redis."+k) {
			t.Errorf("%s not named among the ignored: %v", k, tr.Ignored)
		}
	}

	for _, tc := range []struct{ props, key string }{
		{"debezium.format.key=jsonbytearray\n", "debezium.format.key"},
		{"debezium.format.value=binary\n", "debezium.format.value"},
		{"debezium.format.header=jsonbytearray\ndebezium.sink.redis.message.format=extended\n", "debezium.format.header"},
		{"debezium.sink.redis.message.format=full\n", "debezium.sink.redis.message.format"},
		{"debezium.sink.redis.cluster.enabled=yes\n", "debezium.sink.redis.cluster.enabled"},
		{"debezium.sink.redis.db.index=16\n", "debezium.sink.redis.db.index"},
		{"debezium.sink.redis.wait.timeout.ms=0\n", "debezium.sink.redis.wait.timeout.ms"},
		{"debezium.sink.redis.ssl.enabled=true\ndebezium.sink.redis.ssl.truststore.path=/etc/trust.bks\ndebezium.sink.redis.ssl.truststore.type=BKS\n",
			"debezium.sink.redis.ssl.truststore.type"},
	} {
		_, _, err := Read([]byte(redisServerBase + "debezium.sink.redis.address=h:1\n" + tc.props))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want a refusal naming %s", strings.TrimSpace(tc.props), err, tc.key)
		}
	}
	// The header format matters only where headers are written.
	if _, _, err := Read([]byte(redisServerBase + "debezium.sink.redis.address=h:1\ndebezium.format.header=jsonbytearray\n")); err != nil {
		t.Errorf("jsonbytearray headers in the compact format, which writes none: %v", err)
	}
	// Another sink's bytes are not the redis sink's concern.
	if _, _, err := Read([]byte(strings.Replace(redisServerBase, "type=redis", "type=kafka", 1) + "debezium.format.key=jsonbytearray\n")); err != nil {
		t.Errorf("jsonbytearray with the kafka sink: %v", err)
	}
}
