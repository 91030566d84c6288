package pulsar

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed message,
// before Resume or Renew.
var ErrHalted = errors.New("pulsar: publishing halted after a failed message")

// errClosed fails the messages still waiting for their confirm when the
// client is replaced or closed.
var errClosed = errors.New("pulsar: closed before the broker confirmed the message")

// errAfterFailure fails a message sent after one that failed: it may have
// reached its topic, but counting it would let it overtake the failed
// one, which is sent again.
var errAfterFailure = errors.New("pulsar: an earlier message failed; this one is sent again after it")

// TooLargeError is a payload larger than the broker takes. It is never
// sent, so it can neither block nor reorder.
type TooLargeError struct {
	Topic     string
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("pulsar: message of %d bytes is larger than the %d the broker takes (its maxMessageSize; --pulsar-max-message-bytes) for topic %q",
		e.Size, e.Max, e.Topic)
}

// Permanent: the message does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this message is too large.
func (e *TooLargeError) Poison() bool { return true }

// NameError is a topic name Pulsar does not take.
type NameError struct{ Name string }

func (e *NameError) Error() string {
	return fmt.Sprintf("pulsar: topic name %q: a topic's name is not empty and has no '/'", e.Name)
}

// Permanent: the record's topic does not change.
func (e *NameError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *NameError) Poison() bool { return true }

// SendError is a message the broker did not confirm: it said why, or the
// confirm did not come in time.
type SendError struct {
	Topic string
	Err   error
}

func (e *SendError) Error() string {
	return fmt.Sprintf("pulsar: the broker did not confirm the message to topic %q: %v", e.Topic, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// ProducerError is a producer the broker did not create: the topic's
// policies, the credentials, no connection.
type ProducerError struct {
	Topic string
	Err   error
}

func (e *ProducerError) Error() string {
	return fmt.Sprintf("pulsar: no producer for topic %q (check the service URL, the token and the topic's namespace and permissions): %v", e.Topic, e.Err)
}

func (e *ProducerError) Unwrap() error { return e.Err }
