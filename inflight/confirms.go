package inflight

import "time"

// Confirms settles the messages a broker confirms one by one (RabbitMQ
// Streams), in the order they were sent, whatever order the
// confirms come in: each waits for its confirm, its timeout or the
// queue's stop. After a message failed, every later one fails too: sent
// or not, counting it would let it overtake the failed one.
type Confirms[T any] struct {
	*Queue[T]
	cfg ConfirmConfig[T]
	// broken: a message failed (the queue's goroutine's own).
	broken bool
}

// ConfirmConfig says how a broker's messages are confirmed.
type ConfirmConfig[T any] struct {
	// Max bounds the messages in flight; Timeout each one's wait, from
	// when it was Sent.
	Max     int
	Timeout time.Duration
	Sent    func(T) time.Time
	// Done is closed once the message's outcome is known; Outcome is it,
	// nil when the broker took the message.
	Done    func(T) <-chan struct{}
	Outcome func(T) error
	// Late is the error of a message whose confirm did not come in time;
	// Closed of one the queue closed on; After of one after a failure.
	Late          func(m T, after time.Duration) error
	Closed, After error
	// Promise runs the message's promise; Failed is told of the first
	// failure, before its promise runs.
	Promise func(T, error)
	Failed  func(error)
}

// NewConfirms starts a queue of confirms.
func NewConfirms[T any](cfg ConfirmConfig[T]) *Confirms[T] {
	c := &Confirms[T]{cfg: cfg}
	c.Queue = New(cfg.Max, c.settle, func(m T) { c.finish(m, cfg.Closed) })
	return c
}

// settle waits for m's confirm, its timeout or the queue's stop, and runs
// its promise with the outcome.
func (c *Confirms[T]) settle(m T, stop <-chan struct{}) {
	if c.broken {
		c.finish(m, c.cfg.After)
		return
	}
	timer := time.NewTimer(c.cfg.Timeout - time.Since(c.cfg.Sent(m)))
	defer timer.Stop()
	var err error
	select {
	case <-c.cfg.Done(m):
		err = c.cfg.Outcome(m)
	case <-timer.C:
		err = c.cfg.Late(m, c.cfg.Timeout)
	case <-stop:
		err = c.cfg.Closed
	}
	c.finish(m, err)
}

func (c *Confirms[T]) finish(m T, err error) {
	if err != nil && !c.broken {
		c.broken = true
		c.cfg.Failed(err)
	}
	c.cfg.Promise(m, err)
}
