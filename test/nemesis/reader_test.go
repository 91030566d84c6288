package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The checker reads as a read_committed consumer: the records of a Kafka
// transaction that aborted are never counted, those of one still open only
// once it commits, and CatchUp waits for it.
func TestReaderIsReadCommitted(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	p, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("nemesis-reader-test"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	event := func(id string) *kgo.Record {
		return &kgo.Record{Topic: eventTopic, Key: []byte("a"), Value: []byte(fmt.Sprintf(`{"id":%q}`, id))}
	}
	// txn produces ids in a transaction and ends it with end, unless
	// open.
	txn := func(end kgo.TransactionEndTry, open bool, ids ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := p.ProduceSync(ctx, event(id)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if !open {
			if err := p.EndTransaction(ctx, end); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn(kgo.TryCommit, false, "c1", "c2")
	txn(kgo.TryAbort, false, "aborted")
	txn(kgo.TryCommit, false, "c3")
	// The dead-letter topic must exist for the reader's offsets.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: deadLetters, Key: []byte(""), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("p1")}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	txn(kgo.TryCommit, true, "open") // produced, neither committed nor aborted yet

	r, err := NewReader(brokers, eventTopic, deadLetters)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // anything the open transaction leaks would show by now
	if got := ids(r.Records()); got != "c1 c2 c3 p1" {
		t.Fatalf("read %q; want the committed records only", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := r.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(r.Records()); got != "c1 c2 c3 open p1" {
		t.Fatalf("read %q after the last commit", got)
	}
	if !r.Has("open") || r.Has("aborted") {
		t.Fatal("Has disagrees with Records")
	}
}

// ids are the records' ids, sorted: the two topics interleave as they
// are fetched.
func ids(recs []Record) string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
