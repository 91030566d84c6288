package redisstream

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered or a failed batch,
// before Resume or Renew.
var ErrHalted = errors.New("redis: writing halted after a failure")

// errClosed fails the records still waiting when the publisher is renewed
// or closed.
var errClosed = errors.New("redis: connection closed before the server answered")

// TooLargeError is an entry larger than the server (proto-max-bulk-len,
// for each of its parts) or the configured cap accepts. It is never sent,
// so it can neither block nor reorder.
type TooLargeError struct {
	Stream    string
	Part      string // "the value", "the key", "the entry"
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("redis: entry for stream %s: %s is %d bytes, over the maximum of %d bytes (the server's proto-max-bulk-len, or --max-message-bytes)",
		e.Stream, e.Part, e.Size, e.Max)
}

// Permanent: the entry does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this entry is too large.
func (e *TooLargeError) Poison() bool { return true }

// WrongTypeError is a record's stream key that holds another type of
// value: XADD is refused for it until someone removes the key.
type WrongTypeError struct {
	Stream string
	Err    error
}

func (e *WrongTypeError) Error() string {
	return fmt.Sprintf("redis: key %s holds a value that is not a stream, so no entry can be added to it (%v)", e.Stream, e.Err)
}

func (e *WrongTypeError) Unwrap() error { return e.Err }

// Permanent: the key keeps its type.
func (e *WrongTypeError) Permanent() bool { return true }

// Poison: it is this record's stream.
func (e *WrongTypeError) Poison() bool { return true }

// AuthError is a server that refused the credentials, the command for
// the user, or the connection's TLS settings.
type AuthError struct{ Err error }

func (e *AuthError) Error() string {
	return "redis: the server refused the connection (check the user, password, the user's ACL and TLS): " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

// Permanent: the same credentials are refused again.
func (e *AuthError) Permanent() bool { return true }

// ReplyError is an error reply to a batch's write, such as OOM when the
// server reached its maxmemory, READONLY from a replica, or EXECABORT:
// nothing of the batch was written.
type ReplyError struct {
	Stream string
	Err    error
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("redis: writing to stream %s: %v", e.Stream, e.Err)
}

func (e *ReplyError) Unwrap() error { return e.Err }

// classify names an error reply by what a caller does with it.
func classify(stream string, err error) error {
	var re redis.Error
	if !errors.As(err, &re) {
		var unknownAuth x509.UnknownAuthorityError
		var hostErr x509.HostnameError
		var invalid x509.CertificateInvalidError
		if errors.As(err, &unknownAuth) || errors.As(err, &hostErr) || errors.As(err, &invalid) {
			return &AuthError{Err: err}
		}
		return err
	}
	msg := re.Error()
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "NOPERM"),
		strings.HasPrefix(msg, "ERR AUTH"), strings.Contains(msg, "invalid username-password"):
		return &AuthError{Err: err}
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return &WrongTypeError{Stream: stream, Err: err}
	}
	return &ReplyError{Stream: stream, Err: err}
}
