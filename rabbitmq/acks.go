package rabbitmq

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// pending is a published message waiting for its confirm.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
	dc      *amqp.DeferredConfirmation
	id      string // its message-id, which a return names it by
	sent    time.Time
}

// confirms takes one channel's confirms and returns in the order the
// messages were published (an inflight.Queue settles them one at a time),
// so that a promise never runs ahead of an earlier message's. After a
// message failed, every later one of the channel fails too.
type confirms struct {
	*inflight.Queue[pending]
	timeout time.Duration
	returns <-chan amqp.Return
	closed  <-chan *amqp.Error
	// failed is told of the first failure, before its promise runs.
	failed func(error)

	// The queue's goroutine's own.
	returned  map[string]amqp.Return // by message-id, not yet settled
	anonymous *amqp.Return           // a return without a message-id
	closeErr  *amqp.Error            // why the channel closed
	broken    bool                   // a message failed
}

func newConfirms(max int, timeout time.Duration, returns <-chan amqp.Return, closed <-chan *amqp.Error, failed func(error)) *confirms {
	c := &confirms{timeout: timeout, returns: returns, closed: closed, failed: failed, returned: map[string]amqp.Return{}}
	c.Queue = inflight.New(max, c.settle, func(p pending) { c.finish(p, errClosed) })
	return c
}

// settle waits for p's confirm, its timeout or the queue's stop, and runs
// its promise with the outcome.
func (c *confirms) settle(p pending, stop <-chan struct{}) {
	if c.broken {
		c.finish(p, errAfterFailure)
		return
	}
	timer := time.NewTimer(c.timeout - time.Since(p.sent))
	defer timer.Stop()
	var err error
	select {
	case <-p.dc.Done():
		err = c.outcome(p)
	case <-timer.C:
		err = &TimeoutError{After: c.timeout.String()}
	case <-stop:
		err = errClosed
	}
	c.finish(p, err)
}

// outcome is a confirmed message's result. The broker sends a message's
// return before its confirm, and the client hands returns over before it
// resolves the confirm: a return of p is among those waiting now.
func (c *confirms) outcome(p pending) error {
	c.takeReturns()
	if r, ok := c.returned[p.id]; ok && p.id != "" {
		delete(c.returned, p.id)
		return &ReturnedError{Exchange: r.Exchange, RoutingKey: r.RoutingKey, Code: r.ReplyCode, Text: r.ReplyText}
	}
	if r := c.anonymous; r != nil {
		// Whose it is cannot be told: p's or a later one's, all of which
		// fail after p.
		return &ReturnedError{Exchange: r.Exchange, RoutingKey: r.RoutingKey, Code: r.ReplyCode, Text: r.ReplyText}
	}
	if p.dc.Acked() {
		return nil
	}
	select {
	case e, ok := <-c.closed:
		if ok && e != nil {
			c.closeErr = e
		}
	default:
	}
	if c.closeErr != nil {
		return &NackError{Reason: c.closeErr}
	}
	return &NackError{}
}

// takeReturns moves the returns handed over so far into returned.
func (c *confirms) takeReturns() {
	for {
		select {
		case r, ok := <-c.returns:
			if !ok {
				return
			}
			if r.MessageId == "" {
				c.anonymous = &r
				continue
			}
			c.returned[r.MessageId] = r
		default:
			return
		}
	}
}

func (c *confirms) finish(p pending, err error) {
	if err != nil && !c.broken {
		c.broken = true
		c.failed(err)
	}
	p.promise(p.rec, err)
}
