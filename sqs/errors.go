package sqs

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed request,
// before Resume or Renew.
var ErrHalted = errors.New("sqs: publishing halted after a failed request")

// errClosed fails the records still waiting when the publisher is renewed
// or closed.
var errClosed = errors.New("sqs: closed before SQS took the message")

// errAfterFailure fails a record after one that failed: it may have been
// sent, but counting it as sent would let it overtake the failed one,
// which is sent again.
var errAfterFailure = errors.New("sqs: an earlier request failed; this message is sent again after it")

// TooLargeError is a body larger than the queue takes. It is never sent,
// so it can neither block nor reorder.
type TooLargeError struct{ Size, Max int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("sqs: message of %d bytes is larger than the %d the queue takes (its MaximumMessageSize)", e.Size, e.Max)
}

// Permanent: the message does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this message is too large.
func (e *TooLargeError) Poison() bool { return true }

// FieldError is a body or message group SQS does not take.
type FieldError struct{ What, Value, Why string }

func (e *FieldError) Error() string {
	v := e.Value
	if len(v) > 60 {
		v = v[:60] + "..."
	}
	return fmt.Sprintf("sqs: %s %q: %s", e.What, v, e.Why)
}

// Permanent: the record does not change.
func (e *FieldError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *FieldError) Poison() bool { return true }

// RequestError is a request SQS refused whole, or that did not reach it.
type RequestError struct {
	Code string // the API's error code, "" when SQS did not answer
	Err  error
}

func (e *RequestError) Error() string {
	msg := fmt.Sprintf("sqs: sending to the queue failed: %v", e.Err)
	switch e.Code {
	case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
		msg += " (pgoutbox does not create queues: create it, or correct queue.url)"
	case "AccessDenied", "AccessDeniedException", "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken",
		"UnrecognizedClientException", "InvalidSignatureException", "MissingAuthenticationToken":
		msg += " (check the credentials and their sqs:SendMessage permission on the queue)"
	}
	return msg
}

func (e *RequestError) Unwrap() error { return e.Err }
