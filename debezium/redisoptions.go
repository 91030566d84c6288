package debezium

import (
	"fmt"
	"strconv"
	"strings"
)

// redisSink starts the Redis Streams sink's options.
const redisSink = "debezium.sink.redis."

// redisOptions are Debezium Server's redis sink's options
// (RedisStreamChangeConsumerConfig, RedisCommonConfig).
var redisOptions = []Option{
	{Part: Server, Key: redisSink + "address", Setting: "redis-address", Takes: "`host:port`", read: toFlag("redis-address")},
	{Part: Server, Key: redisSink + "user", Setting: "redis-user", Takes: "any", read: toFlag("redis-user")},
	{Part: Server, Key: redisSink + "password", Setting: "redis-password", Takes: "any", read: toFlag("redis-password")},
	{Part: Server, Key: redisSink + "db.index", Default: "0", Setting: "redis-db", Takes: "0 to 15", Refuses: "other values, as Debezium Server does",
		read: intIn("redis-db", 0, 15)},
	{Part: Server, Key: redisSink + "ssl.enabled", Default: "false", Setting: "redis-tls", Takes: "`true`, `false`; the CA and a client certificate as PEM files (`--redis-tls-ca`, `--redis-tls-cert`, `--redis-tls-key`)",
		Refuses: "another value", read: boolFlag("redis-tls")},
	{Part: Server, Key: redisSink + "ssl.hostname.verification.enabled", Default: "false", Setting: Ignored,
		Takes: "ignored: pgoutbox always verifies the server's name (`--redis-tls-server-name` names the one in its certificate)",
		read:  ignore("pgoutbox always verifies the server's name; --redis-tls-server-name names the one in its certificate")},
	{Part: Server, Key: redisSink + "ssl.truststore.path", Setting: "redis-tls-ca",
		Takes: "a JKS or PKCS12 trust store (`.password`, `.type`: `JKS` by default), with `ssl.enabled=true`", read: accept},
	{Part: Server, Key: redisSink + "ssl.keystore.path", Setting: "redis-tls-cert",
		Takes: "a JKS or PKCS12 key store (`.password`, `.type`: `JKS` by default), with `ssl.enabled=true`", read: accept},
	{Part: Server, Key: redisSink + "ssl.", Takes: "empty values", Refuses: "other keys",
		read: func(r *reading, k, v string) {
			if strings.TrimSpace(v) != "" {
				r.refuse(k, "not a key of Debezium Server's Redis sink")
			}
		}},
	{Part: Server, Key: redisSink + "connection.timeout.ms", Default: "2000", Setting: "redis-connect-timeout", Takes: "milliseconds",
		Refuses: "a value that is not a positive number", read: millis("redis-connect-timeout")},
	{Part: Server, Key: redisSink + "socket.timeout.ms", Default: "2000", Setting: "redis-socket-timeout", Takes: "milliseconds",
		Refuses: "a value that is not a positive number", read: millis("redis-socket-timeout")},
	{Part: Server, Key: redisSink + "retry.", Setting: Ignored,
		Takes: "ignored: pgoutbox sends again what was not acknowledged, from the last confirmed position, with backoff",
		read:  ignore("pgoutbox sends again what was not acknowledged, from the last confirmed position, with backoff")},
	{Part: Server, Key: redisSink + "wait.enabled", Default: "false", Setting: "redis-wait", Takes: "`true`, `false`",
		Refuses: "another value", read: boolFlag("redis-wait")},
	{Part: Server, Key: redisSink + "wait.timeout.ms", Default: "1000", Setting: "redis-wait-timeout", Takes: "milliseconds",
		Refuses: "a value that is not a positive number, as Debezium Server does", read: millis("redis-wait-timeout")},
	{Part: Server, Key: redisSink + "wait.retry.enabled", Default: "false", Setting: Ignored,
		Takes: "ignored: pgoutbox asks WAIT again until a replica acknowledged, and never writes the batch again",
		read:  ignore("pgoutbox asks WAIT again until a replica acknowledged, and never writes the batch again")},
	{Part: Server, Key: redisSink + "wait.retry.delay.ms", Default: "1000", Setting: "redis-wait-retry-delay", Takes: "milliseconds",
		Refuses: "a value that is not a positive number", read: millis("redis-wait-retry-delay")},
	{Part: Server, Key: redisSink + "cluster.enabled", Default: "false", Setting: "redis-cluster", Takes: "`true`, `false`",
		Refuses: "another value", read: boolFlag("redis-cluster")},
	{Part: Server, Key: redisSink + "batch.size", Default: "500", Setting: "redis-batch-size", Takes: "a positive number",
		Refuses: "other values", read: intIn("redis-batch-size", 1, 1<<30)},
	{Part: Server, Key: redisSink + "null.key", Default: "default", Setting: "redis-null-key", Takes: "any", read: toFlag("redis-null-key")},
	{Part: Server, Key: redisSink + "null.value", Default: "default", Setting: "redis-null-value", Takes: "any", read: toFlag("redis-null-value")},
	{Part: Server, Key: redisSink + "message.format", Default: "compact", Setting: "redis-message-format", Takes: "`compact`, `extended`",
		Refuses: "other values, as Debezium Server does",
		read:    oneOf("redis-message-format", map[string]string{"compact": "compact", "extended": "extended"}, "%q: want compact or extended")},
	{Part: Server, Key: redisSink + "memory.limit.mb", Default: "0", Setting: "redis-memory-limit-mb", Takes: "0 or more",
		Refuses: "a negative value, as Debezium Server does", read: intIn("redis-memory-limit-mb", 0, 1<<40)},
	{Part: Server, Key: redisSink + "buffer.fill.rate", Default: "30000", Setting: "redis-buffer-fill-rate", Takes: "0 or more",
		Refuses: "a negative value, as Debezium Server does", read: intIn("redis-buffer-fill-rate", 0, 1<<40)},
	{Part: Server, Key: redisSink + "skip.heartbeat.messages", Default: "true", Setting: "redis-skip-prefix",
		Takes:   "`true` acknowledges without writing every record whose stream, after the transforms, starts with `topic.heartbeat.prefix`, heartbeats or not, as Debezium Server drops them; `false` writes them; any value but `false` is `true`, as Debezium's Configuration reads it",
		Refuses: "`true` with an empty `topic.heartbeat.prefix` (every record would be dropped)",
		read:    accept}, // with topic.heartbeat.prefix (heartbeat.go)
	{Part: Server, Key: redisSink + "memory.threshold.percentage", Setting: Ignored,
		Takes: "ignored, as by Debezium Server 3.6, which removed it (`memory.limit.mb`)",
		read:  ignore("Debezium Server 3.6 removed it; memory.limit.mb")},
}

