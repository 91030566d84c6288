package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
)

// UnwritableError is a partition the producer writes to that cannot take
// a write with acks=all now: it has no leader, or fewer replicas in sync
// than its topic's min.insync.replicas, and its broker answers
// NOT_ENOUGH_REPLICAS. franz-go retries such a record without a word until
// the partition takes it; this says why records wait.
type UnwritableError struct {
	Topic     string
	Partition int32
	// Leader is the partition's leader (-1: none).
	Leader int32
	// InSync and Replicas are the partition's replicas in sync and all of
	// them; MinInSync the topic's min.insync.replicas (0: not read).
	InSync, Replicas, MinInSync int
	// Others are the other partitions that cannot take writes.
	Others int
}

func (e *UnwritableError) Error() string {
	others := ""
	if e.Others > 0 {
		others = fmt.Sprintf(" (and %d other partitions)", e.Others)
	}
	if e.Leader < 0 {
		return fmt.Sprintf("topic %s partition %d has no leader%s: records to it wait until a broker that holds it returns", e.Topic, e.Partition, others)
	}
	return fmt.Sprintf("topic %s partition %d has %d of %d replicas in sync, fewer than its min.insync.replicas %d%s: the broker refuses writes (NOT_ENOUGH_REPLICAS) until another replica is in sync again",
		e.Topic, e.Partition, e.InSync, e.Replicas, e.MinInSync, others)
}

// Unavailable: the cluster takes the records again once its brokers return.
func (e *UnwritableError) Unavailable() bool { return true }

// Writable checks the partitions of the topics the producer wrote to: nil
// when each has a leader and as many replicas in sync as its topic's
// min.insync.replicas, *UnwritableError naming the first that has not. A
// topic's min.insync.replicas is read only when one of its partitions has
// fewer replicas in sync than it has replicas; when it cannot be read,
// only a partition without a leader is reported.
func (h *Health) Writable(ctx context.Context) error {
	topics := h.written.list(h.positionTopic)
	if len(topics) == 0 {
		return nil
	}
	adm := kadm.NewClient(h.c.load())
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return err
	}
	var first *UnwritableError
	found := func(e UnwritableError) {
		if first == nil {
			first = &e
		} else {
			first.Others++
		}
	}
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil {
			continue // not created yet, or not ours to describe: Produce says so
		}
		minISR := 0
		for _, p := range t.Partitions.Sorted() {
			e := UnwritableError{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader, InSync: len(p.ISR), Replicas: len(p.Replicas)}
			if p.Leader < 0 {
				found(e)
				continue
			}
			if len(p.ISR) >= len(p.Replicas) {
				continue
			}
			if minISR == 0 {
				if minISR, err = minInSync(ctx, adm, t.Topic); err != nil {
					minISR = -1 // unreadable: not asked again for this topic
				}
			}
			if len(p.ISR) < minISR {
				e.MinInSync = minISR
				found(e)
			}
		}
	}
	if first == nil {
		return nil
	}
	return first
}

// minInSync reads topic's min.insync.replicas.
func minInSync(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, err
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return 0, err
	}
	if n, ok := configInt(rc.Configs, "min.insync.replicas"); ok {
		return n, nil
	}
	return 0, errors.New("min.insync.replicas not reported")
}
