package natsjs

import (
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/inflight"
)

// pending is a message waiting for its ack; fut is nil for a record that
// was not published (a tombstone), whose promise runs in its turn.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
	fut     jetstream.PubAckFuture
}

// acker takes one connection's acks in the order the messages were
// published (an inflight.Queue settles them one at a time) and runs their
// promises in that order, so that a promise never runs ahead of an earlier
// message's: at most MaxPending wait.
type acker struct {
	*inflight.Queue[pending]
	// failed is told of each failure, before its promise runs.
	failed func(error)
}

func newAcker(max int, failed func(error)) *acker {
	a := &acker{failed: failed}
	a.Queue = inflight.New(max, a.settle, func(p pending) { a.finish(p, errClosed) })
	return a
}

// settle waits for p's ack or failure and runs its promise.
func (a *acker) settle(p pending, stop <-chan struct{}) {
	if p.fut == nil {
		a.finish(p, nil)
		return
	}
	var err error
	select {
	case <-p.fut.Ok():
	case err = <-p.fut.Err():
	case <-stop:
		err = errClosed
	}
	a.finish(p, err)
}

func (a *acker) finish(p pending, err error) {
	if err != nil {
		a.failed(err)
	}
	p.promise(p.rec, err)
}
