package debezium

import (
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/sink"
)

// topic.creation.* are read as a Kafka Connect worker reads them for a
// source connector: into --topic-creation, or refused where Connect
// refuses the configuration.
func TestTopicCreationOptions(t *testing.T) {
	const head = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop"`
	type group struct {
		name       string
		partitions int32
		rf         int16
		configs    map[string]string
	}
	for _, tt := range []struct {
		name    string
		conf    string
		none    bool    // no --topic-creation
		groups  []group // the default last
		refused string
		ignored string
	}{
		{name: "none", conf: head + `}`, none: true},
		{name: "debezium example", conf: head + `, "topic.creation.default.replication.factor": 1, "topic.creation.default.partitions": 6,
			"topic.creation.default.cleanup.policy": "compact", "topic.creation.default.compression.type": "lz4",
			"topic.creation.groups": "inventory", "topic.creation.inventory.include": "dbserver1\\.inventory\\..*",
			"topic.creation.inventory.partitions": 3, "topic.creation.inventory.retention.ms": 604800000}`,
			// The group takes the default's replication factor, not its
			// topic configs.
			groups: []group{{"inventory", 3, 1, map[string]string{"retention.ms": "604800000"}},
				{"default", 6, 1, map[string]string{"cleanup.policy": "compact", "compression.type": "lz4"}}}},
		{name: "default listed", conf: head + `, "topic.creation.default.replication.factor": "-1", "topic.creation.default.partitions": " 2 ",
			"topic.creation.groups": "default, a", "topic.creation.a.include": "x.*", "topic.creation.a.replication.factor": 1,
			"topic.creation.default.include": "nothing"}`,
			groups: []group{{"a", 2, 1, nil}, {"default", 2, -1, nil}}},
		{name: "any key turns it on", conf: head + `, "topic.creation.enable": "true"}`,
			refused: "topic.creation.default.partitions: missing"},
		{name: "no replication factor", conf: head + `, "topic.creation.default.partitions": 3}`,
			refused: "topic.creation.default.replication.factor: missing"},
		{name: "zero partitions", conf: head + `, "topic.creation.default.partitions": 0, "topic.creation.default.replication.factor": 1}`,
			refused: "topic.creation.default.partitions: 0"},
		{name: "not a number", conf: head + `, "topic.creation.default.partitions": "six", "topic.creation.default.replication.factor": 1}`,
			refused: "not a number of type INT"},
		{name: "group twice", conf: head + `, "topic.creation.default.partitions": 1, "topic.creation.default.replication.factor": 1, "topic.creation.groups": "a,a"}`,
			refused: "Duplicate alias"},
		{name: "group's bad partitions", conf: head + `, "topic.creation.default.partitions": 1, "topic.creation.default.replication.factor": 1,
			"topic.creation.groups": "a", "topic.creation.a.partitions": -2}`,
			refused: "topic.creation.a.partitions: -2"},
		{name: "server", conf: "debezium.sink.type=kafka\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.creation.default.partitions=6\n", none: true, ignored: "debezium.source.topic.creation.default.partitions (Debezium Server's Kafka sink creates no topics"},
	} {
		tr, ok, err := Read([]byte(tt.conf))
		if !ok {
			t.Fatalf("%s: not read", tt.name)
		}
		if tt.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tt.refused) {
				t.Errorf("%s: %v, want a refusal with %q", tt.name, err, tt.refused)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if tt.ignored != "" && !strings.Contains(strings.Join(tr.Ignored, "\n"), tt.ignored) {
			t.Errorf("%s: ignored %q, want %q", tt.name, tr.Ignored, tt.ignored)
		}
		v, set := settingOf(tr, "topic-creation")
		if set == tt.none {
			t.Fatalf("%s: --topic-creation %q set %v", tt.name, v, set)
		}
		if tt.none {
			continue
		}
		tc, err := sink.ParseTopicCreation(v)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := append(append([]sink.TopicGroup{}, tc.Groups...), tc.Default)
		if len(got) != len(tt.groups) {
			t.Fatalf("%s: groups %s", tt.name, v)
		}
		for i, w := range tt.groups {
			g := got[i]
			if g.Name != w.name || g.Partitions != w.partitions || g.ReplicationFactor != w.rf || len(g.Configs) != len(w.configs) {
				t.Errorf("%s: group %d: %s", tt.name, i, v)
			}
			for k, wv := range w.configs {
				if g.Configs[k] != wv {
					t.Errorf("%s: group %s: %s=%q, want %q", tt.name, g.Name, k, g.Configs[k], wv)
				}
			}
			if g.Name == "default" && (len(g.Include) > 0 || len(g.Exclude) > 0) {
				t.Errorf("%s: the default group keeps patterns: %s", tt.name, v)
			}
		}
	}
}
