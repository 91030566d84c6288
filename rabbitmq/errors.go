package rabbitmq

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed message,
// before Resume or Renew.
var ErrHalted = errors.New("rabbitmq: publishing halted after a failed message")

// errClosed fails the messages still waiting for their confirm when the
// connection is replaced or closed.
var errClosed = errors.New("rabbitmq: connection closed before the broker confirmed the message")

// errAfterFailure fails a message published after one that failed: it
// may have reached its queue, but counting it as sent would let it
// overtake the failed one, which is sent again.
var errAfterFailure = errors.New("rabbitmq: an earlier message of the connection failed; this one is sent again after it")

// TooLargeError is a message larger than the server accepts. It is never
// published, so it can neither block nor reorder.
type TooLargeError struct {
	Exchange  string
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("rabbitmq: message of %d bytes exceeds the server's maximum of %d bytes (max_message_size; --rabbitmq-max-message-bytes) for exchange %q", e.Size, e.Max, e.Exchange)
}

// Permanent: the message does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this message is too large.
func (e *TooLargeError) Poison() bool { return true }

// FieldError is a routing key or header name longer than AMQP carries.
type FieldError struct {
	Field, Value string
}

func (e *FieldError) Error() string {
	v := e.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return fmt.Sprintf("rabbitmq: %s %q is %d bytes; AMQP 0-9-1 carries at most %d", e.Field, v, len(e.Value), maxShortString)
}

// Permanent: the record's value does not change.
func (e *FieldError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *FieldError) Poison() bool { return true }

// ReturnedError is a message the broker returned: no queue is bound to
// its exchange with its routing key.
type ReturnedError struct {
	Exchange, RoutingKey string
	Code                 uint16
	Text                 string
}

func (e *ReturnedError) Error() string {
	return fmt.Sprintf("rabbitmq: the broker returned the message (%d %s): no queue is bound to exchange %q with routing key %q; bind one (autoCreateRoutingKey, --rabbitmq-auto-create-routing-key, declares a queue named like the routing key)",
		e.Code, e.Text, e.Exchange, e.RoutingKey)
}

// NackError is a message the broker refused to take (basic.nack), or a
// channel closed before its confirm, with the broker's reason when it
// gave one.
type NackError struct{ Reason error }

func (e *NackError) Error() string {
	if e.Reason == nil {
		return "rabbitmq: the broker did not take the message (basic.nack)"
	}
	return "rabbitmq: the channel closed before the broker confirmed the message: " + e.Reason.Error()
}

func (e *NackError) Unwrap() error { return e.Reason }

// TimeoutError is a message whose confirm did not come within the ack
// timeout.
type TimeoutError struct{ After string }

func (e *TimeoutError) Error() string {
	return "rabbitmq: no confirm from the broker within " + e.After + " (ackTimeout, --rabbitmq-ack-timeout)"
}

// AuthError is a server that refused the credentials, the virtual host or
// the TLS settings.
type AuthError struct{ Err error }

func (e *AuthError) Error() string {
	return "rabbitmq: the server refused the connection (check the user, password, virtual host and TLS): " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

// Permanent: the same credentials are refused again.
func (e *AuthError) Permanent() bool { return true }

// MissingError is an exchange or dead-letter queue that does not exist.
type MissingError struct {
	What, Name, Fix string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("rabbitmq: %s %q does not exist: %s", e.What, e.Name, e.Fix)
}

// Permanent: it stays missing until someone declares it.
func (e *MissingError) Permanent() bool { return true }
