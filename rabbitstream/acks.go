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

// newConfirms settles a connection's messages in the order they were
// sent, whichever stream they went to, so that a promise never runs
// ahead of an earlier message's; after a message failed, every later one
// fails too. failed is told of the first failure, before its promise.
func newConfirms(max int, timeout time.Duration, failed func(error)) *inflight.Confirms[pending] {
	return inflight.NewConfirms(inflight.ConfirmConfig[pending]{
		Max: max, Timeout: timeout,
		Sent: func(p pending) time.Time { return p.sent },
		Done: func(p pending) <-chan struct{} { return p.msg.done },
		Outcome: func(p pending) error {
			if p.msg.err != nil {
				return &RefusedError{Stream: p.stream, Err: p.msg.err}
			}
			return nil
		},
		Late: func(p pending, d time.Duration) error {
			return &RefusedError{Stream: p.stream, Err: fmt.Errorf("no confirm within %s (producer.confirmTimeout, --rabbitmqstream-ack-timeout)", d)}
		},
		Closed: errClosed, After: errAfterFailure,
		Promise: func(p pending, err error) { p.promise(p.rec, err) },
		Failed:  failed,
	})
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
	m.settle(err)
}
