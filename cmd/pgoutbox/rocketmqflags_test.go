package main

import (
	"flag"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

// A topic RocketMQ refuses for every event is refused at start, unless a
// transform may rename it.
func TestRocketMQTopics(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  relay.Config
		ok   bool
	}{
		{"default template", relay.Config{}, false},
		{"template with a dot", relay.Config{Router: router.Config{Topic: "events.{aggregatetype}"}}, false},
		{"template", relay.Config{Router: router.Config{Topic: "outbox_event_{aggregatetype}"}}, true},
		{"dot only in a placeholder", relay.Config{Router: router.Config{Topic: "{aggregatetype}"}}, true},
		{"Debezium's default replacement", relay.Config{Router: router.Config{RouteReplacement: "outbox.event.${routedByValue}"}}, false},
		{"replacement", relay.Config{Router: router.Config{RouteReplacement: "outbox_$1"}}, true},
		{"change events", relay.Config{Encoder: schema.EncoderConfig{Format: schema.Debezium}}, false},
		{"the router only", relay.Config{Transforms: transform.Config{Props: map[string]string{"transforms": "outbox", "transforms.outbox.type": transform.RouterClass}}}, false},
		{"renamed by a transform", relay.Config{Transforms: transform.Config{Props: map[string]string{"transforms": "r"}}}, true},
	} {
		if err := rocketmqTopics(c.cfg); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// Debezium Server's RocketMQ sink: its keys become the --rocketmq-*
// flags; the ACL's keys only with producer.acl.enabled, which without
// them is refused as Debezium Server refuses it; a key format in bytes is
// refused; the secret key is not in the warning.
func TestDebeziumServerRocketMQ(t *testing.T) {
	base := `
debezium.sink.type=rocketmq
debezium.sink.rocketmq.producer.name.srv.addr=ns1:9876;ns2:9876
debezium.sink.rocketmq.producer.group=outbox_producers
debezium.sink.rocketmq.producer.max.message.size=1048576
debezium.sink.rocketmq.producer.send.msg.timeout=5000
debezium.sink.rocketmq.producer.access.key=ak
debezium.sink.rocketmq.producer.secret.key=sk-s3cr3t
debezium.sink.rocketmq.producer.retry.times=4
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.table.include.list=public.outbox
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.route.topic.replacement=outbox_${routedByValue}
`
	load := func(text string) (*flag.FlagSet, string, error) { return loadServerFile(t, text) }
	fs, warn, err := load(base)
	if err != nil {
		t.Fatal(err)
	}
	for flagName, want := range map[string]string{
		"sink": "rocketmq", "rocketmq-name-server": "ns1:9876;ns2:9876", "rocketmq-group": "outbox_producers",
		"rocketmq-max-message-bytes": "1048576", "rocketmq-send-timeout": "5s",
		"rocketmq-access-key": "", "rocketmq-secret-key": "", // without acl.enabled, as Debezium Server
	} {
		if got := flagValue(fs, flagName); got != want {
			t.Errorf("--%s = %q, want %q", flagName, got, want)
		}
	}
	if !strings.Contains(warn, "debezium.sink.rocketmq.producer.retry.times") || strings.Contains(warn, "s3cr3t") {
		t.Errorf("warning:\n%s\nwant retry.times named, no secret", warn)
	}
	fs, _, err = load(base + "debezium.sink.rocketmq.producer.acl.enabled=true\n")
	if err != nil {
		t.Fatal(err)
	}
	if flagValue(fs, "rocketmq-access-key") != "ak" || flagValue(fs, "rocketmq-secret-key") != "sk-s3cr3t" {
		t.Errorf("acl.enabled: --rocketmq-access-key %q, --rocketmq-secret-key set %v", flagValue(fs, "rocketmq-access-key"), flagValue(fs, "rocketmq-secret-key") != "")
	}
	for extra, want := range map[string]string{
		"debezium.sink.rocketmq.producer.acl.enabled=true\ndebezium.sink.rocketmq.producer.secret.key=\n": "without producer.access.key and producer.secret.key",
		"debezium.sink.rocketmq.producer.acl.enabled=yes\n":                                               "want true or false",
		"debezium.format.key=binary\n":                                                                    "picks the queue by the key's text",
		"debezium.format.header=jsonbytearray\n":                                                          "headers as text properties",
		"debezium.sink.rocketmq.producer.send.msg.timeout=0\n":                                            "positive number of milliseconds",
	} {
		text := strings.Replace(base, "debezium.sink.rocketmq.producer.secret.key=sk-s3cr3t\n", "", strings.Count(extra, "secret.key"))
		if _, _, err := load(text + extra); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", strings.TrimSpace(extra), err, want)
		}
	}
}
