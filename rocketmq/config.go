// Package rocketmq publishes records to Apache RocketMQ, as Debezium
// Server's rocketmq sink does: each record to the topic of its own name,
// in the queue its key's text picks as the Java client's
// SelectMessageQueueByHash picks it (Java's String.hashCode modulo the
// topic's write queues), its key's text as the message's KEYS, its headers
// as user properties, its value as the body.
//
// It speaks RocketMQ's remoting protocol itself (wire.go, conn.go): the
// name server's route of a topic, and batches of messages to a queue of
// its broker (SEND_BATCH_MESSAGE, stored whole or not at all). One request
// at a time per session, so a key's messages are stored in the order they
// were produced; a record counts as sent once the broker stored it and
// every record before it (inflight.BatchConn), and after a failed request
// none after it counts: the relay sends them again from its last
// confirmed position. Delivery is at-least-once. It knows nothing of the
// relay: package broker puts it behind the relay's interfaces.
package rocketmq

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// DefaultProducerGroup is the producer group when none is given; Debezium
// Server's sink does not start without producer.group.
const DefaultProducerGroup = "pgoutbox"

// DefaultMaxMessageBytes is the Java client's maxMessageSize: a larger
// body is refused by Fits, as DefaultMQProducer refuses it.
const DefaultMaxMessageBytes = 4 << 20

// DefaultSendTimeout is the Java client's sendMsgTimeout: how long a
// request may wait for the broker's answer.
const DefaultSendTimeout = 3 * time.Second

// DefaultMaxPending bounds the records waiting to be sent, as
// sink.DefaultMaxBufferedRecords bounds Kafka's.
const DefaultMaxPending = 5_000

// MaxBatch is the most messages in one request.
const MaxBatch = 256

// Config configures the publisher.
type Config struct {
	// NameServers are the name servers' host:port (producer.name.srv.addr,
	// several separated by ';' as the Java client takes them).
	NameServers []string
	// ProducerGroup names the producer to the broker (producer.group).
	ProducerGroup string
	// AccessKey and SecretKey sign every request as the Java client's
	// AclClientRPCHook does (producer.acl.enabled, producer.access.key,
	// producer.secret.key); empty, nothing is signed.
	AccessKey, SecretKey string
	// MaxMessageBytes is the largest body sent (producer.max.message.size).
	MaxMessageBytes int
	// SendTimeout bounds each request (producer.send.msg.timeout).
	SendTimeout time.Duration
	// MaxPending bounds the records waiting; Produce blocks beyond it.
	MaxPending int
	// DeadLetterTopic is the relay's dead-letter topic: its records may
	// lack a key.
	DeadLetterTopic string
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.ProducerGroup == "" {
		c.ProducerGroup = DefaultProducerGroup
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
}

// ParseNameServers reads producer.name.srv.addr: host:port, several
// separated by ';' (or ',').
func ParseNameServers(s string) ([]string, error) {
	var out []string
	for _, a := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
		a = strings.TrimSpace(a)
		if err := checkAddr(a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, errNoNameServer
	}
	return out, nil
}

// checkAddr refuses a name server that is not host:port.
func checkAddr(a string) error {
	if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
		return fmt.Errorf("rocketmq: name server %q is not host:port", a)
	}
	return nil
}

var errNoNameServer = errors.New("rocketmq: no name server (debezium.sink.rocketmq.producer.name.srv.addr, --rocketmq-name-server: host:9876, several separated by ';')")

// Validate reports the first invalid field; it never shows the secret key.
func (c Config) Validate() error {
	if len(c.NameServers) == 0 {
		return errNoNameServer
	}
	for _, a := range c.NameServers {
		if err := checkAddr(a); err != nil {
			return err
		}
	}
	switch {
	case !validName(c.ProducerGroup, 255):
		return fmt.Errorf("rocketmq: producer group %q: 1 to 255 of letters, digits, '%%', '|', '-' and '_'", c.ProducerGroup)
	case (c.AccessKey == "") != (c.SecretKey == ""):
		return errors.New("rocketmq: ACL needs both an access key and a secret key (producer.access.key, producer.secret.key)")
	case c.MaxMessageBytes < 1 || c.SendTimeout <= 0 || c.MaxPending < 1:
		return errors.New("rocketmq: the largest message, the send timeout and the pending bound must be positive")
	case c.DeadLetterTopic != "" && checkTopic(c.DeadLetterTopic) != "":
		return fmt.Errorf("rocketmq: dead-letter topic %q %s (--dlq-topic)", c.DeadLetterTopic, checkTopic(c.DeadLetterTopic))
	}
	return nil
}

// MaxTopicLength is the longest topic name RocketMQ takes.
const MaxTopicLength = 127

// checkTopic says why RocketMQ does not take topic as a topic's name, ""
// when it does (the Java client's Validators.checkTopic and
// isNotAllowedSendTopic).
func checkTopic(topic string) string {
	switch {
	case !validName(topic, MaxTopicLength):
		return "is not 1 to 127 of letters, digits, '%', '|', '-' and '_' (RocketMQ takes no '.': rename it with route.topic.replacement or a RegexRouter)"
	case notAllowed[topic]:
		return "is one of RocketMQ's system topics"
	}
	return ""
}

// notAllowed are the system topics the Java client sends nothing to
// (TopicValidator's NOT_ALLOWED_SEND_TOPIC_SET), and TBW102, the broker's
// template for topics it creates.
var notAllowed = map[string]bool{
	"TBW102": true, "SCHEDULE_TOPIC_XXXX": true, "RMQ_SYS_TRANS_HALF_TOPIC": true, "RMQ_SYS_TRANS_OP_HALF_TOPIC": true,
	"TRANS_CHECK_MAX_TIME_TOPIC": true, "SELF_TEST_TOPIC": true, "OFFSET_MOVED_EVENT": true,
}

// validName tells s is 1 to max of RocketMQ's characters for a topic or a
// group (TopicValidator.isTopicOrGroupIllegal).
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '%' || c == '|' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
