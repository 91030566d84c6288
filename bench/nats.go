package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NATS is a NATS JetStream server as a Target: each run gets a stream of
// its own, on file storage, over its topic and dead-letter subjects.
type NATS struct{ URL string }

func (n NATS) Name() string    { return "nats-jetstream" }
func (n NATS) Partitions() int { return 1 }
func (n NATS) Relay() (args, env []string) {
	return []string{"--sink", "nats-jetstream"}, []string{"PGOUTBOX_NATS_URL=" + n.URL}
}

// streamOf names the stream of a run's topic.
func streamOf(topic string) string {
	return "BENCH_" + strings.NewReplacer(".", "_", "*", "_", ">", "_").Replace(topic)
}

func (n NATS) connect() (*nats.Conn, jetstream.JetStream, error) {
	// Replies on tokens of their own, which no stream of the bench takes.
	nc, err := nats.Connect(n.URL, nats.CustomInboxPrefix("_INBOX.pgoutbox_bench"))
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// Prepare creates the run's stream, unless it exists.
func (n NATS) Prepare(ctx context.Context, topic, deadLetters string) error {
	nc, js, err := n.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: streamOf(topic), Subjects: []string{topic, deadLetters}, Storage: jetstream.FileStorage})
	if err != nil {
		return fmt.Errorf("nats: stream for %s: %w", topic, err)
	}
	return nil
}

// Consume reads the run's stream from its first message with an ordered
// consumer, each event stamped with the time it was handed over. Stop
// deletes the stream unless it holds dead letters, which say what went
// wrong.
func (n NATS) Consume(topic string, fn func(id string, partition int32, at time.Time)) (func(), error) {
	nc, js, err := n.connect()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, streamOf(topic), jetstream.OrderedConsumerConfig{FilterSubjects: []string{topic}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: consumer of %s: %w", topic, err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		at := time.Now()
		var hs []kgo.RecordHeader
		for _, k := range []string{"ce-id", "id"} {
			if v := m.Headers().Get(k); v != "" {
				hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
			}
		}
		if id := eventID(hs, m.Data()); id != "" {
			fn(id, 0, at)
		}
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: consuming %s: %w", topic, err)
	}
	return func() {
		cc.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s, err := js.Stream(ctx, streamOf(topic)); err == nil {
			info, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
			if err == nil && len(info.State.Subjects) <= 1 && info.State.Subjects[topic] == info.State.Msgs {
				_ = js.DeleteStream(ctx, streamOf(topic))
			}
		}
		nc.Close()
	}, nil
}
