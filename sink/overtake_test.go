package sink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// A record the broker refuses lets no later record of its partition reach
// the topic, even when its failure reaches the caller late: franz-go
// fails the refused record's partition at once but calls the promises on
// a goroutine of their own, and the caller learns of the refusal only
// there. Here an earlier promise that blocks holds that goroutine, as a
// busy machine does; the record produced after the refusal must not be
// written.
func TestNoRecordOvertakesARefusal(t *testing.T) {
	b := kafkatest.SharedLocal(t)
	const topic, other = "overtake", "overtake-other"
	createTopic(t, b.Brokers, topic, nil)
	createTopic(t, b.Brokers, other, nil)
	k, err := New(Config{Brokers: b.Brokers}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The topic's limit is learned (1 MB) and cached before it is lowered.
	first := &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("first")}
	if err := k.Produce(ctx, first, func(_ *kgo.Record, err error) {
		if err != nil {
			t.Errorf("first record: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// A promise that blocks holds every later promise back.
	entered, release := make(chan struct{}), make(chan struct{})
	if err := k.Produce(ctx, &kgo.Record{Topic: other, Value: []byte("x")}, func(*kgo.Record, error) {
		close(entered)
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the blocking promise was never called")
	}

	limit := "1000"
	resp, err := kadm.NewClient(rawClient(t, b)).AlterTopicConfigs(ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &limit}}, topic)
	if err == nil {
		for _, r := range resp {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	lowered(ctx, t, b, topic, limit)
	refused := make(chan error, 1)
	big := &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(strings.Repeat("x", 5000))}
	if err := k.Produce(ctx, big, func(_ *kgo.Record, err error) { refused <- err }); err != nil {
		t.Fatalf("the large record, under the limit learned: %v", err)
	}
	// The broker's answer arrives and franz-go fails the partition; its
	// promise waits behind the blocked one.
	time.Sleep(time.Second)

	later := make(chan error, 1)
	err = k.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("later")}, func(_ *kgo.Record, err error) { later <- err })
	if err == nil {
		time.Sleep(time.Second) // time to be written, were it let through
	}
	close(release)
	released = true
	if rerr := <-refused; !Refused(rerr) {
		t.Fatalf("the large record: %v, want a refusal", rerr)
	}
	if err == nil {
		err = <-later
	}
	if err == nil {
		t.Error("the record produced after the refusal was acknowledged")
	}
	var got []string
	for _, r := range readAll(ctx, t, b, topic) {
		got = append(got, string(r.Value))
	}
	if strings.Join(got, ",") != "first" {
		t.Errorf("topic holds %q, want only the first record", got)
	}
}

// readAll reads every record of a one-partition topic.
func readAll(ctx context.Context, t *testing.T, b *kafkatest.Broker, topic string) []*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(rawClient(t, b))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for int64(len(recs)) < end.Offset {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, fs.Records()...)
	}
	return recs
}

// lowered waits until the broker reports the topic's max.message.bytes as
// limit, and a little longer: the change reaches its log after it reaches
// the metadata that describes it.
func lowered(ctx context.Context, t *testing.T, b *kafkatest.Broker, topic, limit string) {
	t.Helper()
	adm := kadm.NewClient(rawClient(t, b))
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if rc, err := rcs.On(topic, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Key == "max.message.bytes" && c.MaybeValue() == limit {
					time.Sleep(500 * time.Millisecond)
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("max.message.bytes of %s never became %s", topic, limit)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
