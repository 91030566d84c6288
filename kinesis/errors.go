package kinesis

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed request,
// before Resume or Renew.
var ErrHalted = errors.New("kinesis: publishing halted after a failed request")

// errClosed fails the records still waiting when the publisher is renewed
// or closed.
var errClosed = errors.New("kinesis: closed before Kinesis wrote the record")

// errAfterFailure fails a record after one that failed: it may have been
// written, but counting it as sent would let it overtake the failed one,
// which is sent again.
var errAfterFailure = errors.New("kinesis: an earlier request failed; this record is sent again after it")

// TooLargeError is a record larger than Kinesis takes. It is never sent,
// so it can neither block nor reorder.
type TooLargeError struct {
	Stream    string
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("kinesis: record of %d bytes (data and partition key) is larger than the %d a record may have in stream %q",
		e.Size, e.Max, e.Stream)
}

// Permanent: the record does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this record is too large.
func (e *TooLargeError) Poison() bool { return true }

// FieldError is a stream name or partition key Kinesis does not take.
type FieldError struct{ What, Value, Why string }

func (e *FieldError) Error() string {
	v := e.Value
	if len(v) > 60 {
		v = v[:60] + "..."
	}
	return fmt.Sprintf("kinesis: %s %q: %s", e.What, v, e.Why)
}

// Permanent: the record does not change.
func (e *FieldError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *FieldError) Poison() bool { return true }

// EntryError is a record Kinesis did not write after every attempt: its
// entry's error code and message.
type EntryError struct {
	Stream, Code, Message string
	Attempts              int
}

func (e *EntryError) Error() string {
	msg := fmt.Sprintf("kinesis: stream %q did not take the record after %d attempts: %s", e.Stream, e.Attempts, e.Code)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// RequestError is a PutRecords request Kinesis refused whole, or that did
// not reach it.
type RequestError struct {
	Stream string
	Code   string // the API's error code, "" when Kinesis did not answer
	Err    error
}

func (e *RequestError) Error() string {
	msg := fmt.Sprintf("kinesis: writing to stream %q failed: %v", e.Stream, e.Err)
	switch e.Code {
	case "ResourceNotFoundException":
		msg += " (pgoutbox does not create streams: create it, or route the events to one that exists)"
	case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
		"ExpiredTokenException", "MissingAuthenticationTokenException":
		msg += " (check the credentials and their kinesis:PutRecords permission on the stream)"
	}
	return msg
}

func (e *RequestError) Unwrap() error { return e.Err }
