package kafkatest

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func produce(t *testing.T, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	// Apache Kafka answers a topic it is creating with LEADER_NOT_AVAILABLE
	// at first; kgo asks again after MetadataMinAge (default 5 s). A broker
	// just started on a busy machine may not know the new topic for longer
	// than kgo's four lookups (UNKNOWN_TOPIC_OR_PARTITION in a CI run):
	// the context bounds the wait instead.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation(), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.UnknownTopicRetries(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func records(topic string, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		// One key keeps them in one partition, so their order is known.
		recs[i] = &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(strconv.Itoa(i))}
	}
	return recs
}

func checkValues(t *testing.T, got []*kgo.Record, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if string(r.Value) != strconv.Itoa(i) {
			t.Fatalf("record %d has value %q, want %d", i, r.Value, i)
		}
	}
}

// uniqueTopic keeps reruns against one real Kafka from seeing each other's
// records.
func uniqueTopic(base string) string {
	return base + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

func TestNewProduceConsume(t *testing.T) {
	c := New(t)
	topic := uniqueTopic("orders")
	produce(t, c.Brokers, records(topic, 10)...)
	checkValues(t, Consume(t, c.Brokers, []string{topic}, 10, 20*time.Second), 10)
}

func TestNewDefaultsAndOverrides(t *testing.T) {
	if New(t).Fake == nil {
		t.Skipf("%s points at a real Kafka; its partition defaults are its own", BrokersEnv)
	}
	for _, tc := range []struct {
		opts []kfake.Opt
		want int
	}{
		{nil, 3},
		{[]kfake.Opt{kfake.DefaultNumPartitions(1)}, 1},
	} {
		c := New(t, tc.opts...)
		produce(t, c.Brokers, &kgo.Record{Topic: "auto", Value: []byte("x")})
		cl := NewConsumer(t, c.Brokers)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		topics, err := kadm.NewClient(cl).ListTopics(ctx, "auto")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(topics["auto"].Partitions); got != tc.want {
			t.Errorf("auto-created topic has %d partitions, want %d", got, tc.want)
		}
	}
}

func TestNewConsumerReadsFromStart(t *testing.T) {
	c := New(t)
	topic := uniqueTopic("early")
	produce(t, c.Brokers, records(topic, 3)...)
	cl := NewConsumer(t, c.Brokers, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < 3 && ctx.Err() == nil {
		got = append(got, cl.PollFetches(ctx).Records()...)
	}
	checkValues(t, got, 3)
}

// fatalTB records a Fatalf instead of failing the real test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestConsumeTimeoutSaysHowManyArrived(t *testing.T) {
	c := New(t)
	topic := uniqueTopic("short")
	produce(t, c.Brokers, records(topic, 2)...)
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Consume(tb, c.Brokers, []string{topic}, 5, 2*time.Second)
	}()
	<-done
	if !strings.Contains(tb.msg, "2 of 5 records") {
		t.Fatalf("Consume failure message %q does not say 2 of 5 records arrived", tb.msg)
	}
}

func TestDevbrokerKeepsAckedRecordsAcrossSIGKILL(t *testing.T) {
	d := StartDevbroker(t, t.TempDir())
	brokers := d.Brokers
	produce(t, d.Brokers, records("kept", 100)...)

	d.Kill()
	d.Start()
	if d.Brokers[0] != brokers[0] {
		t.Fatalf("restarted on %s, want the same address %s", d.Brokers[0], brokers[0])
	}
	produce(t, d.Brokers, records("other", 1)...) // still writable
	checkValues(t, Consume(t, d.Brokers, []string{"kept"}, 100, 20*time.Second), 100)
}

func TestDevbrokerStopStart(t *testing.T) {
	d := StartDevbroker(t, t.TempDir())
	produce(t, d.Brokers, records("kept", 5)...)
	d.Stop()
	d.Start()
	checkValues(t, Consume(t, d.Brokers, []string{"kept"}, 5, 20*time.Second), 5)
}

func TestDevbrokerInMemory(t *testing.T) {
	d := StartDevbroker(t, "")
	produce(t, d.Brokers, records("mem", 1)...)
	d.Kill()
	d.Start()
	// Without a data directory the broker starts empty.
	produce(t, d.Brokers, &kgo.Record{Topic: "mem", Key: []byte("k"), Value: []byte("0")})
	checkValues(t, Consume(t, d.Brokers, []string{"mem"}, 1, 20*time.Second), 1)
}
