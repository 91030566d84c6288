package webhook

import (
	"errors"
	"fmt"
)

// ErrHalted is Produce's answer after AbortBuffered or a failed request,
// before Resume or Renew.
var ErrHalted = errors.New("webhook: publishing halted after a failed request")

// errClosed fails the records still waiting when the publisher is renewed
// or closed.
var errClosed = errors.New("webhook: closed before the endpoint answered")

// errAfterFailure fails a record after one that failed: sending it would
// let it overtake the failed one, which is sent again.
var errAfterFailure = errors.New("webhook: an earlier request failed; this record is sent again after it")

// StatusError is an endpoint's answer other than 2xx.
type StatusError struct {
	Status int
	Body   string // its start
	token  bool   // the request carried an OAuth2 or JWT token
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("webhook: the endpoint answered %d", e.Status)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	switch {
	case e.Status == 401 && e.token:
		msg += " (it refused the token: a new one is asked for before the request is sent again)"
	case e.Status == 403 && e.token:
		msg += " (check what the token grants: the OAuth2 scope, the JWT user)"
	case e.Status == 401 || e.Status == 403:
		msg += " (check the endpoint's credentials: the URL, authentication.webhook.secret)"
	case refusal(e.Status):
		msg += " (a refusal of this record: it is dead-lettered when it comes again)"
	}
	return msg
}

// refusal tells a status that refuses the record itself: a 4xx other than
// those about the credentials or the endpoint's load.
func refusal(status int) bool {
	return status >= 400 && status < 500 && status != 401 && status != 403 && status != 408 && status != 429
}

// RefusedError is a record the endpoint refused before: it is poison.
type RefusedError struct{ Err *StatusError }

func (e *RefusedError) Error() string {
	return "webhook: the endpoint refused this record: " + e.Err.Error()
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Permanent: the endpoint refuses the same record again.
func (e *RefusedError) Permanent() bool { return true }

// Poison: only this record is refused.
func (e *RefusedError) Poison() bool { return true }

// FieldError is a header HTTP cannot carry.
type FieldError struct{ What, Value string }

func (e *FieldError) Error() string {
	v := e.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return fmt.Sprintf("webhook: %s %q cannot be sent in an HTTP header (headers.encode.base64 sends any)", e.What, v)
}

// Permanent: the record does not change.
func (e *FieldError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *FieldError) Poison() bool { return true }
