package debezium

import (
	"strings"
	"testing"
)

// heartbeat.interval.ms above 0 names the heartbeat topic as Debezium's
// topic naming does; 0 or unset names none; the topic options are
// checked as Debezium checks them; under Debezium Server every sink takes
// them, and Redis's skip.heartbeat.messages (true by default) drops the
// records of streams of topic.heartbeat.prefix in the sink.
func TestHeartbeatTopicOptions(t *testing.T) {
	const pg = `"connector.class": "io.debezium.connector.postgresql.PostgresConnector", `
	for _, tt := range []struct {
		name, conf    string
		topic         string
		hasTopic      bool
		refusedSubstr string
		skip          string // --redis-skip-prefix
	}{
		{name: "default", conf: `{` + pg + `"topic.prefix": "shop", "heartbeat.interval.ms": "5000"}`,
			topic: "__debezium-heartbeat.shop", hasTopic: true},
		{name: "off", conf: `{` + pg + `"topic.prefix": "shop", "heartbeat.interval.ms": "0"}`},
		{name: "unset", conf: `{` + pg + `"topic.prefix": "shop", "topic.heartbeat.prefix": "hb"}`},
		{name: "prefix", conf: `{` + pg + `"topic.prefix": "shop", "heartbeat.interval.ms": "100", "topic.heartbeat.prefix": "hb"}`,
			topic: "hb.shop", hasTopic: true},
		{name: "name", conf: `{` + pg + `"topic.prefix": "shop", "heartbeat.interval.ms": "100", "topic.heartbeat.prefix": "hb", "topic.heartbeat.name": "all-heartbeats"}`,
			topic: "all-heartbeats", hasTopic: true},
		{name: "delimiter", conf: `{` + pg + `"topic.prefix": "shop", "heartbeat.interval.ms": "100", "topic.delimiter": "_"}`,
			topic: "__debezium-heartbeat_shop", hasTopic: true},
		{name: "no prefix", conf: `{` + pg + `"heartbeat.interval.ms": "100"}`,
			topic: "__debezium-heartbeat.pgoutbox", hasTopic: true},
		{name: "server", conf: "debezium.sink.type=kafka\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.source.heartbeat.interval.ms=1000\n",
			topic: "__debezium-heartbeat.shop", hasTopic: true},
		{name: "server nats", conf: "debezium.sink.type=nats-jetstream\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.source.heartbeat.interval.ms=1000\ndebezium.sink.nats-jetstream.url=nats://localhost:4222\n",
			topic: "__debezium-heartbeat.shop", hasTopic: true},
		{name: "server redis", conf: "debezium.sink.type=redis\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.source.heartbeat.interval.ms=1000\ndebezium.sink.redis.address=localhost:6379\n",
			topic: "__debezium-heartbeat.shop", hasTopic: true, skip: "__debezium-heartbeat"},
		{name: "server redis not skipped", conf: "debezium.sink.type=redis\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.source.heartbeat.interval.ms=1000\ndebezium.sink.redis.address=localhost:6379\n" +
			"debezium.sink.redis.skip.heartbeat.messages= FALSE\n",
			topic: "__debezium-heartbeat.shop", hasTopic: true},
		{name: "server redis other value", conf: "debezium.sink.type=redis\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.source.heartbeat.interval.ms=1000\ndebezium.sink.redis.address=localhost:6379\n" +
			"debezium.sink.redis.skip.heartbeat.messages=no\n",
			topic: "__debezium-heartbeat.shop", hasTopic: true, skip: "__debezium-heartbeat"},
		{name: "server redis own prefix", conf: "debezium.sink.type=redis\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.source.heartbeat.interval.ms=1000\ndebezium.sink.redis.address=localhost:6379\n" +
			"debezium.source.topic.heartbeat.prefix=beat\ndebezium.source.topic.heartbeat.name=beats\n",
			topic: "beats", hasTopic: true, skip: "beat"},
		{name: "server redis without heartbeats", conf: "debezium.sink.type=redis\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.sink.redis.address=localhost:6379\n",
			skip: "__debezium-heartbeat"},
		{name: "server redis empty prefix", conf: "debezium.sink.type=redis\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.sink.redis.address=localhost:6379\ndebezium.source.topic.heartbeat.prefix=\n",
			refusedSubstr: "debezium.source.topic.heartbeat.prefix: \"\" with the Redis sink's skip.heartbeat.messages"},
		{name: "bad prefix", conf: `{` + pg + `"heartbeat.interval.ms": "100", "topic.heartbeat.prefix": "heart beat"}`,
			refusedSubstr: "topic.heartbeat.prefix: \"heart beat\" has invalid format"},
		{name: "bad name", conf: `{` + pg + `"topic.heartbeat.name": "a/b"}`,
			refusedSubstr: "topic.heartbeat.name: \"a/b\" has invalid format"},
		{name: "negative", conf: `{` + pg + `"heartbeat.interval.ms": "-1"}`,
			refusedSubstr: "heartbeat.interval.ms: "},
	} {
		tr, ok, err := Read([]byte(tt.conf))
		if !ok {
			t.Fatalf("%s: not read", tt.name)
		}
		if tt.refusedSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.refusedSubstr) {
				t.Errorf("%s: %v, want a refusal naming %q", tt.name, err, tt.refusedSubstr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got, ok := settingOf(tr, "heartbeat-topic"); ok != tt.hasTopic || got != tt.topic {
			t.Errorf("%s: --heartbeat-topic %q (%v), want %q (%v)", tt.name, got, ok, tt.topic, tt.hasTopic)
		}
		if got, _ := settingOf(tr, "redis-skip-prefix"); got != tt.skip {
			t.Errorf("%s: --redis-skip-prefix %q, want %q", tt.name, got, tt.skip)
		}
	}
}
