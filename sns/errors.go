package sns

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed request,
// before Resume or Renew.
var ErrHalted = errors.New("sns: publishing halted after a failed request")

// errClosed fails the records still waiting when the publisher is renewed
// or closed.
var errClosed = errors.New("sns: closed before SNS took the message")

// errAfterFailure fails a record after one that failed: it may have been
// published, but counting it as sent would let it overtake the failed
// one, which is sent again.
var errAfterFailure = errors.New("sns: an earlier request failed; this message is sent again after it")

// MessageError is a record SNS would not take as it is: an empty or
// oversized message, a destination that is no topic's ARN, a header that
// is no message attribute, a message group SNS does not take. It is never
// sent, so it can neither block nor reorder.
type MessageError struct{ What, Value, Why string }

func (e *MessageError) Error() string {
	v := e.Value
	if len(v) > 60 {
		v = v[:60] + "..."
	}
	if v == "" {
		return fmt.Sprintf("sns: %s: %s", e.What, e.Why)
	}
	return fmt.Sprintf("sns: %s %q: %s", e.What, v, e.Why)
}

// Permanent: the record does not change.
func (e *MessageError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *MessageError) Poison() bool { return true }

// RequestError is a request SNS refused whole, or that did not reach it.
type RequestError struct {
	Topic string
	Code  string // the API's error code, "" when SNS did not answer
	Err   error
}

func (e *RequestError) Error() string {
	msg := fmt.Sprintf("sns: publishing to %s failed: %v", e.Topic, e.Err)
	switch e.Code {
	case "NotFound", "NotFoundException":
		msg += " (pgoutbox does not create topics: create it, or correct topic.arn, topic.arn.prefix or the route)"
	case "AuthorizationError", "AuthorizationErrorException", "AccessDenied", "AccessDeniedException", "InvalidClientTokenId",
		"SignatureDoesNotMatch", "ExpiredToken", "UnrecognizedClientException", "InvalidSignatureException", "MissingAuthenticationToken":
		msg += " (check the credentials and their sns:Publish permission on the topic)"
	}
	return msg
}

func (e *RequestError) Unwrap() error { return e.Err }
