// Package inflight keeps a publisher's messages in flight in the order
// they were published: at most a bound of them, each settled (its outcome
// taken, its promise run) on one goroutine in that order, so that no
// promise runs ahead of an earlier message's; and a wait until none is
// left; and a publisher's one connection between sessions (link.go). The
// brokers without Kafka's client (natsjs, rabbitmq, rabbitstream, webhook) share
// them; how a message's outcome is taken is theirs.
package inflight

import (
	"context"
	"errors"
	"sync"
)

// ErrStopped is Acquire's answer once the queue is closed.
var ErrStopped = errors.New("inflight: the queue is closed")

// Queue holds the messages of type T in flight. One goroutine hands them
// over (Acquire, then Push or Release); the queue's own settles them.
type Queue[T any] struct {
	slots  chan struct{}
	items  chan T
	settle func(items []T, stop <-chan struct{})
	batch  int // the most items settle takes at once
	drop   func(item T)
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when run returns

	mu    sync.Mutex
	n     int             // acquired, not yet released
	idles []chan struct{} // Wait's, closed when n is 0
}

// New starts a queue of at most max messages. settle takes an item's
// outcome and runs its promise, giving up when stop is closed; drop runs
// the promise of an item still queued when the queue closes. Both run on
// the queue's goroutine, in the order the items were pushed.
func New[T any](max int, settle func(item T, stop <-chan struct{}), drop func(item T)) *Queue[T] {
	return NewBatched(max, 1, func(items []T, stop <-chan struct{}) { settle(items[0], stop) }, drop)
}

// NewBatched starts a queue whose settle takes every item waiting, at
// most batch of them, in push order: for a broker whose one request
// carries several messages. An item waits only while the items before it
// are settled, never for more to come.
func NewBatched[T any](bound, batch int, settle func(items []T, stop <-chan struct{}), drop func(item T)) *Queue[T] {
	q := &Queue[T]{slots: make(chan struct{}, bound), items: make(chan T, bound), settle: settle, batch: max(batch, 1), drop: drop,
		stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// Acquire takes a place for a message, waiting while max are in flight;
// ErrStopped once the queue is closed, whose goroutine would never settle
// the message.
func (q *Queue[T]) Acquire(ctx context.Context) error {
	select {
	case q.slots <- struct{}{}:
		// A select picks at random among ready cases: a free place must
		// not win over a close.
		select {
		case <-q.stop:
			<-q.slots
			return ErrStopped
		default:
		}
		q.mu.Lock()
		q.n++
		q.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-q.stop:
		return ErrStopped
	}
}

// Release gives a place back: for a message that was not published after
// all; the queue releases those it settles.
func (q *Queue[T]) Release() {
	<-q.slots
	q.mu.Lock()
	q.n--
	if q.n == 0 {
		for _, c := range q.idles {
			close(c)
		}
		q.idles = nil
	}
	q.mu.Unlock()
}

// Push hands over a published message that holds a place.
func (q *Queue[T]) Push(item T) { q.items <- item }

func (q *Queue[T]) run() {
	defer close(q.done)
	items := make([]T, 0, q.batch)
	for {
		select {
		case item := <-q.items:
			items = append(items[:0], item)
		more:
			for len(items) < q.batch {
				select {
				case item := <-q.items:
					items = append(items, item)
				default:
					break more
				}
			}
			q.settle(items, q.stop)
			clear(items)
			for range items {
				q.Release()
			}
		case <-q.stop:
			for {
				select {
				case item := <-q.items:
					q.drop(item)
					q.Release()
				default:
					return
				}
			}
		}
	}
}

// Len is how many messages are in flight.
func (q *Queue[T]) Len() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(q.n)
}

// Wait waits until no message is in flight.
func (q *Queue[T]) Wait(ctx context.Context) error {
	q.mu.Lock()
	if q.n == 0 {
		q.mu.Unlock()
		return nil
	}
	idle := make(chan struct{})
	q.idles = append(q.idles, idle)
	q.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close fails what is still in flight (settle sees stop closed, drop
// runs for what was not settled) and stops the goroutine; call it only
// while nothing is handed over.
func (q *Queue[T]) Close() {
	close(q.stop)
	<-q.done
}
