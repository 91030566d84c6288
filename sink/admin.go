package sink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Topics is what a Kafka sink reads and creates of its topics: the
// position topic of exactly-once delivery, and the last record committed
// there.
type Topics struct {
	c       *client
	brokers []string
	book    *txnBook // this transactional id's transactions; nil for an idempotent producer
	settle  *settler // nil for an idempotent producer
}

// EnsureCompactedTopic creates topic with one partition and
// cleanup.policy=compact when it does not exist. A topic that exists is
// left as it is.
func (t *Topics) EnsureCompactedTopic(ctx context.Context, topic string) error {
	adm := kadm.NewClient(t.c.load())
	compact := "compact"
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: creating topic %s: %w", topic, err)
	}
	return nil
}

// LastCommitted returns the last record with key that a read_committed
// reader sees in partition 0 of topic, or nil when there is none. It waits
// until no transaction is open on the partition (the last stable offset
// reached the high watermark), so that a transaction a fenced producer was
// committing is settled first. One of this transactional id's that its
// coordinator no longer tracks is ended as the coordinator decided, where
// that can be read (orphan.go); otherwise the error names it.
func (t *Topics) LastCommitted(ctx context.Context, topic string, key []byte) (*kgo.Record, error) {
	adm := kadm.NewClient(t.c.load())
	var (
		end     int64
		since   = time.Now()
		open    error  // what the open transaction is, once looked up
		waited  string // that one is open, once seen
		checked bool
	)
	// behind says what the read waits behind, for an error once the
	// context ends.
	behind := func(err error) error {
		if waited == "" || ctx.Err() == nil {
			return err
		}
		return errors.Join(fmt.Errorf("%s: %w", waited, ctx.Err()), open)
	}
	for {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return nil, behind(fmt.Errorf("kafka: %s: last stable offset: %w", topic, err))
		}
		newest, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return nil, behind(fmt.Errorf("kafka: %s: end offset: %w", topic, err))
		}
		s, ok1 := stable.Lookup(topic, 0)
		n, ok2 := newest.Lookup(topic, 0)
		if !ok1 || !ok2 || s.Err != nil || n.Err != nil {
			return nil, fmt.Errorf("kafka: %s: no offsets for partition 0: %w", topic, errors.Join(s.Err, n.Err))
		}
		if s.Offset >= n.Offset {
			end = n.Offset
			break
		}
		if !checked && time.Since(since) >= describeOpenAfter {
			checked = true
			open = t.describeOpen(ctx, adm, topic)
			settled, err := t.settleOrphan(ctx, adm, topic)
			if settled != "" {
				t.c.log.Warn("kafka: a transaction stayed open on the position topic after its producer was fenced; it is ended as its coordinator decided",
					"topic", topic, "done", settled)
				open = nil
				continue
			}
			if err != nil {
				open = errors.Join(open, fmt.Errorf("kafka: %s: looking for how the open transaction ended: %w", topic, err))
			}
		}
		waited = fmt.Sprintf("kafka: %s: a transaction stays open (last stable offset %d, end %d)", topic, s.Offset, n.Offset)
		select {
		case <-ctx.Done():
			return nil, behind(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	// Read back from the end, a widening window at a time: the last
	// record is normally the one before the last commit marker.
	for window := int64(64); ; window *= 8 {
		from := max(0, end-window)
		rec, err := t.lastIn(ctx, topic, key, from, end)
		if err != nil || rec != nil || from == 0 {
			return rec, err
		}
	}
}

// describeOpenAfter is how long LastCommitted waits for an open
// transaction to end before it looks up what it is.
const describeOpenAfter = 2 * time.Second

// describeOpen says which transaction is open on partition 0 of topic and
// how an administrator ends it, for the error of a read that waits behind
// it. Fence has aborted every transaction of this transactional id that
// its coordinator tracks, and the coordinator times out every other one it
// tracks; one that stays open past that is one it no longer tracks (a
// hanging transaction, KIP-664; seen twice, after the broker was killed
// and restarted during a relay's last commit). Which marker ends it,
// commit or abort, is the coordinator's decision: settleOrphan writes it
// where the coordinator's marker on another partition tells it; where
// nothing tells it, an administrator decides (an abort written for a
// transaction whose commit the coordinator was still writing showed a
// read_committed consumer its events twice).
func (t *Topics) describeOpen(ctx context.Context, adm *kadm.Client, topic string) error {
	described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		return fmt.Errorf("kafka: %s: describing its producers: %w", topic, err)
	}
	owner := t.book.current()
	var errs []error
	described.EachProducer(func(p kadm.DescribedProducer) {
		if p.Partition != 0 || p.CurrentTxnStartOffset < 0 {
			return
		}
		whose := "another producer's"
		if owner != nil && p.ProducerID == owner.id {
			whose = "an earlier producer of this transactional id's"
		}
		errs = append(errs, fmt.Errorf("open: %s transaction (producer id %d, epoch %d) from offset %d; "+
			"one still open past its timeout is one Kafka's coordinator no longer tracks, which an administrator ends "+
			"(docs/operations.md, \"A transaction stays open on the position topic\"): "+
			"kafka-transactions.sh --bootstrap-server %s abort --topic %s --partition 0 --start-offset %d",
			whose, p.ProducerID, p.ProducerEpoch, p.CurrentTxnStartOffset, strings.Join(t.brokers, ","), topic, p.CurrentTxnStartOffset))
	})
	return errors.Join(errs...)
}

// lastIn reads partition 0 of topic from offset from to end (exclusive)
// and returns the last record with key that committed: outside a
// transaction, or in one that a commit marker ended. It reads every
// record (read_uncommitted, with the markers) and decides by the markers
// itself rather than leave that to the broker, because a record a
// read_committed reader never gets would leave it waiting for the end:
// the devbroker (kfake), killed while a transaction was open, counts that
// transaction as aborted after its restart but writes no marker for it,
// so the partition can end with its record.
func (t *Topics) lastIn(ctx context.Context, topic string, key []byte, from, end int64) (*kgo.Record, error) {
	var last *kgo.Record
	// open is, per producer, the last record with key of its transaction
	// not yet ended: a producer has at most one open on a partition.
	open := map[int64]*kgo.Record{}
	err := t.c.scan(ctx, topic, 0, from, end, func(r *kgo.Record) bool {
		switch {
		case r.Attrs.IsControl():
			if commit, ok := commitMarker(r); ok {
				if rec := open[r.ProducerID]; rec != nil && commit {
					last = rec
				}
				delete(open, r.ProducerID)
			}
		case string(r.Key) != string(key):
		case r.Attrs.IsTransactional():
			open[r.ProducerID] = r
		default:
			last = r
		}
		return true
	})
	return last, err
}

// commitMarker reads a transaction marker's key (version, then type: 0
// abort, 1 commit); ok is false for any other control record.
func commitMarker(r *kgo.Record) (commit, ok bool) {
	if len(r.Key) < 4 {
		return false, false
	}
	switch binary.BigEndian.Uint16(r.Key[2:4]) {
	case 0:
		return false, true
	case 1:
		return true, true
	}
	return false, false
}

// settleOrphan is settler.settleOrphan for a transactional producer's
// topics; an idempotent producer's have none.
func (t *Topics) settleOrphan(ctx context.Context, adm *kadm.Client, topic string) (string, error) {
	if t.settle == nil {
		return "", nil
	}
	return t.settle.settleOrphan(ctx, adm, topic)
}
