package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/rawconn"
)

// Target is where the relays publish and the bench reads the events back:
// Kafka (the default), or another broker a relay can publish to.
type Target interface {
	// Name names it in the report: "kafka", "nats-jetstream".
	Name() string
	// Prepare makes a run's destinations ready to be published to and
	// read from: the events' topic first, then the run's dead-letter
	// topic.
	Prepare(ctx context.Context, topic, deadLetters string) error
	// Consume reads topic from its start and hands each event's id, the
	// partition it came from (0 where there are none) and when it
	// arrived to fn, until stop is called.
	Consume(topic string, fn func(id string, partition int32, at time.Time)) (stop func(), err error)
	// Partitions is how many partitions a prepared topic has: the
	// warm-up waits for an event on each.
	Partitions() int
	// Relay gives `pgoutbox run`'s flags to publish to it, and the
	// environment that carries what must not show on a command line (a
	// URL with a password, which ps shows to every user).
	Relay() (args, env []string)
}

// Kafka is a Kafka cluster as a Target.
type Kafka struct{ Brokers []string }

func (k Kafka) Name() string    { return "kafka" }
func (k Kafka) Partitions() int { return topicPartitions }
func (k Kafka) Relay() (args, env []string) {
	return []string{"--kafka-brokers", strings.Join(k.Brokers, ",")}, nil
}

// topicPartitions is how many partitions the bench's topics have.
const topicPartitions = 3

// Prepare creates topic with topicPartitions partitions unless it exists;
// the dead-letter topic is created on first use.
func (k Kafka) Prepare(ctx context.Context, topic, _ string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).CreateTopic(ctx, topicPartitions, -1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// Consume reads topic as a read_committed consumer, each event stamped
// with the time its fetch returned.
func (k Kafka) Consume(topic string, fn func(id string, partition int32, at time.Time)) (func(), error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.Brokers...),
		// The load generator shares the machine with what it measures:
		// see package rawconn.
		kgo.Dialer(rawconn.Dial(&net.Dialer{Timeout: 10 * time.Second})),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.FetchMaxWait(time.Second),
		// What exactly-once promises: a read_committed consumer sees
		// each event once, when its Kafka transaction commits. For a
		// relay that does not use transactions it changes nothing.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			now := time.Now()
			fetches.EachRecord(func(r *kgo.Record) {
				if id := eventID(r.Headers, r.Value); id != "" {
					fn(id, r.Partition, now)
				}
			})
		}
	}()
	return func() {
		cancel()
		<-done
		cl.Close()
	}, nil
}

var idField = []byte(`"id":"`)

// eventID is the event id of a message: the ce_id (Kafka), ce-id (NATS)
// or cloudEvents:id (AMQP) header of a binary CloudEvent, the id header of
// Debezium's outbox router (a JSON string, in its schema envelope by
// default, when Debezium Server's header format is json), else the first
// "id" of a structured CloudEvent, which comes before its data.
func eventID(headers []kgo.RecordHeader, value []byte) string {
	for _, h := range headers {
		switch h.Key {
		case "ce_id", "ce-id", "cloudEvents:id", "id":
			v := h.Value
			if bytes.HasPrefix(v, []byte("{")) {
				var env struct{ Payload string }
				if json.Unmarshal(v, &env) == nil {
					return env.Payload
				}
			}
			return strings.Trim(string(v), `"`)
		}
	}
	i := bytes.Index(value, idField)
	if i < 0 {
		return ""
	}
	v := value[i+len(idField):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return ""
	}
	return string(v[:j])
}
