package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/pgoutbox/pgoutbox/pubsub"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/sns"
	"github.com/pgoutbox/pgoutbox/transform"
)

// heartbeatRecords checks --heartbeat-topic against the mode: the records
// come from the heartbeats the WAL carries. Every sink takes them, as
// Debezium Server's sinks deliver them as any record.
func heartbeatRecords(cfg *relay.Config, log *slog.Logger) error {
	if cfg.HeartbeatTopic == "" {
		return nil
	}
	switch {
	case cfg.Replication.HeartbeatInterval < 0:
		return errors.New("--heartbeat-topic needs the heartbeat: --heartbeat-interval is negative")
	case cfg.Mode == relay.ModePoll:
		return errors.New("--heartbeat-topic (heartbeat.interval.ms above 0) needs the WAL, whose heartbeats give the records: run with --mode wal or auto")
	}
	log.Debug("heartbeat records", "heartbeat_topic", cfg.HeartbeatTopic)
	return nil
}

// ownTopics refuses a heartbeat or transaction topic the sink cannot
// publish to, whose first record Debezium Server's sink fails at, unless
// a transform after the router may rename it. snsPrefix is the SNS sink's
// topic ARN prefix.
func ownTopics(cfg relay.Config, sink, snsPrefix string) error {
	problem := ownTopicProblem(sink, snsPrefix)
	if problem == nil {
		return nil
	}
	if ch, err := transform.New(cfg.Transforms); err != nil || ch != nil {
		return nil
	}
	for _, t := range []struct{ name, what, option string }{
		{cfg.HeartbeatTopic, "heartbeat", "topic.heartbeat.name, or topic.heartbeat.prefix and topic.delimiter (--heartbeat-topic)"},
		{cfg.TransactionTopic, "transaction", "topic.delimiter and topic.transaction (--transaction-topic)"},
	} {
		if t.name == "" {
			continue
		}
		if why := problem(t.name); why != "" {
			return fmt.Errorf("--sink %s: the %s topic %q: %s (Debezium Server's sink fails at the first %s record); name another with %s",
				sink, t.what, t.name, why, t.what, t.option)
		}
	}
	return nil
}

// ownTopicProblem says why sink refuses a destination's name; nil for a
// sink that takes any name the relay makes.
func ownTopicProblem(sink, snsPrefix string) func(string) string {
	switch sink {
	case sinkRocketMQ:
		return func(name string) string {
			if strings.Contains(name, ".") {
				return "RocketMQ's topic names take no '.'"
			}
			return ""
		}
	case sinkPubSub:
		return pubsub.TopicProblem
	case sinkSNS:
		if snsPrefix != "" {
			return func(name string) string { return sns.ARNProblem(snsPrefix + name) }
		}
	}
	return nil
}
