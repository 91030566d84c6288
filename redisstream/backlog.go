package redisstream

import (
	"context"
	"sync"
)

// backlog counts the records handed over whose promise has not run yet,
// at most MaxPending, and lets Flush wait until there are none.
type backlog struct {
	slots chan struct{}

	mu    sync.Mutex
	n     int             // handed over, promise not yet run
	idles []chan struct{} // waits, closed when n is 0
}

func newBacklog(max int) *backlog { return &backlog{slots: make(chan struct{}, max)} }

// acquire takes a place for one record, waiting while MaxPending records
// hold theirs, until ctx ends or closed is closed (errClosed).
func (b *backlog) acquire(ctx context.Context, closed <-chan struct{}) error {
	select {
	case b.slots <- struct{}{}:
		b.mu.Lock()
		b.n++
		b.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return errClosed
	}
}

// release gives a record's place back, once its promise ran.
func (b *backlog) release() {
	<-b.slots
	b.mu.Lock()
	b.n--
	if b.n == 0 {
		for _, c := range b.idles {
			close(c)
		}
		b.idles = nil
	}
	b.mu.Unlock()
}

func (b *backlog) count() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(b.n)
}

// wait returns once no record holds a place, or ctx ended.
func (b *backlog) wait(ctx context.Context) error {
	b.mu.Lock()
	if b.n == 0 {
		b.mu.Unlock()
		return nil
	}
	idle := make(chan struct{})
	b.idles = append(b.idles, idle)
	b.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
