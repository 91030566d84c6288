// Package kafkatest gives tests a Kafka broker: Apache Kafka itself, started
// from its jars (Shared for the package's broker, Start for a test's own,
// apache.go; StartCluster for a cluster of three brokers of a test's own,
// cluster.go), for every test about Kafka's behaviour; franz-go's kfake
// in-process (New), for tests about PostgreSQL's behaviour and those that
// need kfake's fault hooks; or the devbroker command as a separate process
// (StartDevbroker). Setting PGOUTBOX_TEST_KAFKA_BROKERS to a comma-separated
// list of host:port points New and Shared at a Kafka of your own instead.
package kafkatest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokersEnv names the environment variable that points New at a real Kafka.
const BrokersEnv = "PGOUTBOX_TEST_KAFKA_BROKERS"

// Cluster is a broker for one test.
type Cluster struct {
	// Brokers are the seed addresses, host:port.
	Brokers []string
	// Fake is the in-process cluster, for fault injection (ControlKey,
	// Fault, RemoveNode...). It is nil when BrokersEnv points at a real
	// Kafka; tests that need it skip then.
	Fake *kfake.Cluster
}

// New returns a broker that is closed when the test ends: an in-process kfake
// cluster (kfake's default of three brokers) that creates topics on first use
// with three partitions, unless BrokersEnv is set, in which case opts are
// ignored and the real Kafka is used. opts come after the defaults, so they
// can override them (kfake.NumBrokers(1), kfake.DefaultNumPartitions(1)).
func New(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	if env := os.Getenv(BrokersEnv); env != "" {
		brokers := splitBrokers(env)
		if len(brokers) == 0 {
			t.Fatalf("kafkatest: %s=%q names no broker", BrokersEnv, env)
		}
		return &Cluster{Brokers: brokers}
	}
	return InProcess(t, opts...)
}

// InProcess is New without BrokersEnv: always the in-process cluster, for
// tests that need its fault hooks (ControlKey, ListenFn...).
func InProcess(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	all := append([]kfake.Opt{
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(3),
	}, opts...)
	fake, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("kafkatest: starting kfake: %v", err)
	}
	t.Cleanup(fake.Close)
	return &Cluster{Brokers: fake.ListenAddrs(), Fake: fake}
}

func splitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// consumerOpts are the options of every consumer made here.
func consumerOpts(brokers, topics []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Tests often start consuming before the topic exists; the
		// default 5 s minimum metadata age would delay noticing it.
		kgo.MetadataMinAge(100 * time.Millisecond),
		// What a downstream consumer sees: aborted transactional records
		// are not delivered. It changes nothing for plain producers.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
}

// NewConsumer returns a client consuming topics from their start, without a
// consumer group, closed when the test ends.
func NewConsumer(t testing.TB, brokers []string, topics ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(consumerOpts(brokers, topics)...)
	if err != nil {
		t.Fatalf("kafkatest: creating consumer: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Consume reads topics from their start until at least n records arrived and
// returns all it read, in the order polled (ordered within a partition only).
// It fails the test, saying how many arrived, if fewer than n did within
// timeout. Like t.Fatal, call it from the test's goroutine.
func Consume(t testing.TB, brokers []string, topics []string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(consumerOpts(brokers, topics)...)
	if err != nil {
		t.Fatalf("kafkatest: creating consumer: %v", err)
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		recs    []*kgo.Record
		lastErr error
	)
	for len(recs) < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			// kgo retries what is retriable; what reaches here is
			// worth showing if the records never come.
			if !errors.Is(err, context.DeadlineExceeded) {
				lastErr = err
				t.Logf("kafkatest: fetching %s[%d]: %v", topic, partition, err)
			}
		})
		recs = append(recs, fetches.Records()...)
	}
	if len(recs) < n {
		msg := ""
		if lastErr != nil {
			msg = "; last fetch error: " + lastErr.Error()
		}
		t.Fatalf("kafkatest: %d of %d records arrived from %v within %v%s", len(recs), n, topics, timeout, msg)
	}
	return recs
}
