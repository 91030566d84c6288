package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The package's errors say how a caller should treat them, through
// methods that errors.As finds:
//
//	Permanent() bool  retrying cannot fix it: the configuration, the
//	                  credentials or the record must change
//	Poison() bool     it belongs to one record, not to the pipeline: the
//	                  record can be set aside (dead-lettered)
//
// A record's failure in its promise is franz-go's own error (a *kerr.Error
// code or one of kgo's sentinels); the predicates below say what it means.

// ErrAuth marks a failure that retrying cannot fix: the broker refused
// the credentials, or TLS or SASL is configured on one side only.
var ErrAuth error = &sentinel{"kafka refused the connection", true}

// ErrHalted is Produce's answer after AbortBuffered, or after a record of
// an idempotent producer failed, and before Resume or Renew: the session
// that saw the failure must end, and the next sends again in order.
var ErrHalted error = &sentinel{"kafka: producing halted after a failed record", false}

type sentinel struct {
	msg       string
	permanent bool
}

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Permanent() bool { return e.permanent }

// TooLargeError is a record larger than the topic accepts. It is never
// handed to the client, so it can neither block nor reorder its key.
type TooLargeError struct {
	Topic     string
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("record of %d bytes exceeds the maximum message size of %d bytes for topic %s", e.Size, e.Max, e.Topic)
}

// Permanent: the record does not shrink.
func (e *TooLargeError) Permanent() bool { return true }

// Poison: only this record is too large.
func (e *TooLargeError) Poison() bool { return true }

// Refused tells whether Kafka refused a record for what it is rather than
// for the state of the cluster: too large, invalid, a topic the client may
// not write to or that cannot exist. Retrying such a record fails again.
// Only franz-go's error codes are consulted, never message text.
func Refused(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Retriable {
		return false
	}
	return TopicRefused(err) || SizeRefused(err) || errors.Is(err, kerr.InvalidRecord) || errors.Is(err, kerr.InvalidTimestamp)
}

// TopicRefused tells the refusals that concern a topic as a whole, not
// one record: every record for it is refused alike.
func TopicRefused(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.InvalidTopicException)
}

// SizeRefused tells a record (or its batch) the broker refused as too
// large: the limits learned for its topic are out of date.
func SizeRefused(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// Abandoned tells a record failed because its producer stopped (a stop,
// a closed client), not because of Kafka.
func Abandoned(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed)
}

// SameFailure tells whether two failures are the same problem: the same
// Kafka error code, or the same error.
func SameFailure(a, b error) bool {
	var ka, kb *kerr.Error
	if errors.As(a, &ka) && errors.As(b, &kb) {
		return ka.Code == kb.Code
	}
	return errors.Is(a, b) || a.Error() == b.Error()
}

// Describe says what a record's failure means and what to change.
func Describe(topic string, err error) string {
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return fmt.Sprintf("topic %s does not exist and is not created on first use (--kafka-create-topics, or the broker's auto.create.topics.enable): create it (%v)", topic, err)
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Sprintf("not authorized to write to topic %s: grant the relay's Kafka user WRITE on it (%v)", topic, err)
	case errors.Is(err, kerr.ClusterAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return fmt.Sprintf("not authorized for idempotent writes: grant the relay's Kafka user IDEMPOTENT_WRITE on the cluster (%v)", err)
	case SizeRefused(err):
		return fmt.Sprintf("the broker refuses the record as too large for topic %s (max.message.bytes; --max-message-bytes) (%v)", topic, err)
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries):
		return fmt.Sprintf("not acknowledged in time: is the broker reachable? (%v)", err)
	}
	return err.Error()
}
