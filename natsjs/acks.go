package natsjs

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pending is a message waiting for its ack; fut is nil for a record that
// was not published (a tombstone), whose promise runs in its turn.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
	fut     jetstream.PubAckFuture
}

// acker takes one connection's acks in the order the messages were
// published and runs their promises in that order, so that a promise
// never runs ahead of an earlier message's: at most MaxPending wait.
type acker struct {
	slots chan struct{}
	queue chan pending
	// failed is told of each failure, before its promise runs.
	failed func(error)
	stop   chan struct{} // closed by close: what waits fails
	done   chan struct{} // closed when run returns

	mu    sync.Mutex
	n     int             // handed over, promise not yet run
	idles []chan struct{} // Flush's waits, closed when n is 0
}

func newAcker(max int, failed func(error)) *acker {
	a := &acker{slots: make(chan struct{}, max), queue: make(chan pending, max), failed: failed,
		stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

// acquire takes a slot for a message, waiting while MaxPending wait.
func (a *acker) acquire(ctx context.Context) error {
	select {
	case a.slots <- struct{}{}:
		a.mu.Lock()
		a.n++
		a.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-a.stop:
		return errClosed
	}
}

// release gives a slot back, after its promise ran or its message was not
// published after all.
func (a *acker) release() {
	<-a.slots
	a.mu.Lock()
	a.n--
	if a.n == 0 {
		for _, c := range a.idles {
			close(c)
		}
		a.idles = nil
	}
	a.mu.Unlock()
}

// push hands over a message that holds a slot.
func (a *acker) push(p pending) { a.queue <- p }

func (a *acker) run() {
	defer close(a.done)
	for {
		select {
		case p := <-a.queue:
			a.settle(p)
		case <-a.stop:
			for {
				select {
				case p := <-a.queue:
					a.finish(p, errClosed)
				default:
					return
				}
			}
		}
	}
}

// settle waits for p's ack or failure and runs its promise.
func (a *acker) settle(p pending) {
	if p.fut == nil {
		a.finish(p, nil)
		return
	}
	var err error
	select {
	case <-p.fut.Ok():
	case err = <-p.fut.Err():
	case <-a.stop:
		err = errClosed
	}
	a.finish(p, err)
}

func (a *acker) finish(p pending, err error) {
	if err != nil {
		a.failed(err)
	}
	p.promise(p.rec, err)
	a.release()
}

// pending is how many messages wait for their ack.
func (a *acker) pending() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(a.n)
}

// flush waits until no message waits for its ack.
func (a *acker) flush(ctx context.Context) error {
	a.mu.Lock()
	if a.n == 0 {
		a.mu.Unlock()
		return nil
	}
	idle := make(chan struct{})
	a.idles = append(a.idles, idle)
	a.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close fails what still waits and stops the goroutine; call it only while
// nothing is produced.
func (a *acker) close() {
	close(a.stop)
	<-a.done
}
