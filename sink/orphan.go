package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An orphan is a transaction of an earlier producer of this transactional
// id that is still open on the position topic after Fence: the
// coordinator no longer tracks it there, so no marker will ever end it,
// and every read_committed read of the partition waits behind it (seen in
// the nemesis after broker kills during a relay's commit).
//
// Which marker ends it is the coordinator's decision, and there are two
// ways to know it. A transaction left open with records in it and no
// EndTxn sent (Unsent), which this process recorded when it replaced its
// client (Renew) or learned of from the caller (Unended: the relay keeps
// it in PostgreSQL for the next process), was committed by nobody: only
// the producer's EndTxn commits (nemesis seeds 11 and 33: the broker was
// killed during the transaction, and the restarted coordinator knew none
// of its partitions). Otherwise the decision can
// still be read where the coordinator did write it: on the other
// partitions of the same transaction. Since transaction version 2
// (KIP-890) the coordinator bumps the producer's epoch at every
// transaction's end and writes its markers with the bumped epoch, so a
// marker of this producer id with the orphan's epoch plus one ends the
// orphan's transaction and no other (a later transaction of that epoch
// writes a record before its marker, which the search below refuses; and
// none can commit while every producer of this id waits behind the
// orphan). With such a marker found, the same marker is written wherever
// the transaction is still open; without one, nothing is written: an
// abort where the coordinator committed shows a read_committed consumer
// the transaction's events twice once they are sent again, and a commit
// where it aborted loses them.

// orphanSearch is how far before the orphan's first record the search for
// its marker starts reading: the marker comes after every record of the
// transaction, so only for the producer's clock against the broker's.
const orphanSearch = time.Minute

// maxOrphanPartitions bounds how many partitions the search reads.
const maxOrphanPartitions = 256

// settleOrphan ends an orphan open on partition 0 of topic as its
// coordinator decided, when that decision is known. It returns what
// it did; "" and no error when there is no orphan of this transactional
// id, an error when its decision cannot be found or written.
func (s *settler) settleOrphan(ctx context.Context, adm *kadm.Client, topic string) (string, error) {
	owner := s.book.current()
	if owner == nil || s.txnID == "" {
		return "", nil
	}
	described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		return "", fmt.Errorf("describing the producers of %s: %w", topic, err)
	}
	var orphan *kadm.DescribedProducer
	described.EachProducer(func(p kadm.DescribedProducer) {
		if p.Partition == 0 && p.CurrentTxnStartOffset >= 0 && p.ProducerID == owner.id && p.ProducerEpoch < owner.epoch {
			orphan = &p
		}
	})
	if orphan == nil {
		return "", nil
	}
	// Where else the producer wrote: partitions still open at the same
	// epoch end the same way; those it last wrote at the next epoch may
	// hold the coordinator's marker.
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return "", fmt.Errorf("listing topics: %w", err)
	}
	producers, err := adm.DescribeProducers(ctx, all.TopicsSet())
	if err != nil {
		return "", fmt.Errorf("describing producers: %w", err)
	}
	open := []kadm.DescribedProducer{*orphan}
	var candidates []kadm.DescribedProducer
	producers.EachProducer(func(p kadm.DescribedProducer) {
		switch {
		case p.ProducerID != orphan.ProducerID || (p.Topic == topic && p.Partition == 0):
		case p.CurrentTxnStartOffset >= 0 && p.ProducerEpoch == orphan.ProducerEpoch:
			open = append(open, p)
		case p.CurrentTxnStartOffset < 0 && (p.ProducerEpoch == orphan.ProducerEpoch || p.ProducerEpoch == orphan.ProducerEpoch+1):
			candidates = append(candidates, p)
		}
	})

	if s.book.neverCommitted(orphan.ProducerID, orphan.ProducerEpoch) {
		// Its producer left it open and never asked to commit it: only
		// the producer's EndTxn commits, so nobody did.
		return endOrphan(ctx, adm, topic, open, false, "its producer never sent its commit")
	}
	var first *kgo.Record
	if err := s.c.scan(ctx, topic, 0, orphan.CurrentTxnStartOffset, orphan.CurrentTxnStartOffset+1, func(r *kgo.Record) bool {
		first = r
		return false
	}); err != nil || first == nil {
		return "", errors.Join(fmt.Errorf("reading the open transaction's first record"), err)
	}
	if len(candidates) > maxOrphanPartitions {
		candidates = candidates[:maxOrphanPartitions]
	}
	from := first.Timestamp.Add(-orphanSearch).UnixMilli()
	for _, c := range candidates {
		commit, found, err := s.findMarker(ctx, adm, c.Topic, c.Partition, from, orphan.ProducerID, orphan.ProducerEpoch+1)
		if err != nil {
			return "", fmt.Errorf("looking for the transaction's marker on %s/%d: %w", c.Topic, c.Partition, err)
		}
		if found {
			return endOrphan(ctx, adm, topic, open, commit, fmt.Sprintf("its coordinator's marker on %s/%d says so", c.Topic, c.Partition))
		}
	}
	return "", fmt.Errorf("no other partition holds its coordinator's marker (%d read): whether it committed cannot be read from Kafka", len(candidates))
}

