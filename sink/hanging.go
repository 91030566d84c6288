package sink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A hanging transaction is one of this transactional id whose records are
// still open on a partition while its coordinator has moved past it: no
// marker will ever end it there. Apache Kafka 4.4 leaves one when the
// broker is killed between a transaction's EndTxn and its markers and
// comes back on its data: the restarted coordinator finds no leader for
// the transaction's partitions while the broker registers again, takes
// them for deleted, skips their markers and records the transaction as
// complete (TestCommitSurvivesBrokerKill kills a real broker until it does).
//
// What follows it on the same partition joins it: the next transaction's
// records extend the open range, and that transaction's abort marker then
// aborts the committed records beneath too. In the nemesis (seed 37,
// exactly-once, polling) 25 committed events were lost that way: their
// transaction's markers reached one partition of three, and the next
// transaction, cut off by the broker's restart, was aborted when another
// relay fenced it.
//
// So before a new producer fences the id, and after a broker connection
// failed (on the next new connection, before a transaction's first record
// and before its end), every range of this id left open is ended as its
// transaction ended, where that is known: this process committed it or
// never sent its EndTxn, the coordinator's state is the one that
// transaction's end left, or the coordinator's marker on another
// partition says. Where it is not known, the events are
// committed and the position record aborted: an event shown that was also
// sent again is a duplicate, an event aborted that PostgreSQL counts as
// published is lost, and a position record is committed only when its
// whole transaction is known committed (committing one whose events did
// not all arrive would count them published).

// failureHook counts failed broker reads, writes and dials: a broker that
// went away, for a while or for good. A connection made after one settles
// hanging transactions before the connection carries anything (see
// settleOnConnect).
type failureHook struct {
	s    *settler
	life context.Context // the client's
}

func (h failureHook) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.s.failures.Add(1)
	}
}

func (h failureHook) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.s.failures.Add(1)
	}
}

func (h failureHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.s.failures.Add(1)
		return
	}
	h.s.settleOnConnect(h.life)
}

// settler ends the ranges of a transactional id that Kafka left open
// (see above): before a fence, after a broker failure, before a
// transaction's end, and an orphan on the position topic (orphan.go).
type settler struct {
	c             *client
	txnID         string
	positionTopic string
	book          *txnBook
	written       *writtenTopics
	// failures counts failed broker reads, writes and dials; swept is its
	// value when hanging transactions were last looked for.
	failures, swept atomic.Uint64
	mu              sync.Mutex  // one settleHanging at a time
	undescribed     atomic.Bool // warnUndescribed said it
}

// connectSettleWait bounds how long a new connection waits for
// settleOnConnect.
const connectSettleWait = 15 * time.Second

// settleOnConnect runs settleHanging on a new broker connection when a
// connection failed since it last ran, before the connection is used: a
// transaction's records handed to franz-go before the failure was noticed
// (the broker killed just after answering the last commit, and restarted)
// go out on a new connection, and must not join a range the restarted
// broker left open; their transaction could not abort then without
// taking the committed records beneath with it (nemesis seed 25: 53
// duplicates, from a range of a committed and a failed transaction that
// another relay had to commit whole). franz-go calls the hook in the
// connection's broker goroutine, before the connection's first request,
// and every request to that broker waits meanwhile: settleHanging uses a
// client of its own. When it fails the request goes out anyway, and
// settleBeforeEnd looks again before the transaction's end.
func (s *settler) settleOnConnect(life context.Context) {
	if s.failures.Load() == s.swept.Load() || life.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(life, connectSettleWait)
	defer cancel()
	if err := s.settleAfterFailure(ctx); err != nil && life.Err() == nil {
		s.c.log.Warn("kafka: looking for transactions left open after a broker failure", "err", err)
	}
}

// verdict is how a hanging transaction ended, as far as anyone can tell.
type verdict int

const (
	unknown verdict = iota
	committed
	aborted
)

