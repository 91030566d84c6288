// Package awsbatch is what pgoutbox's publishers to Amazon SQS and SNS
// share about their batch requests (SendMessageBatch, PublishBatch): the
// service answers each entry on its own; an entry it refused blaming the
// message is remembered, so that the record is dead-lettered when it
// comes again instead of failing its request for ever; and a FIFO
// message's deduplication id is its event id.
package awsbatch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// MaxID is the most characters of a message group or deduplication id.
const MaxID = 128

// CheckID says why s is not a message group or deduplication id, ""
// when it is: 1 to 128 of letters, digits and punctuation.
func CheckID(s string) string {
	if s == "" || len(s) > MaxID {
		return "1 to 128 characters"
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return "only letters, digits and punctuation"
		}
	}
	return ""
}

// DedupID is a FIFO message's deduplication id: its event id (a dead
// letter's with the relay's prefix), or the hash of its value when it has
// none or one that is not an id, as content-based deduplication has it.
func DedupID(r *kgo.Record) string {
	if id := outbox.EventID(r.Context); CheckID(id) == "" {
		return id
	}
	sum := sha256.Sum256(r.Value)
	return hex.EncodeToString(sum[:])
}

// Failure is an entry a batch answer says was not taken; its ID is its
// place in the request, as the publishers number entries.
type Failure struct {
	ID, Code, Message string
	SenderFault       bool
}

// EntryError is a message the service did not take: its entry's error
// code and message, and whether the service blamed the message
// (SenderFault).
type EntryError struct {
	// Service is "sqs" or "sns"; Target what the message went to ("the
	// queue", "the topic").
	Service, Target string
	Code, Message   string
	SenderFault     bool
	Attempts        int
}

func (e *EntryError) Error() string {
	msg := fmt.Sprintf("%s: %s did not take the message after %d attempts: %s", e.Service, e.Target, e.Attempts, e.Code)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.SenderFault {
		msg += " (a refusal of this message: it is dead-lettered when it comes again)"
	}
	return msg
}

// RefusedError is a message the service refused before, blaming the
// message: it is poison.
type RefusedError struct{ Err *EntryError }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: %s refused this message: %v", e.Err.Service, strings.ToUpper(e.Err.Service), e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Permanent: the service refuses the same message again.
func (e *RefusedError) Permanent() bool { return true }

// Poison: only this message is refused.
func (e *RefusedError) Poison() bool { return true }

// maxRefusals bounds the refusals kept; beyond it the oldest knowledge
// is dropped (the message is then sent once more, and refused again).
const maxRefusals = 10_000

// Refusals are the messages a service refused, blaming them, by where
// they went and what they hold. The zero value is empty and ready.
type Refusals struct {
	mu sync.Mutex
	m  map[[32]byte]*EntryError
	// any tells m is not empty: until the service refuses a message,
	// Check hashes nothing.
	any atomic.Bool
}

// Check returns *RefusedError when the service refused r, sent to to,
// before.
func (rs *Refusals) Check(to string, r *kgo.Record) error {
	if !rs.any.Load() {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if e, ok := rs.m[identity(to, r)]; ok {
		return &RefusedError{Err: e}
	}
	return nil
}

// Failed reads a batch answer's failures of a request to to, whose
// entries were recs: the places of those not taken, and the last one's
// error, made from like (its Service, Target and Attempts). It remembers
// those the service blamed on the message. An answer for an entry not
// sent is an error.
func (rs *Refusals) Failed(like EntryError, to string, recs []*kgo.Record, fails []Failure) ([]int, *EntryError, error) {
	var failed []int
	var last *EntryError
	for _, f := range fails {
		j, err := strconv.Atoi(f.ID)
		if err != nil || j < 0 || j >= len(recs) {
			return nil, nil, fmt.Errorf("an answer for entry %q, which was not sent", f.ID)
		}
		failed = append(failed, j)
		e := like
		e.Code, e.Message, e.SenderFault = f.Code, f.Message, f.SenderFault
		last = &e
		if f.SenderFault {
			rs.remember(to, recs[j], last)
		}
	}
	return failed, last, nil
}

func (rs *Refusals) remember(to string, r *kgo.Record, e *EntryError) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil || len(rs.m) >= maxRefusals {
		rs.m = map[[32]byte]*EntryError{}
	}
	rs.m[identity(to, r)] = e
	rs.any.Store(true)
}

// identity names a message for the refusals.
func identity(to string, r *kgo.Record) [32]byte {
	h := sha256.New()
	h.Write([]byte(to))
	h.Write([]byte{0})
	h.Write(r.Key)
	h.Write([]byte{0})
	h.Write(r.Value)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
