package pubsub

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed message,
// before Resume or Renew.
var ErrHalted = errors.New("pubsub: publishing halted after a failed message")

// errClosed fails the messages still waiting when the publisher is
// renewed or closed.
var errClosed = errors.New("pubsub: closed before Pub/Sub took the message")

// errAfterFailure fails a message sent after one that failed: it may
// have been published, but counting it would let it overtake the failed
// one, which is sent again.
var errAfterFailure = errors.New("pubsub: an earlier message failed; this one is sent again after it")

// FieldError is a message Pub/Sub does not take: its size, its ordering
// key, its attributes, or no data and no attributes. It is never sent.
type FieldError struct{ Topic, Why string }

func (e *FieldError) Error() string {
	return fmt.Sprintf("pubsub: a message to topic %q: %s", e.Topic, e.Why)
}

// Permanent: the record does not change.
func (e *FieldError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *FieldError) Poison() bool { return true }

// PublishError is a request Pub/Sub did not take, or that did not reach
// it (Status 0).
type PublishError struct {
	Topic  string
	Status int
	Err    error
}

func (e *PublishError) Error() string {
	msg := fmt.Sprintf("pubsub: publishing to topic %q failed", e.Topic)
	if e.Status != 0 {
		msg += fmt.Sprintf(" (%d)", e.Status)
	}
	msg += fmt.Sprintf(": %v", e.Err)
	switch e.Status {
	case 404:
		msg += " (pgoutbox creates no topic: create it, or check the project)"
	case 401, 403:
		msg += " (check the credentials and their pubsub.topics.publish permission)"
	}
	return msg
}

func (e *PublishError) Unwrap() error { return e.Err }

// CredentialsError is credentials that give no token.
type CredentialsError struct{ Err error }

func (e *CredentialsError) Error() string {
	return "pubsub: no Google credentials (GOOGLE_APPLICATION_CREDENTIALS, the workload's identity): " + e.Err.Error()
}

func (e *CredentialsError) Unwrap() error { return e.Err }

// Permanent: the credentials do not change while pgoutbox runs.
func (e *CredentialsError) Permanent() bool { return true }
