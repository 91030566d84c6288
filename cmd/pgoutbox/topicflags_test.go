package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// --topic-partitions, --topic-replication-factor and --topic-configs make
// one group for every topic; --topic-creation holds groups of its own and
// is not given with them.
func TestTopicFlags(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		none       bool
		partitions int32
		rf         int16
		configs    string
		refused    string
	}{
		{args: nil, none: true},
		{args: []string{"--topic-partitions", "6"}, partitions: 6, rf: -1},
		{args: []string{"--topic-partitions", "6", "--topic-replication-factor", "3", "--topic-configs", "cleanup.policy=compact, retention.ms=604800000"},
			partitions: 6, rf: 3, configs: "cleanup.policy=compact,retention.ms=604800000"},
		{args: []string{"--topic-configs", "cleanup.policy=compact"}, partitions: -1, rf: -1, configs: "cleanup.policy=compact"},
		{args: []string{"--topic-creation", `{"default": {"partitions": 2, "replication_factor": 1}}`}, partitions: 2, rf: 1},
		{args: []string{"--topic-partitions", "0", "--topic-replication-factor", "0", "--topic-configs", "x"}, refused: "want key=value"},
		{args: []string{"--topic-partitions", "-3"}, refused: "partitions -3"},
		{args: []string{"--topic-creation", `{"default": {"partitions": 2, "replication_factor": 1}}`, "--topic-partitions", "3"}, refused: "not both"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f topicFlags
		f.register(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		tc, err := f.topicCreation()
		if tt.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tt.refused) {
				t.Errorf("%v: %v, want a refusal with %q", tt.args, err, tt.refused)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if (tc == nil) != tt.none {
			t.Fatalf("%v: %v", tt.args, tc)
		}
		if tc == nil {
			continue
		}
		d := tc.Default
		var configs []string
		for _, k := range []string{"cleanup.policy", "retention.ms"} {
			if v, ok := d.Configs[k]; ok {
				configs = append(configs, k+"="+v)
			}
		}
		if d.Partitions != tt.partitions || d.ReplicationFactor != tt.rf || strings.Join(configs, ",") != tt.configs || len(d.Configs) != len(configs) {
			t.Errorf("%v: %s", tt.args, tc)
		}
	}
}
