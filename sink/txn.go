package sink

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactions (Config.TransactionalID): a session calls Fence once, then
// Begin, produces, Commit, Begin... A producer whose transaction failed in
// any way is never used again: franz-go would re-initialise its producer id
// on the next Begin, and with the id of a producer that was fenced that
// bumps the epoch again and fences the producer that took over. The caller
// ends its session instead, and the next one starts with Renew and Fence.
// What the failed producer left open broker-side is aborted by that Fence
// (or, if none comes, by the broker after TransactionTimeout).

// ErrFenced means another producer with the same transactional id started
// after this one: another relay of the same pipeline took over. Nothing
// this producer wrote since is visible to read_committed readers, and it
// must stop: it cannot know what the new one has published.
var ErrFenced error = &sentinel{"kafka: fenced by a newer producer with the same transactional id (another relay of this pipeline took over)", true}

// ErrTxnTimedOut means the broker aborted the open transaction because it
// stayed open longer than Config.TransactionTimeout (a long broker outage,
// a frozen process): the producer's epoch was bumped, as by a fence. What
// the transaction held is not visible; a new session sends it again.
var ErrTxnTimedOut error = &sentinel{"kafka: the transaction stayed open past the transaction timeout and the broker aborted it", false}

// Txn is a transactional producer's transactions (Config.TransactionalID).
type Txn struct {
	c        *client
	producer *Kafka // its Flush
	id       string
	timeout  time.Duration
	began    atomic.Int64 // unix nanoseconds of the open transaction's first Produce; 0 before it
	// endSent is whether the open transaction's EndTxn was sent; for
	// ProbeFailed.
	endSent atomic.Bool
	book    *txnBook
	settle  *settler
	// cannotAsk: the coordinator refused to describe the transactional
	// id for good (Kafka before 3.0, no DESCRIBE on it); Settled no
	// longer asks.
	cannotAsk atomic.Bool
}

// fenced tells the broker's answers that mean the producer's epoch is
// stale: another producer took the transactional id over, or the broker
// aborted a transaction that outlived its timeout.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// Fenced tells an error that says another producer took the transactional
// id over.
func Fenced(err error) bool { return errors.Is(err, ErrFenced) }

// Classify names a transactional producer's failure: ErrFenced when
// another producer took the id over, ErrTxnTimedOut when the open
// transaction is old enough for the broker to have aborted it (the broker
// answers both the same way; a transaction younger than nine tenths of the
// timeout cannot have timed out, nor can one that produced nothing yet).
// Other errors are returned as they are.
func (t *Txn) Classify(err error) error {
	if err == nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrTxnTimedOut) {
		return err
	}
	began := t.began.Load()
	old := began != 0 && time.Since(time.Unix(0, began)) >= t.timeout*9/10
	switch {
	case old && (fenced(err) || errors.Is(err, kerr.InvalidTxnState)):
		// A commit after the broker's abort is also told it is in the
		// wrong state.
		return fmt.Errorf("%w: %w", ErrTxnTimedOut, err)
	case fenced(err):
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

func (t *Txn) txnErr(op string, err error) error {
	if c := t.Classify(err); c != err {
		return fmt.Errorf("%w (%s)", c, op)
	}
	return fmt.Errorf("kafka transaction: %s: %w", op, err)
}

// Fence initialises the producer's id with the broker. The broker aborts
// what an earlier producer with the same transactional id left open and
// refuses that producer from now on. Call it once per client (after New
// or Renew), before anything reads what earlier producers committed.
//
// Before that, ranges of this id left open on partitions whose coordinator
// moved on are ended (hanging.go): the fence's abort would otherwise take
// committed records with it.
func (t *Txn) Fence(ctx context.Context) error {
	if err := t.settle.sweep(ctx, true, true); err != nil {
		return err
	}
	id, epoch, err := t.c.load().ProducerID(ctx)
	if err != nil {
		return t.txnErr("init producer id", err)
	}
	t.book.owner.Store(&producerEpoch{id, epoch})
	return nil
}

// producerEpoch is a producer id and epoch.
type producerEpoch struct {
	id    int64
	epoch int16
}

// Begin starts a transaction.
func (t *Txn) Begin() error {
	if err := t.c.load().BeginTransaction(); err != nil {
		return t.txnErr("begin", err)
	}
	t.began.Store(0) // set by the transaction's first Produce
	t.endSent.Store(false)
	return nil
}

// Commit waits for every record of the transaction to be acked, asks
// check whether all of them were (franz-go would commit what succeeded),
// and commits. On any error the outcome may be unknown; the producer must
// not be used again (see above).
func (t *Txn) Commit(ctx context.Context, check func() error) error {
	if err := t.producer.Flush(ctx); err != nil {
		return t.txnErr("flush", err)
	}
	if err := check(); err != nil {
		return err
	}
	t.settle.settleBeforeEnd(ctx)
	t.endSent.Store(true)
	cl := t.c.load()
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return t.txnErr("commit", err)
	}
	if owner := t.book.owner.Load(); owner != nil {
		t.book.ended(owner.id, owner.epoch, true)
	}
	t.began.Store(0) // nothing open until the next transaction's first record
	// Sound after a commit: no request, the epoch the commit left.
	if id, epoch, err := cl.ProducerID(ctx); err == nil {
		t.book.owner.Store(&producerEpoch{id, epoch})
	}
	return nil
}

