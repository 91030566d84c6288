package natsjs

import (
	"errors"
	"fmt"
)

// The package's errors say how a caller treats them, as package sink's
// do: Permanent() for what retrying cannot fix, Poison() for what belongs
// to one record.

// ErrHalted is Produce's answer after AbortBuffered and before Resume or
// Renew.
var ErrHalted = errors.New("nats: publishing halted after a refusal")

// errClosed fails the messages still waiting for their ack when the
// connection is replaced or closed.
var errClosed = errors.New("nats: connection closed before the stream acknowledged the message")

// TooLargeError is a message larger than the server or its stream
// accepts. It is never published, so it can neither block nor reorder.
type TooLargeError struct {
	Subject   string
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message of %d bytes exceeds the maximum of %d bytes for subject %s (the server's max_payload or the stream's max_msg_size)", e.Size, e.Max, e.Subject)
}

// Permanent: the message does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this message is too large.
func (e *TooLargeError) Poison() bool { return true }

// HeaderError is a record header NATS cannot carry: a name with a colon,
// a space or a control character, or a value with a line break.
type HeaderError struct {
	Key    string
	Reason string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("nats: header %q: %s", e.Key, e.Reason)
}

// Permanent: the header is the record's.
func (e *HeaderError) Permanent() bool { return true }

// Poison: only this record has it.
func (e *HeaderError) Poison() bool { return true }

// AuthError is a server that refused the credentials or the connection's
// TLS settings.
type AuthError struct{ Err error }

func (e *AuthError) Error() string {
	return "nats: the server refused the connection (check the user, password, JWT and seed, and TLS): " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

// Permanent: the same credentials are refused again.
func (e *AuthError) Permanent() bool { return true }

// NoStreamError is a subject no stream takes: a message published there
// would get no ack.
type NoStreamError struct{ Subject string }

func (e *NoStreamError) Error() string {
	return fmt.Sprintf("nats: no JetStream stream takes subject %s: add it to a stream's subjects (or let pgoutbox create the stream: create-stream, --nats-create-stream)", e.Subject)
}

// DeadLetterError is a dead-letter subject no stream takes.
type DeadLetterError struct{ Subject string }

func (e *DeadLetterError) Error() string {
	return fmt.Sprintf("nats: no JetStream stream takes the dead-letter subject %s: add it to a stream's subjects, "+
		"name another (--dlq-topic), let pgoutbox create the stream (create-stream, --nats-create-stream), or run with --on-poison halt", e.Subject)
}

// Permanent: the streams stay as they are until someone changes them.
func (e *DeadLetterError) Permanent() bool { return true }

// RecordSubjectError is a subject of heartbeat or transaction records
// (Config.RecordSubjects) no stream takes.
type RecordSubjectError struct{ Subject string }

func (e *RecordSubjectError) Error() string {
	return fmt.Sprintf("nats: no JetStream stream takes subject %s, where the heartbeat or transaction records go (Debezium Server fails at the first of them): "+
		"add it to a stream's subjects (with create-stream, subjects=*.*.*,%s)", e.Subject, e.Subject)
}

// Permanent: the streams stay as they are until someone changes them.
func (e *RecordSubjectError) Permanent() bool { return true }
