package rabbitmq

import (
	"context"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pending is a published message waiting for its confirm.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
	dc      *amqp.DeferredConfirmation
	id      string // its message-id, which a return names it by
	sent    time.Time
}

// acker takes one channel's confirms in the order the messages were
// published and runs their promises in that order, so that a promise
// never runs ahead of an earlier message's: at most MaxPending wait. After
// a message failed, every later one of the channel fails too.
type acker struct {
	slots   chan struct{}
	queue   chan pending
	timeout time.Duration
	returns <-chan amqp.Return
	closed  <-chan *amqp.Error
	// failed is told of the first failure, before its promise runs.
	failed func(error)
	stop   chan struct{} // closed by close: what waits fails
	done   chan struct{} // closed when run returns

	mu    sync.Mutex
	n     int             // handed over, promise not yet run
	idles []chan struct{} // flush's waits, closed when n is 0

	// The run goroutine's own.
	returned  map[string]amqp.Return // by message-id, not yet settled
	anonymous *amqp.Return           // a return without a message-id
	closeErr  *amqp.Error            // why the channel closed
	broken    bool                   // a message failed
}

func newAcker(max int, timeout time.Duration, returns <-chan amqp.Return, closed <-chan *amqp.Error, failed func(error)) *acker {
	a := &acker{slots: make(chan struct{}, max), queue: make(chan pending, max), timeout: timeout,
		returns: returns, closed: closed, failed: failed,
		stop: make(chan struct{}), done: make(chan struct{}), returned: map[string]amqp.Return{}}
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

// push hands over a published message that holds a slot.
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

// settle waits for p's confirm, its timeout or the acker's stop, and runs
// its promise with the outcome.
func (a *acker) settle(p pending) {
	if a.broken {
		a.finish(p, errAfterFailure)
		return
	}
	timer := time.NewTimer(a.timeout - time.Since(p.sent))
	defer timer.Stop()
	var err error
	select {
	case <-p.dc.Done():
		err = a.outcome(p)
	case <-timer.C:
		err = &TimeoutError{After: a.timeout.String()}
	case <-a.stop:
		err = errClosed
	}
	a.finish(p, err)
}

// outcome is a confirmed message's result. The broker sends a message's
// return before its confirm, and the client hands returns over before it
// resolves the confirm: a return of p is among those waiting now.
func (a *acker) outcome(p pending) error {
	a.takeReturns()
	if r, ok := a.returned[p.id]; ok && p.id != "" {
		delete(a.returned, p.id)
		return &ReturnedError{Exchange: r.Exchange, RoutingKey: r.RoutingKey, Code: r.ReplyCode, Text: r.ReplyText}
	}
	if r := a.anonymous; r != nil {
		// Whose it is cannot be told: p's or a later one's, all of which
		// fail after p.
		return &ReturnedError{Exchange: r.Exchange, RoutingKey: r.RoutingKey, Code: r.ReplyCode, Text: r.ReplyText}
	}
	if p.dc.Acked() {
		return nil
	}
	select {
	case e, ok := <-a.closed:
		if ok && e != nil {
			a.closeErr = e
		}
	default:
	}
	if a.closeErr != nil {
		return &NackError{Reason: a.closeErr}
	}
	return &NackError{}
}

// takeReturns moves the returns handed over so far into returned.
func (a *acker) takeReturns() {
	for {
		select {
		case r, ok := <-a.returns:
			if !ok {
				return
			}
			if r.MessageId == "" {
				a.anonymous = &r
				continue
			}
			a.returned[r.MessageId] = r
		default:
			return
		}
	}
}

func (a *acker) finish(p pending, err error) {
	if err != nil && !a.broken {
		a.broken = true
		a.failed(err)
	}
	p.promise(p.rec, err)
	a.release()
}

// pending is how many messages wait for their confirm.
func (a *acker) pending() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(a.n)
}

// flush waits until no message waits for its confirm.
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
