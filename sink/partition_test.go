package sink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A record that names its partition goes there; the others keep the
// partition their key hashes to (murmur2, as Kafka's Java producer), and
// a partition the topic lacks is refused before produce.
func TestNamedPartition(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 4, 1, nil, "parts"); err != nil {
		t.Fatal(err)
	}
	k, err := New(Config{Brokers: c.ListenAddrs()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()

	// Kafka's Java producer: toPositive(murmur2(key)) % partitions,
	// which franz-go's StickyKeyPartitioner computes too.
	keyed := int32(kgo.StickyKeyPartitioner(nil).ForTopic("parts").Partition(&kgo.Record{Key: []byte("k1")}, 4))
	recs := []*kgo.Record{{Topic: "parts", Key: []byte("k1")}, {Topic: "parts", Key: []byte("k1")}, {Topic: "parts", Key: []byte("k1")}}
	SetPartition(recs[1], 1)
	SetPartition(recs[2], 0)
	want := []int32{keyed, 1, 0}
	done := make(chan error, len(recs))
	for _, r := range recs {
		if err := k.Produce(ctx, r, func(_ *kgo.Record, err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for range recs {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range recs {
		if r.Partition != want[i] {
			t.Errorf("record %d on partition %d, want %d", i, r.Partition, want[i])
		}
	}

	bad := &kgo.Record{Topic: "parts", Key: []byte("k1")}
	SetPartition(bad, 4)
	var pe *PartitionError
	if err := k.Fits(ctx, bad); !errors.As(err, &pe) || pe.Partitions != 4 {
		t.Fatalf("Fits = %v, want a PartitionError naming 4 partitions", err)
	}
}