// intIn reads an integer from lo to hi into flag.
func intIn(flag string, lo, hi int) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			r.refuse(k, fmt.Sprintf("%q: want a number from %d to %d", v, lo, hi))
			return
		}
		r.set(flag, strconv.Itoa(n))
	}
}

// redisFormats refuses at start what Debezium Server's redis sink fails
// at its first record: it writes keys, values and (in the extended
// format) headers as text, and a format that gives bytes
// (jsonbytearray, binary) throws "Unexpected data type" there
// (BaseChangeConsumer.getString).
func (c config) redisFormats(r *reading) {
	if strings.TrimSpace(c.other["debezium.sink.type"]) != "redis" {
		return
	}
	for _, part := range []string{"key", "value"} {
		switch f := strings.TrimSpace(c.other["debezium.format."+part]); f {
		case "jsonbytearray", "binary":
			r.refuse("debezium.format."+part, fmt.Sprintf("%q with debezium.sink.type=redis: the redis sink writes text and fails at the first record of bytes (use json or simplestring)", f))
		}
	}
	if strings.TrimSpace(c.other["debezium.format.header"]) == "jsonbytearray" && strings.TrimSpace(c.other[redisSink+"message.format"]) == "extended" {
		r.refuse("debezium.format.header", `"jsonbytearray" with debezium.sink.redis.message.format=extended: the redis sink writes headers as text and fails at the first record with a header (use json)`)
	}
}
