package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/natsjs"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

// The sinks run can publish to (--sink), by Debezium Server's names.
const (
	sinkKafka = "kafka"
	sinkNATS  = "nats-jetstream"
)

// sinks are the names --sink takes.
var sinks = []string{sinkKafka, sinkNATS, sinkRabbitMQ, sinkRabbitStream, sinkRedis, sinkHTTP, sinkKinesis, sinkSQS, sinkSNS, sinkPubSub, sinkPulsar, sinkRocketMQ}

// natsFlags are the flags of the NATS JetStream sink, each Debezium
// Server's debezium.sink.nats-jetstream.* key of the same name.
type natsFlags struct {
	url, streamName, subjects, storage string
	createStream, sync                 bool
	ackTimeout                         time.Duration
	user, password, jwt, seed          string
	tls                                tlsFiles
}

func (n *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.url, "nats-url", "", "--sink nats-jetstream: the servers, nats://host:port[,...] (required; Debezium Server's url)")
	fs.BoolVar(&n.createStream, "nats-create-stream", false, "--sink nats-jetstream: create --nats-stream-name over --nats-subjects at start when it does not exist (create-stream)")
	fs.StringVar(&n.streamName, "nats-stream-name", natsjs.DefaultStreamName, "--sink nats-jetstream: the stream --nats-create-stream creates (stream-name)")
	fs.StringVar(&n.subjects, "nats-subjects", natsjs.DefaultSubjects, "--sink nats-jetstream: the subjects of the stream --nats-create-stream creates, comma-separated; the dead-letter subject is added (subjects)")
	fs.StringVar(&n.storage, "nats-storage", natsjs.DefaultStorage, "--sink nats-jetstream: the created stream's storage, memory or file; a memory stream loses its messages when the server stops (storage)")
	fs.DurationVar(&n.ackTimeout, "nats-ack-timeout", natsjs.DefaultAckTimeout, "--sink nats-jetstream: how long a message's ack may take (async.timeout.ms)")
	fs.BoolVar(&n.sync, "nats-sync", false, "--sink nats-jetstream: publish one message at a time, each after the last one's ack (async.enabled=false)")
	fs.StringVar(&n.user, "nats-user", "", "--sink nats-jetstream: user name (auth.user)")
	fs.StringVar(&n.password, "nats-password", "", "--sink nats-jetstream: password (auth.password); prefer PGOUTBOX_NATS_PASSWORD")
	fs.StringVar(&n.jwt, "nats-jwt", "", "--sink nats-jetstream: a user JWT (auth.jwt), with --nats-seed")
	fs.StringVar(&n.seed, "nats-seed", "", "--sink nats-jetstream: the user's nkey seed (auth.seed); prefer PGOUTBOX_NATS_SEED")
	n.tls.register(fs, "nats-tls", "the NATS servers")
}

// secrets are the values the logger must mask.
func (n *natsFlags) secrets() []string {
	out := n.tls.secrets()
	for _, s := range []string{n.password, n.seed, n.jwt} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// opener is the NATS JetStream sink these flags describe; deadLetters is
// the dead-letter subject ("" under --on-poison halt), which no stream may
// take unless --dlq-topic named it (dlqNamed). --max-message-bytes
// and --max-buffered-records bound its messages as they bound Kafka's
// records.
func (n *natsFlags) opener(deadLetters string, dlqNamed bool, maxMessageBytes, maxPending int) (*broker.NATS, error) {
	if n.url == "" {
		return nil, errors.New("--nats-url is required with --sink nats-jetstream (or PGOUTBOX_NATS_URL)")
	}
	switch n.storage {
	case "memory", "file":
	default:
		return nil, fmt.Errorf("--nats-storage %q: use memory or file", n.storage)
	}
	t, err := n.tls.config()
	if err != nil {
		return nil, err
	}
	cfg := natsjs.Config{
		URLs: strings.Split(n.url, ","), CreateStream: n.createStream, StreamName: n.streamName,
		Subjects: strings.Split(n.subjects, ","), Storage: n.storage, DeadLetterSubject: deadLetters, DeadLetterSubjectOptional: !dlqNamed,
		JWT: n.jwt, Seed: n.seed, User: n.user, Password: n.password, TLS: t,
		AckTimeout: n.ackTimeout, Sync: n.sync, MaxMessageBytes: maxMessageBytes, MaxPending: maxPending,
	}
	return &broker.NATS{Config: cfg}, nil
}

// natsRecordSubjects are the subjects of the heartbeat and transaction
// records, which the NATS sink checks at start, unless a transform after
// the router may rename them.
func natsRecordSubjects(cfg relay.Config) []string {
	if ch, err := transform.New(cfg.Transforms); err != nil || ch != nil {
		return nil
	}
	var out []string
	for _, t := range []string{cfg.HeartbeatTopic, cfg.TransactionTopic} {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// guarantee is what run's start line says a sink and delivery promise.
func guarantee(sink string, d relay.Delivery) string {
	switch sink {
	case sinkNATS:
		return "at-least-once, deduplicated by event id within the stream's duplicate window"
	case sinkRabbitMQ:
		return rabbitmqGuarantee
	case sinkRabbitStream:
		return rabbitstreamGuarantee
	case sinkHTTP:
		return webhookGuarantee
	case sinkKinesis:
		return kinesisGuarantee
	case sinkSQS:
		return sqsGuarantee
	case sinkSNS:
		return snsGuarantee
	case sinkPulsar:
		return pulsarGuarantee
	case sinkRocketMQ:
		return rocketmqGuarantee
	case sinkPubSub:
		return pubsubGuarantee
	}
	if sink == sinkRedis {
		return redisGuarantee
	}
	return string(d)
}

// natsAvro refuses an avro key or value converter for the NATS sink: its
// framing is made for Kafka (a NATS message has no key, and Apicurio's id
// headers are binary, which NATS header values cannot always carry), and
// Debezium Server, the reference for NATS, has no avro format pgoutbox
// takes either.
func natsAvro(d schema.DebeziumConfig) error {
	for _, p := range []struct {
		part string
		conv schema.Converter
	}{{"key", d.Key}, {"value", d.Value}} {
		if strings.HasSuffix(string(p.conv), string(schema.ConvAvro)) {
			return fmt.Errorf("--sink %s with the avro %s converter (--%s-converter %s, %s.converter): Avro through a schema registry is written for Kafka only "+
				"(a NATS message has no key, and the registry's id headers are binary); use --sink %s, or another %s converter",
				sinkNATS, p.part, p.part, p.conv, p.part, sinkKafka, p.part)
		}
	}
	return nil
}
