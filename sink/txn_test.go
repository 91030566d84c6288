package sink

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// A producer whose transactional id a newer producer initialised is
// fenced by Apache Kafka: its open transaction fails with ErrFenced, and
// nothing it wrote reaches a read_committed reader, while the newer
// producer's transaction does. This is the backstop behind the pipeline's
// lease: a relay that produced while another took the pipeline over.
func TestFencedByNewerProducer(t *testing.T) {
	b := kafkatest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := "fence-" + time.Now().Format("150405.000000")
	cfg := Config{Brokers: b.Brokers, CreateTopics: true, TransactionalID: topic + ".txn", TransactionTimeout: 30 * time.Second}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	newProducer := func() *Kafka {
		t.Helper()
		k, err := New(cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		if err := k.Fence(ctx); err != nil {
			t.Fatalf("fence: %v", err)
		}
		if err := k.Begin(); err != nil {
			t.Fatal(err)
		}
		return k
	}
	produce := func(k *Kafka, value string) error {
		t.Helper()
		done := make(chan error, 1)
		if err := k.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(value)}, func(_ *kgo.Record, err error) { done <- err }); err != nil {
			return err
		}
		return <-done
	}

	stale := newProducer()
	if err := produce(stale, "stale-before"); err != nil {
		t.Fatalf("the first producer's record: %v", err)
	}
	fresh := newProducer() // initialises the id again: the stale one is fenced
	if err := produce(fresh, "fresh"); err != nil {
		t.Fatalf("the newer producer's record: %v", err)
	}

	err := stale.Commit(ctx, func() error { return nil })
	if !Fenced(err) {
		t.Fatalf("the stale producer's commit: %v, want ErrFenced", err)
	}
	if err := fresh.Commit(ctx, func() error { return nil }); err != nil {
		t.Fatalf("the newer producer's commit: %v", err)
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var seen []string
	for len(seen) == 0 {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed reader saw nothing: %v", ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { seen = append(seen, string(r.Value)) })
	}
	// The newer producer's commit is a marker after every record the stale
	// one wrote, so a second fetch would show nothing more of them.
	if len(seen) != 1 || seen[0] != "fresh" {
		t.Fatalf("read_committed reader saw %q, want only the newer producer's record", seen)
	}
}