// knownEnd is what this process knows of how the transaction of producer
// id and epoch ended. Before transaction version 2 a producer's
// transactions share its epoch; one it both committed and aborted at an
// epoch is unknown.
func (b *txnBook) knownEnd(id int64, epoch int16) verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	pe := producerEpoch{id, epoch}
	c, a := slices.Contains(b.committed, pe), slices.Contains(b.aborted, pe) || slices.Contains(b.unended, pe)
	switch {
	case c && !a:
		return committed
	case a && !c:
		return aborted
	}
	return unknown
}

// writtenTopics are the topics a producer wrote to.
type writtenTopics struct {
	mu     sync.Mutex
	topics map[string]struct{}
}

// add adds topic to those written to.
func (w *writtenTopics) add(topic string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.topics == nil {
		w.topics = map[string]struct{}{}
	}
	w.topics[topic] = struct{}{}
}

// list is the topics written to, and also, when not empty, the position
// topic, sorted.
func (w *writtenTopics) list(position string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.topics)+1)
	for t := range w.topics {
		out = append(out, t)
	}
	if position != "" && !slices.Contains(out, position) {
		out = append(out, position)
	}
	slices.Sort(out)
	return out
}

// txnBook is what this process knows of its transactional id's
// transactions: the producer id and epoch that owns it, and the
// transactions that ended, or were left open, by producer id and epoch.
type txnBook struct {
	// owner is the producer id and epoch last known to own the id (after
	// Fence and each commit).
	owner atomic.Pointer[producerEpoch]
	mu    sync.Mutex
	// unended were left open with records in them and no EndTxn sent, by
	// this process's replaced clients or, as the caller learned, by
	// another process: nobody committed them (orphan.go). committed and
	// aborted are those this process ended.
	unended, committed, aborted []producerEpoch
}

// current is the owner; nil before a fence, or for an idempotent
// producer (a nil book).
func (b *txnBook) current() *producerEpoch {
	if b == nil {
		return nil
	}
	return b.owner.Load()
}

// maxEnded bounds the transactions this process remembers ending.
const maxEnded = 64

// ended records that this process ended the transaction of producer id
// and epoch, committed or aborted.
func (b *txnBook) ended(id int64, epoch int16, commit bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := &b.aborted
	if commit {
		l = &b.committed
	}
	*l = append(*l, producerEpoch{id, epoch})
	if len(*l) > maxEnded {
		*l = (*l)[1:]
	}
}

// maxUnended bounds the transactions unended remembers; the last one left
// open is the one that can be an orphan (orphan.go).
const maxUnended = 8

// leftOpen records that the transaction of producer id and epoch was left
// open with no EndTxn sent.
func (b *txnBook) leftOpen(id int64, epoch int16) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pe := producerEpoch{id, epoch}
	if slices.Contains(b.unended, pe) {
		return
	}
	b.unended = append(b.unended, pe)
	if len(b.unended) > maxUnended {
		b.unended = b.unended[1:]
	}
}

// neverCommitted tells whether the transaction of producer id and epoch
// was recorded as left open with no EndTxn sent.
func (b *txnBook) neverCommitted(id int64, epoch int16) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.unended, producerEpoch{id, epoch})
}

// settleAfterFailure runs settleHanging when a broker connection failed
// since it last ran: on the next new connection, and before a
// transaction's first record and its end, so that no record joins a range
// left open.
func (s *settler) settleAfterFailure(ctx context.Context) error {
	return s.sweep(ctx, false, false)
}

// sweep runs settleHanging (everywhere, as it says), only when a broker
// connection failed since the last sweep unless always, and records the
// failures it covered when it succeeds. One runs at a time.
func (s *settler) sweep(ctx context.Context, everywhere, always bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.failures.Load()
	if !always && f == s.swept.Load() {
		return nil
	}
	if err := s.settleHanging(ctx, everywhere); err != nil {
		return err
	}
	s.swept.Store(f)
	return nil
}

// settleBeforeEnd runs settleHanging before a transaction's EndTxn when a
// broker connection failed since it last ran: this transaction's records
// may have joined a range left open (a broker that restarted while the
// producer was idle fails its first request, which franz-go sends again),
// and its end marker would end that range with it. When it cannot, the
// transaction ends anyway: its commit also commits what lies beneath, and
// holding it back would leave the coordinator to abort it.
func (s *settler) settleBeforeEnd(ctx context.Context) {
	if err := s.settleAfterFailure(ctx); err != nil {
		s.c.log.Warn("kafka: looking for transactions left open after a broker failure", "err", err)
	}
}