// Settled asks the transaction coordinator whether the producer's last
// commit is complete: its markers written to every partition. Until then
// Apache Kafka 4.x (transaction version 2) holds the next transaction's
// first record for add.partitions.to.txn.retry.backoff.ms (20 ms by
// default) before it retries adding its partition. ok is false when the
// coordinator cannot tell: a broker that does not describe transactions
// (before 3.0), a principal without DESCRIBE on the id, a lost answer.
func (t *Txn) Settled(ctx context.Context) (settled, ok bool) {
	if t.cannotAsk.Load() {
		return false, false
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{t.id}
	resp, err := req.RequestWith(ctx, t.c.load())
	if err == nil && len(resp.TransactionStates) != 1 {
		err = errors.New("no state in the answer")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.TransactionStates[0].ErrorCode)
	}
	if err != nil {
		if errors.Is(err, kerr.UnsupportedVersion) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			t.cannotAsk.Store(true)
		}
		return false, false
	}
	switch resp.TransactionStates[0].State {
	case "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return false, true
	}
	return true, true
}

// Abort aborts the open transaction. Call it only when nothing of the
// transaction failed and no Commit failed (see above), after Flush: then
// the producer's id is sound, and the abort either ends the transaction
// or answers that this producer was fenced (ErrFenced), without
// re-initialising anything.
func (t *Txn) Abort(ctx context.Context) error {
	t.settle.settleBeforeEnd(ctx)
	if err := t.c.load().EndTransaction(ctx, kgo.TryAbort); err != nil {
		return t.txnErr("abort", err)
	}
	if owner := t.book.owner.Load(); owner != nil {
		t.book.ended(owner.id, owner.epoch, false)
	}
	t.began.Store(0)
	return nil
}

// HoldsRecords tells whether the current transaction holds records that were
// neither committed nor aborted by this producer.
func (t *Txn) HoldsRecords() bool { return t.began.Load() != 0 }

// Unsent returns the producer id and epoch of the current transaction
// when it holds records and its EndTxn was never sent: nobody can commit
// it but this producer, which is not used again after a failure (see
// above). ok is false otherwise.
func (t *Txn) Unsent() (id int64, epoch int16, ok bool) {
	owner := t.book.owner.Load()
	if owner == nil || t.began.Load() == 0 || t.endSent.Load() {
		return 0, 0, false
	}
	return owner.id, owner.epoch, true
}

// Unended records that the transaction of producer id and epoch was left
// open with no EndTxn sent (Unsent), by this process or another: if it
// stays open after a fence, LastCommitted aborts it.
func (t *Txn) Unended(id int64, epoch int16) { t.book.leftOpen(id, epoch) }

// Probe asks the transaction coordinator whether this producer still owns
// its transactional id. It adds a consumer group of the id's own
// ("<id>.probe", never committed to) to a transaction: the coordinator
// checks the producer's epoch strictly for that, and answers a stale one
// with PRODUCER_FENCED. (An EndTxn is not strict enough: since KIP-890 a
// coordinator takes an EndTxn whose epoch is one behind, while the
// producer that took over is between transactions, for a retry of the
// last one, and answers it with success.) When the producer is still the
// owner, the transaction this opened is aborted again. It returns
// ErrFenced when another producer took the id over, nil when it did not,
// another error when it cannot tell (the group not authorised, say). The
// client must not be used for transactions afterwards (the abort bumps
// the epoch behind its back): call Renew first. Same precondition as
// Abort.
func (t *Txn) Probe(ctx context.Context) error {
	cl := t.c.load()
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return t.txnErr("producer id", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = t.id, id, epoch, t.id+".probe"
	resp, err := add.RequestWith(ctx, cl)
	if err != nil {
		return t.txnErr("probe", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return t.txnErr("probe", err)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = t.id, id, epoch, false
	eresp, err := end.RequestWith(ctx, cl)
	if err != nil {
		return t.txnErr("probe: abort", err)
	}
	if err := kerr.ErrorForCode(eresp.ErrorCode); err != nil {
		return t.txnErr("probe: abort", err)
	}
	return nil
}

// ProbeFailed is Probe for a producer whose transaction failed before its
// EndTxn was sent (a flush cut short, a record that failed), which must not
// be used again: it asks with the producer id and epoch last known to own
// the transactional id, by requests of its own that leave the producer's
// state alone. It returns ErrFenced when another producer took the id
// over, nil when it cannot tell or the id is still this producer's (the
// transaction this opened is then left to the next Fence, or to the
// broker's timeout).
func (t *Txn) ProbeFailed(ctx context.Context) error {
	owner := t.book.owner.Load()
	if owner == nil || t.endSent.Load() {
		return nil // the EndTxn may have moved the epoch: cannot tell
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = t.id, owner.id, owner.epoch, t.id+".probe"
	resp, err := add.RequestWith(ctx, t.c.load())
	if err != nil {
		return nil
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); fenced(err) {
		return t.txnErr("probe", err)
	}
	return nil
}

// firstRecord is called before each record is produced: at a
// transaction's first, no record may join a range a failed broker left
// open. One goroutine produces.
func (t *Txn) firstRecord(ctx context.Context) error {
	if t.began.Load() != 0 {
		return nil
	}
	if err := t.settle.settleAfterFailure(ctx); err != nil {
		return err
	}
	t.began.Store(time.Now().UnixNano())
	return nil
}
