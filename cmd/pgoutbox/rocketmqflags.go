package main

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/rocketmq"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

// sinkRocketMQ is Debezium Server's name of the Apache RocketMQ sink.
const sinkRocketMQ = "rocketmq"

// rocketmqFlags are the flags of the RocketMQ sink, each Debezium Server's
// debezium.sink.rocketmq.producer.* key of the same name.
type rocketmqFlags struct {
	nameServers, group   string
	accessKey, secretKey string
	maxMessageBytes      int
	sendTimeout          time.Duration
}

func (f *rocketmqFlags) register(fs *flag.FlagSet) {
	const p = "--sink rocketmq: "
	fs.StringVar(&f.nameServers, "rocketmq-name-server", "", p+"the name servers, host:9876, several separated by ';' (producer.name.srv.addr)")
	fs.StringVar(&f.group, "rocketmq-group", rocketmq.DefaultProducerGroup, p+"the producer group (producer.group)")
	fs.StringVar(&f.accessKey, "rocketmq-access-key", "", p+"sign requests with this access key, for a broker with ACL (producer.acl.enabled, producer.access.key)")
	fs.StringVar(&f.secretKey, "rocketmq-secret-key", "", p+"the access key's secret (producer.secret.key); prefer PGOUTBOX_ROCKETMQ_SECRET_KEY")
	fs.IntVar(&f.maxMessageBytes, "rocketmq-max-message-bytes", rocketmq.DefaultMaxMessageBytes, p+"the largest message, its body and properties: a larger event is dead-lettered (producer.max.message.size; the broker refuses a batch larger than its maxMessageSize)")
	fs.DurationVar(&f.sendTimeout, "rocketmq-send-timeout", rocketmq.DefaultSendTimeout, p+"how long a request may wait for the broker's answer (producer.send.msg.timeout)")
}

// secrets are the values the logger must mask.
func (f *rocketmqFlags) secrets() []string {
	if f.secretKey != "" {
		return []string{f.secretKey}
	}
	return nil
}

// opener is the RocketMQ sink these flags describe; deadLetters is the
// dead-letter topic ("" under --on-poison halt), maxPending
// --max-buffered-records.
func (f *rocketmqFlags) opener(deadLetters string, maxPending int) (*broker.RocketMQ, error) {
	ns, err := rocketmq.ParseNameServers(f.nameServers)
	if err != nil {
		return nil, err
	}
	cfg := rocketmq.Config{NameServers: ns, ProducerGroup: f.group, AccessKey: f.accessKey, SecretKey: f.secretKey,
		MaxMessageBytes: f.maxMessageBytes, SendTimeout: f.sendTimeout, MaxPending: maxPending, DeadLetterTopic: deadLetters}
	return &broker.RocketMQ{Config: cfg}, nil
}

// rocketmqGuarantee is what run's start line says of the RocketMQ sink.
const rocketmqGuarantee = "at-least-once, each batch stored by its broker before the next, a key's events in order in its queue"

// rocketmqTopics refuses a topic RocketMQ would refuse for every event: a
// topic template whose own text has a '.', such as the default
// outbox.event.{aggregatetype} or the change events' <prefix>.<schema>.<table>,
// with no transform after it that could rename it. Debezium Server's sink
// fails at the first record there.
func rocketmqTopics(cfg relay.Config) error {
	if ch, err := transform.New(cfg.Transforms); err != nil || ch != nil {
		return nil // a transform after the router may rename it
	}
	if cfg.Encoder.Format == schema.Debezium {
		return errors.New("--sink rocketmq with the change events (--format debezium): their topics are <topic.prefix>.<schema>.<table>, and RocketMQ's topic names take no '.'; rename them with a RegexRouter (--transforms, or a Debezium configuration's transforms)")
	}
	text, hint := cfg.Router.Topic, "--topic outbox_event_{aggregatetype}"
	if text == "" {
		text = router.DefaultTopic
	}
	if cfg.Router.RouteReplacement != "" {
		text, hint = cfg.Router.RouteReplacement, "route.topic.replacement=outbox_event_${routedByValue}"
	}
	literal := placeholder.ReplaceAllString(text, "")
	if strings.Contains(literal, ".") {
		return fmt.Errorf("--sink rocketmq: the topic %q has a '.', which RocketMQ's topic names do not take (Debezium Server's sink fails at the first record): set %s, or rename the topics with a RegexRouter", text, hint)
	}
	return nil
}

// placeholder matches what a topic template or a route replacement puts a
// value in: {column}, ${name}, $1.
var placeholder = regexp.MustCompile(`\$\{[^}]*\}|\{[^}]*\}|\$[0-9]+`)