// hangingWait bounds how long settleHanging waits for a coordinator that
// is writing a transaction's markers.
const hangingWait = 10 * time.Second

// hanging is a partition where a transaction of this id stays open.
type hanging struct {
	p     kadm.DescribedProducer
	epoch int16 // the epoch of its first open record: whose transaction it is
	first *kgo.Record
}

// settleHanging ends every range of this transactional id left open, that
// its coordinator no longer tracks (see above), on the partitions of the
// coordinator's open transaction and of every topic (everywhere: a new
// producer, which may be another process's, knows none) or of the topics
// this producer wrote to and the position topic. It returns an error when
// one cannot be ended; the caller must not fence the id or add records
// then.
func (s *settler) settleHanging(ctx context.Context, everywhere bool) error {
	if s.txnID == "" {
		return nil
	}
	// Not the producer's client: settleOnConnect runs inside it.
	cl, err := kgo.NewClient(s.c.readOpts()...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	txn, found, err := s.describeTxn(ctx, adm)
	if err != nil || !found {
		return err
	}
	described, err := s.describeProducersAnswered(ctx, adm, txn, everywhere)
	if refusedToDescribe(err) {
		s.warnUndescribed(err)
		return nil
	}
	if err != nil {
		return unlessUnsupported(err)
	}
	open, mine, err := s.openElsewhere(ctx, txn, described)
	if err != nil {
		return err
	}
	return s.endAll(ctx, adm, txn, open, mine)
}

// describeTxn describes the producer's transactional id once its
// coordinator is not writing markers; found is false where there is
// nothing to settle (the id was never used, it may not be described, or
// its markers are still being written when hangingWait is up).
func (s *settler) describeTxn(ctx context.Context, adm *kadm.Client) (kadm.DescribedTransaction, bool, error) {
	for deadline := time.Now().Add(hangingWait); ; {
		described, err := adm.DescribeTransactions(ctx, s.txnID)
		var t kadm.DescribedTransaction
		if err == nil {
			if t, err = described.On(s.txnID, nil); err == nil {
				err = t.Err
			}
		}
		switch {
		case errors.Is(err, kerr.TransactionalIDNotFound):
			return t, false, nil // never used
		case refusedToDescribe(err):
			s.warnUndescribed(err)
			return t, false, nil
		case err != nil && (final(err) || time.Now().After(deadline)):
			return t, false, unlessUnsupported(fmt.Errorf("kafka: describing transaction %s: %w", s.txnID, err))
		case err == nil && !strings.HasPrefix(t.State, "Prepare"):
			return t, true, nil
		case err == nil && time.Now().After(deadline):
			// Its coordinator is still writing the markers: what is
			// open may be about to end; a later look settles it.
			return t, false, nil
		}
		select {
		case <-ctx.Done():
			return t, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// describeProducersAnswered is describeProducers, asked again until every
// partition answers or hangingWait is up: a restarted broker answers for
// its partitions a moment after it accepts connections.
func (s *settler) describeProducersAnswered(ctx context.Context, adm *kadm.Client, txn kadm.DescribedTransaction, everywhere bool) (kadm.DescribedProducersTopics, error) {
	deadline := time.Now().Add(hangingWait)
	for {
		described, err := s.describeProducers(ctx, adm, txn, everywhere)
		if err == nil || refusedToDescribe(err) || final(err) || time.Now().After(deadline) {
			return described, err
		}
		select {
		case <-ctx.Done():
			return described, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// openElsewhere reads, of described, the partitions the producer of txn
// wrote to (mine) and those where it left a transaction open other than
// the one its coordinator has open (open), each with its first open
// record.
func (s *settler) openElsewhere(ctx context.Context, txn kadm.DescribedTransaction, described kadm.DescribedProducersTopics) (open []hanging, mine []kadm.DescribedProducer, err error) {
	ongoing := txn.State == "Ongoing"
	var errs []error
	described.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID != txn.ProducerID {
			return
		}
		mine = append(mine, p)
		if p.CurrentTxnStartOffset < 0 {
			return
		}
		var first *kgo.Record
		err := s.c.scan(ctx, p.Topic, p.Partition, p.CurrentTxnStartOffset, p.CurrentTxnStartOffset+1, func(r *kgo.Record) bool {
			first = r
			return false
		})
		if err != nil || first == nil {
			errs = append(errs, errors.Join(fmt.Errorf("kafka: reading the first open record of %s/%d", p.Topic, p.Partition), err))
			return
		}
		if ongoing && first.ProducerEpoch == txn.ProducerEpoch {
			return // the coordinator's open transaction: it ends that one
		}
		open = append(open, hanging{p, first.ProducerEpoch, first})
	})
	return open, mine, errors.Join(errs...)
}

// endAll ends each transaction left open, how it ended decided once for
// all its partitions: as this process ended it, as the coordinator says,
// or by its marker elsewhere.
func (s *settler) endAll(ctx context.Context, adm *kadm.Client, txn kadm.DescribedTransaction, open []hanging, mine []kadm.DescribedProducer) error {
	type decision struct {
		v   verdict
		why string
	}
	decided := map[int16]decision{}
	for _, h := range open {
		d, ok := decided[h.epoch]
		if !ok {
			d = decision{s.book.knownEnd(h.p.ProducerID, h.epoch), "this process ended it so"}
			if d.v == unknown {
				d.v, d.why = coordinatorSays(txn, h.epoch)
			}
			if d.v == unknown {
				var err error
				if d.v, d.why, err = s.markerElsewhere(ctx, adm, h, open, mine); err != nil {
					return err
				}
			}
			decided[h.epoch] = d
		}
		if err := s.endHanging(ctx, adm, h, d.v, d.why); err != nil {
			return err
		}
	}
	return nil
}

// describeProducers describes the producers of the partitions of the
// coordinator's open transaction and of every topic (everywhere) or of the
// topics this producer wrote to and the position topic. A partition it
// could not describe is an error: a range left open there would go
// unseen. One the broker refused to describe is warned of and skipped.
func (s *settler) describeProducers(ctx context.Context, adm *kadm.Client, txn kadm.DescribedTransaction, everywhere bool) (kadm.DescribedProducersTopics, error) {
	set := kadm.TopicsSet{}
	if topics := s.written.list(s.positionTopic); everywhere || len(topics) > 0 {
		if everywhere {
			topics = nil // every topic
		}
		listed, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return nil, fmt.Errorf("kafka: listing topics: %w", err)
		}
		for t, d := range listed {
			if d.Err == nil {
				for p := range d.Partitions {
					set.Add(t, p)
				}
			}
		}
	}
	if txn.State == "Ongoing" {
		set.Merge(txn.Topics)
	}
	if len(set) == 0 {
		return nil, nil
	}
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("kafka: describing producers: %w", err)
	}
	var errs []error
	described.EachPartition(func(p kadm.DescribedProducersPartition) {
		switch {
		case refusedToDescribe(p.Err):
			s.warnUndescribed(fmt.Errorf("%s/%d: %w", p.Topic, p.Partition, p.Err))
		case p.Err != nil:
			errs = append(errs, fmt.Errorf("kafka: describing producers of %s/%d: %w", p.Topic, p.Partition, p.Err))
		}
	})
	return described, errors.Join(errs...)
}

// coordinatorSays reads how the transaction of epoch ended from its
// coordinator's state, when that is the state it left: since transaction
// version 2 a transaction's end bumps the epoch, so CompleteCommit or
// CompleteAbort at epoch plus one is that transaction's end and no other's
// (nemesis seed 14: a commit whose answer the broker's kill cut off, its
// markers skipped after the restart).
func coordinatorSays(txn kadm.DescribedTransaction, epoch int16) (verdict, string) {
	if txn.ProducerEpoch != epoch+1 {
		return unknown, ""
	}
	switch txn.State {
	case "CompleteCommit":
		return committed, "its coordinator's state says so (CompleteCommit)"
	case "CompleteAbort":
		return aborted, "its coordinator's state says so (CompleteAbort)"
	}
	return unknown, ""
}

// markerElsewhere looks for the marker the coordinator wrote for h's
// transaction on another partition the producer wrote to (mine), one where
// that transaction is not left open: since transaction version 2 the
// marker carries the transaction's epoch plus one, and no other marker
// does. A later transaction's records may follow it there.
func (s *settler) markerElsewhere(ctx context.Context, adm *kadm.Client, h hanging, open []hanging, mine []kadm.DescribedProducer) (verdict, string, error) {
	from := h.first.Timestamp.Add(-orphanSearch).UnixMilli()
	n := 0
	for _, c := range mine {
		if c.ProducerEpoch <= h.epoch || slices.ContainsFunc(open, func(o hanging) bool {
			return o.epoch == h.epoch && o.p.Topic == c.Topic && o.p.Partition == c.Partition
		}) {
			continue // nothing of the producer after that transaction there, or it is open there too
		}
		if n++; n > maxOrphanPartitions {
			break
		}
		commit, found, err := s.findMarker(ctx, adm, c.Topic, c.Partition, from, h.p.ProducerID, h.epoch+1)
		if err != nil {
			return unknown, "", fmt.Errorf("kafka: looking for the marker of a transaction left open on %s/%d: %w", c.Topic, c.Partition, err)
		}
		if found {
			v := aborted
			if commit {
				v = committed
			}
			return v, fmt.Sprintf("its coordinator's marker on %s/%d says so", c.Topic, c.Partition), nil
		}
	}
	return unknown, "nothing says how it ended", nil
}

// endHanging writes the marker that ends h: the transaction's own end
// where known; otherwise commit for events and abort for the position
// topic (see above), and nothing without a position topic. A position
// record is committed only when nothing of a later transaction joined the
// open range.
func (s *settler) endHanging(ctx context.Context, adm *kadm.Client, h hanging, v verdict, why string) error {
	p := h.p
	var commit bool
	switch v {
	case committed:
		commit = p.Topic != s.positionTopic || p.ProducerEpoch == h.epoch
	case unknown:
		if s.positionTopic == "" {
			return nil // which records say what was published is not known: LastCommitted names it
		}
		commit = p.Topic != s.positionTopic
	}
	did := "aborted"
	if commit {
		did = "committed"
	}
	if err := writeMarker(ctx, adm, p, commit); err != nil {
		return fmt.Errorf("kafka: a transaction (producer id %d, epoch %d) stays open on %s/%d from offset %d after its coordinator "+
			"moved on, and it is to be %s (%s), but writing that marker failed (it takes ALTER on the cluster resource): %w",
			p.ProducerID, h.epoch, p.Topic, p.Partition, p.CurrentTxnStartOffset, did, why, err)
	}
	s.c.log.Warn("kafka: a transaction stayed open on a partition after its coordinator moved on (a broker restarted between its end and its markers); it is ended",
		"topic", p.Topic, "partition", p.Partition, "from_offset", p.CurrentTxnStartOffset,
		"producer_id", p.ProducerID, "epoch", h.epoch, "later_epoch", p.ProducerEpoch, "done", did, "why", why)
	return nil
}

// refusedToDescribe tells an authorization failure: describing producers
// takes READ on the topic, describing a transaction DESCRIBE on the
// transactional id (WRITE implies it).
func refusedToDescribe(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// warnUndescribed says, once per producer, that transactions left open
// cannot be looked for: without that a committed transaction Kafka left
// open can be aborted with the next one (see above).
func (s *settler) warnUndescribed(err error) {
	if s.undescribed.CompareAndSwap(false, true) {
		s.c.log.Warn("kafka: cannot look for transactions left open after a broker restart (grant the relay's user READ on its topics)", "err", err)
	}
}

// final tells an error the broker will answer again: a refusal that is not
// retriable. A cluster's first transactional id waits for the
// coordinator's topic to be created, a restarted broker for its listener:
// those pass.
func final(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && !ke.Retriable
}

// unlessUnsupported drops an error that says the broker does not know the
// request (Kafka before 3.0 describes neither producers nor
// transactions): there is nothing to look at then.
func unlessUnsupported(err error) error {
	if errors.Is(err, kerr.UnsupportedVersion) {
		return nil
	}
	return err
}
