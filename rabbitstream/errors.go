package rabbitstream

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed message,
// before Resume or Renew.
var ErrHalted = errors.New("rabbitmq streams: publishing halted after a failed message")

// errClosed fails the messages still waiting for their confirm when the
// connection is replaced or closed.
var errClosed = errors.New("rabbitmq streams: connection closed before the broker confirmed the message")

// errAfterFailure fails a message published after one that failed: it
// may have reached its stream, but counting it as sent would let it
// overtake the failed one, which is sent again.
var errAfterFailure = errors.New("rabbitmq streams: an earlier message of the connection failed; this one is sent again after it")

// TooLargeError is a message that does not fit in the largest frame the
// server takes. It is never published, so it can neither block nor
// reorder.
type TooLargeError struct {
	Stream    string
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("rabbitmq streams: message of %d bytes does not fit in the server's largest frame of %d bytes (stream.frame_max; --rabbitmqstream-max-frame-bytes) for stream %q",
		e.Size, e.Max, e.Stream)
}

// Permanent: the message does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this message is too large.
func (e *TooLargeError) Poison() bool { return true }

// NameError is a stream name RabbitMQ cannot take.
type NameError struct{ Name string }

func (e *NameError) Error() string {
	n := e.Name
	if len(n) > 40 {
		n = n[:40] + "..."
	}
	return fmt.Sprintf("rabbitmq streams: stream name %q of %d bytes: RabbitMQ takes at most %d", n, len(e.Name), maxStreamName)
}

// Permanent: the record's topic does not change.
func (e *NameError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *NameError) Poison() bool { return true }

// RefusedError is a message the broker did not confirm: it said why, or
// the confirm did not come in time.
type RefusedError struct {
	Stream string
	Err    error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("rabbitmq streams: the broker did not confirm the message to stream %q: %v", e.Stream, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// AuthError is a server that refused the credentials, the virtual host or
// the TLS settings.
type AuthError struct{ Err error }

func (e *AuthError) Error() string {
	return "rabbitmq streams: the server refused the connection (check the user, password, virtual host and TLS): " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

// Permanent: the same credentials are refused again.
func (e *AuthError) Permanent() bool { return true }
