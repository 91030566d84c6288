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
// heartbeat it reads back from the WAL (--heartbeat-topic).

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
	ms, err := strconv.Atoi(c.connector["heartbeat.interval.ms"])
	if err != nil || ms <= 0 {
		return
	}
	if c.server {
		if t := strings.TrimSpace(c.other["debezium.sink.type"]); t != "" && t != "kafka" {
			// Debezium Server's other sinks deliver them (Redis skips
			// them unless skip.heartbeat.messages is false); pgoutbox
			// writes them to Kafka only.
			r.warnings = append(r.warnings, r.src("heartbeat.interval.ms")+" above 0: pgoutbox writes Debezium's heartbeat records to Kafka only; with --sink "+t+" its heartbeats write nothing")
			return
		}
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
