package rabbitstream

import (
	"sync"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/twmb/franz-go/pkg/kgo"
)

// message is a record as a stream message, with where its confirm goes:
// the client hands the message back in its confirmation.
type message struct {
	*amqp.AMQP10
	once sync.Once
	done chan struct{} // closed once err holds the outcome
	err  error
}

// settle gives m its outcome; a later one is dropped.
func (m *message) settle(err error) {
	m.once.Do(func() {
		m.err = err
		close(m.done)
	})
}

// mapping is how a record becomes a stream message and which stream it
// goes to, as Debezium Server's settings say.
type mapping struct {
	stream, deadLetters, nullValue string
	contentType                    bool
}

// streamOf is r's stream: a dead letter's is the dead-letter stream;
// another's the configured one, else its topic's.
func (m *mapping) streamOf(r *kgo.Record) string {
	if m.stream != "" && (m.deadLetters == "" || r.Topic != m.deadLetters) {
		return m.stream
	}
	return r.Topic
}

// body is what r's message carries: its value, or null.value for a
// record without one (a tombstone), as Debezium Server publishes it.
func (m *mapping) body(r *kgo.Record) []byte {
	if r.Value == nil {
		return []byte(m.nullValue)
	}
	return r.Value
}

// message is r as Debezium Server's sink builds it: the headers with a
// value as string application properties (a header given twice keeps
// its last value), the key as the message-id string, the body as one
// data section. A record without a key has no message-id (Debezium
// Server's sink fails on one). Under contentType, a content-type header
// is the message's content-type property, as the CloudEvents AMQP binding
// has it.
func (m *mapping) message(r *kgo.Record) *message {
	msg := amqp.NewMessage(m.body(r))
	var props *amqp.MessageProperties
	if r.Key != nil {
		props = &amqp.MessageProperties{MessageID: string(r.Key)}
	}
	if len(r.Headers) > 0 {
		app := make(map[string]any, len(r.Headers))
		for _, h := range r.Headers {
			switch {
			case h.Value == nil:
			case m.contentType && h.Key == "content-type":
				if props == nil {
					props = &amqp.MessageProperties{}
				}
				props.ContentType = string(h.Value)
			default:
				app[h.Key] = string(h.Value)
			}
		}
		msg.ApplicationProperties = app
	}
	msg.Properties = props
	return &message{AMQP10: msg, done: make(chan struct{})}
}

// frameOverhead is what a publish frame adds to its one message: the
// length, key, version, publisher id, count, publishing id and message
// length.
const frameOverhead = 4 + 2 + 2 + 1 + 4 + 8 + 4

// size bounds the frame r's message needs from above without encoding
// it: each AMQP 1.0 value costs at most 5 bytes besides its own, each
// section header at most 8.
func (m *mapping) size(r *kgo.Record) int {
	n := frameOverhead + 3*8 + 5 + len(m.body(r))
	if r.Key != nil {
		n += 8 + 5 + len(r.Key)
	}
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// exactSize is the frame r's message needs.
func (m *mapping) exactSize(r *kgo.Record) (int, error) {
	b, err := m.message(r).MarshalBinary()
	return frameOverhead + len(b), err
}
