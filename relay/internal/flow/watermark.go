package flow

import (
	"sync"

	"github.com/jackc/pglogrepl"
)

// Txn is one transaction in flight: its records not yet acked, and its
// commit end LSN once the commit was read.
type Txn struct {
	xid       uint32 // as the WAL names it; 0 for a position alone
	pending   int
	end       pglogrepl.LSN
	committed bool
}

// Watermark computes the position that may be confirmed: the commit end
// LSN of the newest transaction that, with every transaction before it,
// has all of its records acked. Acks arrive out of order across
// partitions, so it advances only over a completed prefix, never to the
// newest ack.
type Watermark struct {
	mu        sync.Mutex
	queue     []*Txn // in commit order; queue[0] is the oldest unconfirmed
	acked     pglogrepl.LSN
	err       error
	onAdvance func(pglogrepl.LSN)
	// done, if set, gets each transaction's id once all its records are
	// acked, in commit order.
	done func(xid uint32)
}

// NewWatermark is a watermark that starts at start and tells onAdvance
// each position it moves to, and done (if set) each transaction's id once
// all its records are acked, in commit order.
func NewWatermark(start pglogrepl.LSN, onAdvance func(pglogrepl.LSN), done func(xid uint32)) *Watermark {
	return &Watermark{acked: start, onAdvance: onAdvance, done: done}
}

// Begin opens transaction xid; records are added to it as they are
// produced.
func (w *Watermark) Begin(xid uint32) *Txn {
	t := &Txn{xid: xid}
	w.mu.Lock()
	w.queue = append(w.queue, t)
	w.mu.Unlock()
	return t
}

// Add counts one more record of t in flight.
func (w *Watermark) Add(t *Txn) {
	w.mu.Lock()
	t.pending++
	w.mu.Unlock()
}

// Commit marks t complete at its commit end LSN.
func (w *Watermark) Commit(t *Txn, end pglogrepl.LSN) {
	w.mu.Lock()
	t.committed, t.end = true, end
	w.advance()
	w.mu.Unlock()
}

// Mark records a position with nothing to publish (an empty transaction or
// a heartbeat): it is confirmed once everything before it is.
func (w *Watermark) Mark(lsn pglogrepl.LSN) {
	w.mu.Lock()
	w.queue = append(w.queue, &Txn{committed: true, end: lsn})
	w.advance()
	w.mu.Unlock()
}

// Ack records one record of t as acked, or failed. After a failure the
// watermark never moves again: nothing after the failed record may be
// confirmed, and the pipeline stops.
func (w *Watermark) Ack(t *Txn, err error) {
	w.mu.Lock()
	t.pending--
	if err != nil && w.err == nil {
		w.err = err
	}
	w.advance()
	w.mu.Unlock()
}

// Failed returns the first delivery error, if any.
func (w *Watermark) Failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Position returns the confirmable position and how many transactions
// wait.
func (w *Watermark) Position() (pglogrepl.LSN, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, len(w.queue)
}

func (w *Watermark) advance() {
	if w.err != nil {
		return
	}
	n := 0
	for n < len(w.queue) && w.queue[n].committed && w.queue[n].pending == 0 {
		if w.queue[n].end > w.acked {
			w.acked = w.queue[n].end
		}
		if x := w.queue[n].xid; x != 0 && w.done != nil {
			w.done(x)
		}
		n++
	}
	if n == 0 {
		return
	}
	clear(w.queue[:n])
	w.queue = w.queue[n:]
	if w.onAdvance != nil {
		w.onAdvance(w.acked)
	}
}
