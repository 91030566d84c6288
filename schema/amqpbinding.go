package schema

import "strings"

// ProtocolAMQP: the AMQP protocol binding (1.0, section 3.1.3), for
// RabbitMQ's AMQP 0-9-1, whose headers are what AMQP 1.0 calls
// application-properties: each attribute a cloudEvents:<attribute>
// header holding its canonical string, and datacontenttype in the
// content-type header, which the sink carries as the message's
// content-type property. The structured mode is the Kafka binding's: the
// event in the JSON event format, content-type application/cloudevents+json.
const ProtocolAMQP Protocol = "amqp"

// amqpPrefix starts the header of a CloudEvents attribute (3.1.3.1).
const amqpPrefix = "cloudEvents:"

// amqpBinary turns the Kafka binding's binary-mode headers into the AMQP
// binding's, in place.
func amqpBinary(hs []Header) {
	for i := range hs {
		if h := &hs[i]; strings.HasPrefix(h.Key, "ce_") {
			h.Key = amqpPrefix + h.Key[3:]
		}
	}
}
