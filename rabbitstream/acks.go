package rabbitstream

import (
	"fmt"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// pending is a sent message waiting for its confirm.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
	msg     *message
	stream  string
	sent    time.Time
}

// confirms settles a connection's messages in the order they were sent,
// whichever stream they went to (an inflight.Queue settles them one at a
// time), so that a promise never runs ahead of an earlier message's.
// After a message failed, every later one fails too.
type confirms struct {
	*inflight.Queue[pending]
	timeout time.Duration
	// failed is told of the first failure, before its promise runs.
	failed func(error)
	broken bool // a message failed (the queue's goroutine's own)
}

func newConfirms(max int, timeout time.Duration, failed func(error)) *confirms {
	c := &confirms{timeout: timeout, failed: failed}
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
	case err = <-p.msg.done:
	case <-timer.C:
		err = fmt.Errorf("no confirm within %s (producer.confirmTimeout, --rabbitmqstream-ack-timeout)", c.timeout)
	case <-stop:
		err = errClosed
	}
	if err != nil && err != errClosed {
		err = &RefusedError{Stream: p.stream, Err: err}
	}
	c.finish(p, err)
}

func (c *confirms) finish(p pending, err error) {
	if err != nil && !c.broken {
		c.broken = true
		c.failed(err)
	}
	p.promise(p.rec, err)
}

// deliver hands each confirmation of a producer to its message, until the
// producer closes its channel.
func deliver(ch stream.ChannelPublishConfirm) {
	for batch := range ch {
		for _, st := range batch {
			outcome(st)
			for _, l := range st.LinkedMessages() {
				outcome(l)
			}
		}
	}
}

// outcome gives a confirmation to its message: nil when confirmed.
func outcome(st *stream.ConfirmationStatus) {
	m, ok := st.GetMessage().(*message)
	if !ok {
		return
	}
	var err error
	if !st.IsConfirmed() {
		if err = st.GetError(); err == nil {
			err = fmt.Errorf("not confirmed (code %d)", st.GetErrorCode())
		}
	}
	select {
	case m.done <- err:
	default: // it has its outcome already
	}
}
