package inflight

import (
	"context"
	"sync"
	"sync/atomic"
)

// Conn is one connection of a publisher, with the messages it has in
// flight.
type Conn interface {
	// Failed tells a connection on which a message failed: nothing more
	// is published on it, and Resume replaces it.
	Failed() bool
	// Lost tells a connection that ended with nothing failed on it (an
	// idle connection dropped): the next message connects again.
	Lost() bool
	// Len is how many messages wait for their outcome.
	Len() int64
	// Wait waits until none does.
	Wait(ctx context.Context) error
	// Close fails what waits and closes the connection.
	Close()
}

// Link holds a publisher's one connection (a *T) between the sessions of
// a relay, and the halt a failed message's promise asks for
// (AbortBuffered): the part of relay's Sink that does not depend on the
// broker. One goroutine produces; the others only read.
type Link[T any, PT interface {
	*T
	Conn
}] struct {
	mu     sync.Mutex // connecting, replacing and closing the connection
	conn   atomic.Pointer[T]
	halted atomic.Bool // set by AbortBuffered, cleared by Resume and Renew
}

// Load is the connection, nil when there is none.
func (l *Link[T, PT]) Load() *T { return l.conn.Load() }

// Halted tells a link AbortBuffered halted, before Resume or Renew.
func (l *Link[T, PT]) Halted() bool { return l.halted.Load() }

// Connect returns the connection, dialling one first when there is none
// or the last one was lost with nothing failed on it.
func (l *Link[T, PT]) Connect(ctx context.Context, dial func(context.Context) (*T, error)) (*T, error) {
	usable := func(c *T) bool { return c != nil && (PT(c).Failed() || !PT(c).Lost()) }
	if c := l.conn.Load(); usable(c) {
		return c, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.conn.Load(); c != nil {
		if usable(c) {
			return c, nil
		}
		PT(c).Close()
		l.conn.Store(nil)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	l.conn.Store(c)
	return c, nil
}

// AbortBuffered stops publishing until Resume or Renew; what was
// published already gets its outcome as it comes.
func (l *Link[T, PT]) AbortBuffered() { l.halted.Store(true) }

// Resume lets records through again, after AbortBuffered or a failed
// message. A connection on which a message failed is replaced: the next
// record connects again. Call it only while nothing is produced.
func (l *Link[T, PT]) Resume() {
	l.halted.Store(false)
	if c := l.conn.Load(); c != nil && PT(c).Failed() {
		_ = l.Renew()
	}
}

// Flush waits until every message has its outcome.
func (l *Link[T, PT]) Flush(ctx context.Context) error {
	c := l.conn.Load()
	if c == nil {
		return nil
	}
	return PT(c).Wait(ctx)
}

// Buffered is how many messages wait for their outcome.
func (l *Link[T, PT]) Buffered() int64 {
	if c := l.conn.Load(); c != nil {
		return PT(c).Len()
	}
	return 0
}

// Renew closes the connection, failing what still waits for its outcome;
// the next record connects again. Call it only while nothing is produced.
func (l *Link[T, PT]) Renew() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.conn.Swap(nil); c != nil {
		PT(c).Close()
	}
	l.halted.Store(false)
	return nil
}

// Close fails what still waits and closes the connection.
func (l *Link[T, PT]) Close() { _ = l.Renew() }