// endOrphan writes the orphan's marker, commit or abort, on every
// partition where its transaction is open (open, the position topic's
// first), and says what it did and why.
func endOrphan(ctx context.Context, adm *kadm.Client, topic string, open []kadm.DescribedProducer, commit bool, why string) (string, error) {
	verdict := "aborted"
	if commit {
		verdict = "committed"
	}
	for _, p := range open {
		if err := writeMarker(ctx, adm, p, commit); err != nil {
			return "", fmt.Errorf("it is to be %s (%s), but writing that marker on %s/%d failed "+
				"(it takes ALTER on the cluster resource): %w", verdict, why, p.Topic, p.Partition, err)
		}
	}
	o := open[0]
	return fmt.Sprintf("%s the transaction (producer id %d, epoch %d) left open from offset %d of %s and on %d other partitions: %s",
		verdict, o.ProducerID, o.ProducerEpoch, o.CurrentTxnStartOffset, topic, len(open)-1, why), nil
}

// writeMarker writes a commit or abort marker for p's open transaction on
// its partition, as the coordinator would. It takes ALTER (Kafka 3.8 and
// later, KIP-1037) or CLUSTER_ACTION on the cluster.
func writeMarker(ctx context.Context, adm *kadm.Client, p kadm.DescribedProducer, commit bool) error {
	resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
		Commit: commit, CoordinatorEpoch: p.CoordinatorEpoch, Topics: kadm.TopicsSet{p.Topic: {p.Partition: {}}}})
	resp.EachPartition(func(r kadm.TxnMarkersPartitionResponse) { err = errors.Join(err, r.Err) })
	return err
}

// findMarker reads partition of topic from the first record at or after
// the millisecond from, up to its current end, for the first record or
// marker of producer id with an epoch of at least epoch. found is whether
// that is a marker of exactly epoch, commit which marker it is.
func (s *settler) findMarker(ctx context.Context, adm *kadm.Client, topic string, partition int32, from int64, id int64, epoch int16) (commit, found bool, err error) {
	starts, err := adm.ListOffsetsAfterMilli(ctx, from, topic)
	if err != nil {
		return false, false, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false, false, err
	}
	b, ok1 := starts.Lookup(topic, partition)
	e, ok2 := ends.Lookup(topic, partition)
	if !ok1 || !ok2 || b.Err != nil || e.Err != nil {
		return false, false, fmt.Errorf("no offsets: %w", errors.Join(b.Err, e.Err))
	}
	err = s.c.scan(ctx, topic, partition, b.Offset, e.Offset, func(r *kgo.Record) bool {
		if r.ProducerID != id || r.ProducerEpoch < epoch {
			return true
		}
		if r.Attrs.IsControl() && r.ProducerEpoch == epoch {
			commit, found = commitMarker(r)
		}
		return false
	})
	return commit, found, err
}
