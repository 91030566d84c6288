package rabbitmq

import (
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// mapping is how a record becomes an AMQP message and where it goes, as
// Debezium Server's settings say: the exchange, the routing key, the body,
// the headers and the delivery mode.
type mapping struct {
	exchange, routingKey, source string
	deadLetterQueue              string
	nullValue                    string
	deliveryMode                 uint8
	headerBytes, contentType     bool
}

func newMapping(cfg Config) mapping {
	return mapping{exchange: cfg.Exchange, routingKey: cfg.RoutingKey, source: cfg.RoutingKeySource,
		deadLetterQueue: cfg.DeadLetterQueue, nullValue: cfg.NullValue, deliveryMode: cfg.DeliveryMode,
		headerBytes: cfg.HeaderBytes, contentType: cfg.ContentType}
}

// destination is r's exchange and routing key, as Debezium Server chooses
// them; a dead letter goes to the dead-letter queue through the default
// exchange.
func (m *mapping) destination(r *kgo.Record) (exchange, key string, deadLetter bool) {
	if m.deadLetterQueue != "" && r.Topic == m.deadLetterQueue {
		return "", r.Topic, true
	}
	exchange = m.exchange
	if exchange == "" {
		exchange = r.Topic
	}
	switch m.source {
	case SourceTopic:
		key = r.Topic
	case SourceKey:
		key = string(r.Key)
	default:
		key = m.routingKey
	}
	return exchange, key, false
}

// body is what r's message carries: its value, or null.value for a
// record without one (a tombstone), as Debezium Server publishes it.
func (m *mapping) body(r *kgo.Record) []byte {
	if r.Value == nil {
		return []byte(m.nullValue)
	}
	return r.Value
}

// message is r as an AMQP message: the body, the delivery mode, the
// headers with a value (a header given twice keeps its last value, as
// Debezium Server's map of them does), and the event id as message-id.
func (m *mapping) message(r *kgo.Record) amqp.Publishing {
	msg := amqp.Publishing{Body: m.body(r), DeliveryMode: m.deliveryMode, MessageId: outbox.EventID(r.Context),
		Headers: make(amqp.Table, len(r.Headers))}
	for _, h := range r.Headers {
		switch {
		case h.Value == nil:
		case m.contentType && h.Key == "content-type":
			msg.ContentType = string(h.Value)
		case m.headerBytes:
			msg.Headers[h.Key] = h.Value
		default:
			msg.Headers[h.Key] = string(h.Value)
		}
	}
	return msg
}
