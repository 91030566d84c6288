package inflight

import (
	"context"
	"errors"
	"sync/atomic"
)

// BatchConn is one session's messages of a broker written with a Batch
// (Kinesis, SQS, Pub/Sub): the queue they wait in, and the failure after
// which nothing more is sent until the Link replaces it. It is the Conn a
// Link of such a broker holds.
type BatchConn[T any] struct {
	acks   *Queue[T]
	b      Batch[T]
	closed error
	after  error
	broken atomic.Bool // a request failed: Send refuses until Resume or Renew
	failed bool        // the queue goroutine's copy of broken
}

// NewBatchConn starts a session's queue of at most max messages, settled
// at most batch at a time by b (whose Failed it sets). A message still
// queued when it closes gets closed; one after a failed request, after.
func NewBatchConn[T any](max, batch int, b Batch[T], closed, after error) *BatchConn[T] {
	c := &BatchConn[T]{b: b, closed: closed, after: after}
	c.b.Failed = func() {
		c.failed = true
		c.broken.Store(true)
	}
	c.acks = NewBatched(max, batch, c.settle, func(m T) { b.Promise(m, closed) })
	return c
}

// Send queues m, waiting while max wait, until ctx ends; halted after a
// failed request, closed once the queue is.
func (c *BatchConn[T]) Send(ctx context.Context, m T, halted error) error {
	if c.broken.Load() {
		return halted
	}
	if err := c.acks.Acquire(ctx); err != nil {
		if errors.Is(err, ErrStopped) {
			return c.closed
		}
		return err
	}
	c.acks.Push(m)
	return nil
}

// settle writes items on the queue's goroutine, giving up when stop is
// closed.
func (c *BatchConn[T]) settle(items []T, stop <-chan struct{}) {
	if c.failed {
		for _, m := range items {
			c.b.Promise(m, c.after)
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c.b.Settle(ctx, items, c.after)
}

// Failed tells a session on which a request failed.
func (c *BatchConn[T]) Failed() bool { return c.broken.Load() }

// Lost is never: the queue does not end on its own.
func (c *BatchConn[T]) Lost() bool { return false }

// Len is how many messages wait.
func (c *BatchConn[T]) Len() int64 { return c.acks.Len() }

// Wait waits until none does.
func (c *BatchConn[T]) Wait(ctx context.Context) error { return c.acks.Wait(ctx) }

// Close fails what waits.
func (c *BatchConn[T]) Close() { c.acks.Close() }
