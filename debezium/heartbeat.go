package debezium

import (
	"regexp"
	"strconv"
	"strings"
)

// Debezium's heartbeat records: with heartbeat.interval.ms above 0 its
// streaming writes one every interval to the heartbeat topic,
// topic.heartbeat.name when given, else
// <topic.heartbeat.prefix><topic.delimiter><topic.prefix>
// (AbstractTopicNamingStrategy.heartbeatTopic). pgoutbox writes one per
// heartbeat it reads back from the WAL (--heartbeat-topic). Debezium
// Server's sinks deliver them as any record, to the destination of the
// topic's name; only Redis skips them by default, by the stream's name.

// debeziumTopicName is the names Debezium's topic options accept
// (CommonConnectorConfig.TOPIC_NAME_PATTERN).
var debeziumTopicName = regexp.MustCompile(`^[a-zA-Z0-9_.\-]+$`)

// heartbeatTopic reads the heartbeat topic's options and, with the
// heartbeat on, sets --heartbeat-topic.
func (c config) heartbeatTopic(r *reading) {
	for _, k := range []string{"topic.heartbeat.prefix", "topic.heartbeat.name"} {
		if v, ok := c.connector[k]; ok && v != "" && !debeziumTopicName.MatchString(v) {
			r.refuse(r.src(k), strconv.Quote(v)+" has invalid format (only the underscore, hyphen, dot and alphanumeric characters are allowed), as Debezium refuses it")
		}
	}
	if c.server && strings.TrimSpace(c.other["debezium.sink.type"]) == "redis" {
		c.redisSkip(r)
	}
	ms, err := strconv.Atoi(c.connector["heartbeat.interval.ms"])
	if err != nil || ms <= 0 {
		return
	}
	topic := c.connector["topic.heartbeat.name"]
	if topic == "" {
		prefix := c.connector["topic.prefix"]
		if prefix == "" {
			prefix = c.connector["database.server.name"]
		}
		if prefix == "" {
			prefix = "pgoutbox" // --topic-prefix's default
		}
		hp, ok := c.connector["topic.heartbeat.prefix"]
		if !ok {
			hp = "__debezium-heartbeat"
		}
		delim, ok := c.connector["topic.delimiter"]
		if !ok {
			delim = "."
		}
		topic = hp + delim + prefix
	}
	r.set("heartbeat-topic", topic)
}

// redisSkip sets what Debezium Server's Redis sink drops by default
// (skip.heartbeat.messages): every record whose stream, after the
// transforms, starts with topic.heartbeat.prefix as written, heartbeats
// or not; the sink acknowledges them unwritten (--redis-skip-prefix). Its
// boolean is read as Debezium's Configuration reads one: only "false"
// turns it off.
func (c config) redisSkip(r *reading) {
	if strings.ToLower(strings.TrimSpace(c.other[redisSink+"skip.heartbeat.messages"])) == "false" {
		return
	}
	hp, ok := c.connector["topic.heartbeat.prefix"]
	if !ok {
		hp = "__debezium-heartbeat"
	}
	if hp == "" {
		// Every stream starts with it: Debezium Server would drop every
		// record.
		r.refuse(r.src("topic.heartbeat.prefix"), `"" with the Redis sink's skip.heartbeat.messages (true by default): Debezium Server drops every record whose stream starts with it, every record; set skip.heartbeat.messages=false or a prefix`)
		return
	}
	r.set("redis-skip-prefix", hp)
}
