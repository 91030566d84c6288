package natsjs

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
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
	// msg went to stream; it is sent again when the stream's last message
	// was another publisher's (acker.settle).
	msg    *nats.Msg
	stream string
}

// acker takes one connection's acks in the order the messages were
// published (an inflight.Queue settles them one at a time) and runs their
// promises in that order, so that a promise never runs ahead of an earlier
// message's: at most MaxPending wait.
type acker struct {
	*inflight.Queue[pending]
	// failed is told of each failure, before its promise runs.
	failed func(error)
	// js publishes a message sent again; resendTimeout bounds its ack.
	js            jetstream.JetStream
	resendTimeout time.Duration
	// stored is, per stream, whether the message settled last there was
	// stored (settle's goroutine only: the queue settles one at a time).
	stored map[string]bool
}

func newAcker(max int, js jetstream.JetStream, resendTimeout time.Duration, failed func(error)) *acker {
	a := &acker{failed: failed, js: js, resendTimeout: resendTimeout, stored: map[string]bool{}}
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
	if wrongLastID(err) && a.stored[p.stream] {
		// The message this one expected last is stored, and another
		// publisher's came after it: sent again after that one, this
		// one still follows it, and nothing of ours can overtake it:
		// each after it carries an id and expects the one before it
		// (Produce), so it is refused in turn and sent again only
		// after this one.
		p.msg.Header.Del(headerExpectLastID)
		err = a.resend(p.msg, stop)
	}
	a.stored[p.stream] = err == nil
	a.finish(p, err)
}

// resend publishes msg again and waits for its ack, at most resendTimeout
// and not past stop.
func (a *acker) resend(msg *nats.Msg, stop <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.resendTimeout)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := a.js.PublishMsg(ctx, msg)
	cancel()
	<-done
	return err
}

// wrongLastID tells JetStream's refusal of a message whose
// Nats-Expected-Last-Msg-Id is not the stream's last message's.
func wrongLastID(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == errWrongLastMsgID
}

// errWrongLastMsgID is JetStream's JSStreamWrongLastMsgIDErrF.
const errWrongLastMsgID jetstream.ErrorCode = 10070

func (a *acker) finish(p pending, err error) {
	if err != nil {
		a.failed(err)
	}
	p.promise(p.rec, err)
}
