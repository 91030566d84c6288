package rocketmq

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed request,
// before Resume or Renew.
var ErrHalted = errors.New("rocketmq: publishing halted after a failed request")

// errClosed fails the records still waiting when the publisher is renewed
// or closed.
var errClosed = errors.New("rocketmq: closed before the broker stored the message")

// errAfterFailure fails a record after one that failed: it may have been
// stored, but counting it as sent would let it overtake the failed one,
// which is sent again.
var errAfterFailure = errors.New("rocketmq: an earlier request failed; this message is sent again after it")

// TooLargeError is a message larger than the producer sends. It is never
// sent, so it can neither block nor reorder.
type TooLargeError struct {
	Topic     string
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("rocketmq: message of %d bytes with its properties to topic %q is larger than the %d sent (producer.max.message.size, --rocketmq-max-message-bytes; the broker's maxMessageSize)",
		e.Size, e.Topic, e.Max)
}

// Permanent: the message does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this message is too large.
func (e *TooLargeError) Poison() bool { return true }

// FieldError is a topic, key, body or property RocketMQ does not take.
type FieldError struct{ What, Value, Why string }

func (e *FieldError) Error() string {
	v := e.Value
	if len(v) > 60 {
		v = v[:60] + "..."
	}
	if v == "" {
		return fmt.Sprintf("rocketmq: %s: %s", e.What, e.Why)
	}
	return fmt.Sprintf("rocketmq: %s %q: %s", e.What, v, e.Why)
}

// Permanent: the record does not change.
func (e *FieldError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *FieldError) Poison() bool { return true }

// SendError is a request the broker did not answer with success, or did
// not answer.
type SendError struct {
	Topic, Broker string
	Err           error
}

func (e *SendError) Error() string {
	return fmt.Sprintf("rocketmq: sending to topic %q on broker %s failed: %v", e.Topic, e.Broker, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// RouteError is a topic whose route the name servers did not give.
type RouteError struct {
	Topic string
	Err   error
}

func (e *RouteError) Error() string {
	return fmt.Sprintf("rocketmq: no route for topic %q (check producer.name.srv.addr, and that the topic exists or the broker creates topics): %v", e.Topic, e.Err)
}

func (e *RouteError) Unwrap() error { return e.Err }
