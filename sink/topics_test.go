package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// A topic takes the first listed group that includes it and does not
// exclude it, else the default group; patterns match whole names.
func TestTopicCreationGroup(t *testing.T) {
	tc, err := ParseTopicCreation(`{"groups": [
		{"name": "orders", "include": ["shop\\.orders.*", "legacy"], "exclude": [".*\\.dlq"], "partitions": 2, "replication_factor": 1},
		{"name": "dlq", "include": [".*\\.dlq"], "partitions": 1, "replication_factor": 1},
		{"name": "empty", "partitions": 9, "replication_factor": 1}],
		"default": {"partitions": 6, "replication_factor": -1}}`)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{
		"shop.orders":        "orders",
		"shop.orders.v2":     "orders",
		"legacy":             "orders",
		"legacy2":            "default", // matched whole
		"x.shop.orders":      "default",
		"shop.orders.dlq":    "dlq", // excluded from orders
		"shop.customers":     "default",
		"shop.customers.dlq": "dlq",
	} {
		if got := tc.Group(topic).Name; got != want {
			t.Errorf("%s: group %s, want %s", topic, got, want)
		}
	}
	for _, bad := range []string{
		`{"default": {"partitions": 0, "replication_factor": 1}}`,
		`{"default": {"partitions": 1, "replication_factor": -2}}`,
		`{"groups": [{"name": "a", "include": ["("], "partitions": 1, "replication_factor": 1}], "default": {"partitions": 1, "replication_factor": 1}}`,
		`{"default": {"partitions": 1, "replication_factor": 1, "bogus": 1}}`,
	} {
		if _, err := ParseTopicCreation(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// With topic creation, a missing topic is created with its group's
// settings before the first record to it is produced; a topic that
// exists is left as it is; a topic that cannot be created fails the
// record's Produce, and nothing is sent.
func TestTopicCreatedBeforeProduce(t *testing.T) {
	b := kafkatest.Shared(t)
	base := fmt.Sprintf("tc%d", time.Now().UnixNano())
	existing := base + ".existing"
	createTopic(t, b.Brokers, existing, nil)
	tc, err := ParseTopicCreation(fmt.Sprintf(`{"groups": [
		{"name": "orders", "include": [%q], "partitions": 2, "replication_factor": 1, "configs": {"cleanup.policy": "compact"}},
		{"name": "broken", "include": [%q], "partitions": 1, "replication_factor": 1, "configs": {"cleanup.policy": "bogus"}}],
		"default": {"partitions": 5, "replication_factor": 1, "configs": {"retention.ms": "604800000"}}}`, `.*\.orders`, `.*\.broken`))
	if err != nil {
		t.Fatal(err)
	}
	k, err := New(Config{Brokers: b.Brokers, CreateTopics: true, TopicCreation: tc}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	for _, topic := range []string{base + ".orders", base + ".other", existing} {
		acked := make(chan error, 1)
		if err := k.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}, func(_ *kgo.Record, err error) { acked <- err }); err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		if err := <-acked; err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
	}
	details, err := adm.ListTopics(ctx, base+".orders", base+".other", existing)
	if err != nil {
		t.Fatal(err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, base+".orders", base+".other", existing)
	if err != nil {
		t.Fatal(err)
	}
	set := func(topic, key string) string {
		for _, rc := range configs {
			if rc.Name != topic {
				continue
			}
			for _, c := range rc.Configs {
				if c.Key == key && c.Source == 1 && c.Value != nil { // DYNAMIC_TOPIC_CONFIG: set on the topic
					return *c.Value
				}
			}
		}
		return ""
	}
	for _, w := range []struct {
		topic      string
		partitions int
		key, value string
	}{
		{base + ".orders", 2, "cleanup.policy", "compact"},
		{base + ".orders", 2, "retention.ms", ""}, // the default group's configs are not a group's
		{base + ".other", 5, "retention.ms", "604800000"},
		{existing, 1, "retention.ms", ""},
		{existing, 1, "cleanup.policy", ""},
	} {
		if n := len(details[w.topic].Partitions); n != w.partitions {
			t.Errorf("%s: %d partitions, want %d", w.topic, n, w.partitions)
		}
		if got := set(w.topic, w.key); got != w.value {
			t.Errorf("%s: %s=%q, want %q", w.topic, w.key, got, w.value)
		}
	}

	// An invalid config: the broker refuses the creation, and the record
	// is refused before it reaches the client.
	broken := base + ".broken"
	err = k.Produce(ctx, &kgo.Record{Topic: broken, Value: []byte("v")}, func(*kgo.Record, error) { t.Error("promise called for a refused record") })
	var ce *TopicCreationError
	if !errors.As(err, &ce) || ce.Topic != broken || ce.Group != "broken" {
		t.Fatalf("creating %s: %v", broken, err)
	}
	if d, err := adm.ListTopics(ctx, broken); err != nil || d[broken].Err == nil {
		t.Errorf("%s exists after a failed creation: %v", broken, err)
	}
}
