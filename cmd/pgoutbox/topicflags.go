package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/pgoutbox/pgoutbox/sink"
)

// topicFlags say how pgoutbox creates the Kafka topics its records go to
// when they are missing: --topic-creation holds Kafka Connect's
// topic.creation.* groups (a Debezium configuration sets it), the others
// make one group for every topic.
type topicFlags struct {
	creation    string
	partitions  int
	replication int
	configs     string
}

func (t *topicFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.creation, "topic-creation", "", `Kafka: create missing topics with these groups' settings before their first record, as Kafka Connect's topic.creation.* do (JSON: {"groups": [{"name", "include", "exclude", "partitions", "replication_factor", "configs"}], "default": {...}}; a Debezium configuration's topic.creation.* set it)`)
	fs.IntVar(&t.partitions, "topic-partitions", 0, "Kafka: create missing topics with this many partitions before their first record (-1: the broker's default; default: left to the broker's auto-creation)")
	fs.IntVar(&t.replication, "topic-replication-factor", 0, "Kafka: with --topic-partitions or --topic-configs, the replication factor of the topics created (default -1: the broker's default)")
	fs.StringVar(&t.configs, "topic-configs", "", "Kafka: with --topic-partitions, the configs of the topics created, key=value,... (cleanup.policy=compact,retention.ms=604800000)")
}

// topicCreation is what the flags say, nil when they say nothing.
func (t *topicFlags) topicCreation() (*sink.TopicCreation, error) {
	plain := t.partitions != 0 || t.replication != 0 || t.configs != ""
	if t.creation != "" {
		if plain {
			return nil, errors.New("--topic-creation: give it or --topic-partitions, --topic-replication-factor and --topic-configs, not both")
		}
		return sink.ParseTopicCreation(t.creation)
	}
	if !plain {
		return nil, nil
	}
	g := sink.TopicGroup{Partitions: -1, ReplicationFactor: -1}
	if t.partitions != 0 {
		g.Partitions = int32(t.partitions)
	}
	if t.replication != 0 {
		if t.replication > 32767 {
			return nil, fmt.Errorf("--topic-replication-factor %d: too large", t.replication)
		}
		g.ReplicationFactor = int16(t.replication)
	}
	if t.configs != "" {
		g.Configs = map[string]string{}
		for _, kv := range strings.Split(t.configs, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("--topic-configs: %q: want key=value", kv)
			}
			g.Configs[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	tc, err := sink.ParseTopicCreation((&sink.TopicCreation{Default: g}).String())
	if err != nil {
		return nil, fmt.Errorf("--topic-partitions, --topic-replication-factor: %w", err)
	}
	return tc, nil
}
