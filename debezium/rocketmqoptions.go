package debezium

import (
	"fmt"
	"strconv"
	"strings"
)

// rocketmqSink starts the RocketMQ sink's options.
const rocketmqSink = "debezium.sink.rocketmq."

// rocketmqOptions are Debezium Server's rocketmq sink's options
// (RocketMqChangeConsumerConfig).
var rocketmqOptions = []Option{
	{Part: Server, Key: rocketmqSink + "producer.name.srv.addr", Setting: "rocketmq-name-server", Takes: "`host:port`, several separated by `;`",
		read: toFlag("rocketmq-name-server")},
	{Part: Server, Key: rocketmqSink + "producer.group", Setting: "rocketmq-group", Takes: "a group's name (letters, digits, `%`, `|`, `-`, `_`); unset, `pgoutbox` (Debezium Server does not start without it)",
		read: toFlag("rocketmq-group")},
	{Part: Server, Key: rocketmqSink + "producer.acl.enabled", Default: "false", Setting: "rocketmq-access-key",
		Takes:   "`true`: requests signed with `producer.access.key` and `producer.secret.key`, as the Java client's AclClientRPCHook signs them; `false`: the keys are not read",
		Refuses: "`true` without both keys, as Debezium Server does; another value", read: func(r *reading, k, v string) {
			if _, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil {
				r.refuse(k, fmt.Sprintf("%q: want true or false", v))
			}
		}},
	{Part: Server, Key: rocketmqSink + "producer.access.key", Setting: "rocketmq-access-key", Takes: "an access key, read with `producer.acl.enabled=true`", read: accept},
	{Part: Server, Key: rocketmqSink + "producer.secret.key", Setting: "rocketmq-secret-key", Takes: "its secret, read with `producer.acl.enabled=true`", read: accept},
	{Part: Server, Key: rocketmqSink + "producer.max.message.size", Default: "4194304", Setting: "rocketmq-max-message-bytes", Takes: "bytes, the largest message sent, its body with its properties (the Java client compares it with the body alone)",
		Refuses: "a value that is not a positive number", read: func(r *reading, k, v string) {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n <= 0 {
				r.refuse(k, fmt.Sprintf("%q: a positive number of bytes", v))
				return
			}
			r.set("rocketmq-max-message-bytes", strconv.Itoa(n))
		}},
	{Part: Server, Key: rocketmqSink + "producer.send.msg.timeout", Default: "3000", Setting: "rocketmq-send-timeout", Takes: "milliseconds a request may wait for the broker's answer",
		Refuses: "a value that is not a positive number", read: millis("rocketmq-send-timeout")},
}

func init() { options = append(options, rocketmqOptions...) }

// rocketmqSettings reads what needs several keys: the ACL's, and the
// formats the sink takes (its key and headers are text: bytes fail its
// first record).
func rocketmqSettings(c config, r *reading) {
	if strings.TrimSpace(c.other["debezium.sink.type"]) != "rocketmq" {
		return
	}
	if acl, _ := strconv.ParseBool(strings.TrimSpace(c.other[rocketmqSink+"producer.acl.enabled"])); acl {
		ak, sk := strings.TrimSpace(c.other[rocketmqSink+"producer.access.key"]), strings.TrimSpace(c.other[rocketmqSink+"producer.secret.key"])
		if ak == "" || sk == "" {
			r.refuse(rocketmqSink+"producer.acl.enabled", "true without producer.access.key and producer.secret.key: Debezium Server does not start either")
		} else {
			r.set("rocketmq-access-key", ak)
			r.set("rocketmq-secret-key", sk)
		}
	}
	switch f := strings.TrimSpace(c.other["debezium.format.key"]); f {
	case "jsonbytearray", "binary":
		r.refuse("debezium.format.key", fmt.Sprintf("%q with debezium.sink.type=rocketmq: the sink picks the queue by the key's text and fails at the first record of bytes (use json or simplestring)", f))
	}
	if strings.TrimSpace(c.other["debezium.format.header"]) == "jsonbytearray" {
		r.refuse("debezium.format.header", `"jsonbytearray" with debezium.sink.type=rocketmq: the sink sends headers as text properties and fails at the first record with a header (use json)`)
	}
}
