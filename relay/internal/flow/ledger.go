package flow

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
)

// Entry is a row's place in its ledger: its transaction (WAL) or its index
// in the batch (poll). The zero Entry is a ledger's that needs none.
type Entry struct {
	tx *Txn
	i  int
}

// WALLedger confirms through a Watermark: a transaction's records are
// counted as they are produced, its commit closes it, and the watermark
// confirms its commit LSN once it and every transaction before it are
// acked. A failure stops the watermark for good. Rows published before
// are skipped: those the poll phase before the session published, and
// those below the saved floor.
type WALLedger struct {
	wm *Watermark
	tx *Txn // the transaction being read; nil between transactions
	// polled are the rows the poll phase before this session published;
	// the stream replays them until it passes their end.
	polled *Polled
	order  string // the column polling marks rows by
	// floor is the saved floor's transaction id, read at the session's
	// start (0: none). Every transaction below it is in Kafka: the floor
	// is saved once the confirmed position passed it. The stream replays
	// from the slot's confirmed position, which can be older: PostgreSQL
	// 15 and 16 write it to disk only when other fields of the slot
	// change (a crash replays from there), and the server learns it a
	// status interval after the floor was saved. Those rows are not sent
	// again.
	floor   uint32
	skipped Skipped
}

// Skipped counts the rows a ledger did not send again, by why.
type Skipped struct {
	// Polled: a poll phase published them. BelowFloor: the WAL published
	// them below the saved floor. Committed: a committed Kafka
	// transaction has them (exactly-once).
	Polled, BelowFloor, Committed *atomic.Int64
}

// NewWALLedger is the ledger of a WAL session that confirms through wm;
// polled, order and floor tell the rows it skips, which it counts in
// skipped.
func NewWALLedger(wm *Watermark, polled *Polled, order string, floor uint32, skipped Skipped) *WALLedger {
	return &WALLedger{wm: wm, polled: polled, order: order, floor: floor, skipped: skipped}
}

// Skip tells a row that was published before and is not sent again.
func (l *WALLedger) Skip(c *outbox.Change) bool {
	// A non-transactional message's row has no transaction id (0): the
	// floor says nothing of it.
	if l.floor != 0 && c.XID != 0 && XIDBefore(c.XID, l.floor) {
		l.skipped.BelowFloor.Add(1)
		return true
	}
	set := l.polled.of(c)
	if len(set) == 0 || !c.Inserted() {
		// Polling read inserts only: an update or a delete (a change
		// event's) is none of its rows.
		return false
	}
	if seq, ok := SeqOf(c.Relation, c.Values, l.order); ok && set.Take(seq) {
		l.skipped.Polled.Add(1)
		return true
	}
	return false
}

// Produce counts a row of the transaction being read in flight.
func (l *WALLedger) Produce(_ int, c *outbox.Change) Entry {
	if l.tx == nil {
		l.tx = l.wm.Begin(c.XID)
	}
	l.wm.Add(l.tx)
	return Entry{tx: l.tx}
}

// Ack takes a row's ack or failure.
func (l *WALLedger) Ack(e Entry, err error) { l.wm.Ack(e.tx, err) }

// Boundary closes the transaction at its commit, or marks a position with
// nothing to publish.
func (l *WALLedger) Boundary(c *outbox.Change) {
	if c.Kind == outbox.KindCommit && l.polled.passed(c.LSN) {
		l.polled.Forget() // the stream is past what polling published
	}
	if c.Kind != outbox.KindCommit || l.tx == nil {
		l.wm.Mark(c.LSN)
		return
	}
	l.wm.Commit(l.tx, c.LSN)
	l.tx = nil
}

// Where names a row in an error by its LSN.
func (l *WALLedger) Where(_ int, c *outbox.Change, err error) error {
	return fmt.Errorf("row at %s: %w", c.LSN, err)
}

// PollLedger is one polled batch's: which rows were acked, and the first
// failure. A batch is produced whole; its failures are reported once all
// of it is acked or failed.
type PollLedger struct {
	rows  []poll.Row
	wg    sync.WaitGroup
	acked []bool // each promise writes its own slot
	mu    sync.Mutex
	err   error
}

// NewPollLedger is the ledger of the batch rows.
func NewPollLedger(rows []poll.Row) *PollLedger {
	return &PollLedger{rows: rows, acked: make([]bool, len(rows))}
}

// Skip skips nothing: a poll reads only unpublished rows.
func (l *PollLedger) Skip(*outbox.Change) bool { return false }

// Produce counts the i-th row of the batch in flight.
func (l *PollLedger) Produce(i int, _ *outbox.Change) Entry {
	l.wg.Add(1)
	return Entry{i: i}
}

// Ack takes a row's ack or failure.
func (l *PollLedger) Ack(e Entry, err error) {
	if err != nil {
		l.Fail(err)
	} else {
		l.acked[e.i] = true
	}
	l.wg.Done()
}

// Boundary: a batch has none.
func (l *PollLedger) Boundary(*outbox.Change) {}

// Where names the i-th row of the batch in an error by its order value.
func (l *PollLedger) Where(i int, _ *outbox.Change, err error) error {
	return fmt.Errorf("row seq %d: %w", l.rows[i].Seq, err)
}

// Fail records a failure of the batch, the first one kept.
func (l *PollLedger) Fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
}

// Failed is the batch's first failure; call it after the wait.
func (l *PollLedger) Failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Settled is closed once every produced row is acked or failed: when the
// last promise has run, by an ack, a failure, or the client's close after
// an abandoned wait.
func (l *PollLedger) Settled() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	return done
}

// AckedSeqs are the seqs of exactly the acked rows, in batch order; call
// it after the wait. A failed record fails the later records of its
// partition with it, so no later event of its aggregate is among them.
func (l *PollLedger) AckedSeqs() []int64 {
	seqs := make([]int64, 0, len(l.rows))
	for i, ok := range l.acked {
		if ok {
			seqs = append(seqs, l.rows[i].Seq)
		}
	}
	return seqs
}
