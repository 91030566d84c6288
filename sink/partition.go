package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A record goes to the partition its key hashes to (murmur2, as Kafka's
// Java producer hashes it), so that every event of an aggregate lands on
// one partition. A record may instead name its partition (Debezium's
// partition placement): SetPartition marks it, and the partitioner honours
// the mark.

type explicitKey struct{}

// explicitMark is the context SetPartition leaves on a record until
// Produce replaces it with the gate's.
var explicitMark = context.WithValue(context.Background(), explicitKey{}, true)

// SetPartition sends r to partition p instead of the one its key hashes
// to. Fits refuses it (*PartitionError) when the topic has no such
// partition.
func SetPartition(r *kgo.Record, p int32) {
	r.Partition = p
	r.Context = explicitMark
}

func isExplicit(r *kgo.Record) bool { return r.Context != nil && r.Context.Value(explicitKey{}) != nil }

// partitioner is franz-go's default partitioner for every record that
// names no partition.
type partitioner struct{ inner kgo.Partitioner }

func newPartitioner() kgo.Partitioner {
	return partitioner{kgo.UniformBytesPartitioner(64<<10, true, true, nil)} // franz-go's default
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{p.inner.ForTopic(topic).(kgo.TopicBackupPartitioner)}
}

type topicPartitioner struct{ inner kgo.TopicBackupPartitioner }

// RequiresConsistency: a named partition is that partition, whether or
// not it can be written to now.
func (p *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return isExplicit(r) || p.inner.RequiresConsistency(r)
}

func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	return p.PartitionByBackup(r, n, nil)
}

func (p *topicPartitioner) PartitionByBackup(r *kgo.Record, n int, backup kgo.TopicBackupIter) int {
	if isExplicit(r) {
		return int(r.Partition) // out of range: franz-go fails the record
	}
	return p.inner.PartitionByBackup(r, n, backup)
}

// PartitionError is a record naming a partition its topic does not have.
type PartitionError struct {
	Topic      string
	Partition  int32
	Partitions int
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("partition %d does not exist: topic %s has %d", e.Partition, e.Topic, e.Partitions)
}

// Permanent: the record names the same partition next time.
func (e *PartitionError) Permanent() bool { return true }

// Poison: only this record names it.
func (e *PartitionError) Poison() bool { return true }

// partitionCounts caches how many partitions the topics of records that
// name one have; a topic that does not exist yet is asked again later.
type partitionCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// checkPartition returns *PartitionError when r names a partition its
// topic lacks. A topic not created yet is let through: its first records
// create it.
func (k *Kafka) checkPartition(ctx context.Context, r *kgo.Record) error {
	if !isExplicit(r) {
		return nil
	}
	if r.Partition < 0 {
		return &PartitionError{Topic: r.Topic, Partition: r.Partition}
	}
	k.parts.mu.Lock()
	defer k.parts.mu.Unlock()
	n, ok := k.parts.n[r.Topic]
	if !ok {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		topics, err := kadm.NewClient(k.c.load()).ListTopics(lctx, r.Topic)
		cancel()
		if err != nil {
			return fmt.Errorf("kafka: read the partitions of %s: %w", r.Topic, err)
		}
		t, found := topics[r.Topic]
		if !found || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
			return nil
		}
		if t.Err != nil {
			return fmt.Errorf("kafka: read the partitions of %s: %w", r.Topic, t.Err)
		}
		n = len(t.Partitions)
		if k.parts.n == nil {
			k.parts.n = map[string]int{}
		}
		k.parts.n[r.Topic] = n
	}
	if int(r.Partition) >= n {
		return &PartitionError{Topic: r.Topic, Partition: r.Partition, Partitions: n}
	}
	return nil
}
