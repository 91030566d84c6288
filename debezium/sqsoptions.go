package debezium

import (
	"fmt"
	"strings"
)

// sqsSink starts the SQS sink's options.
const sqsSink = "debezium.sink.sqs."

// sqsOptions are Debezium Server's sqs sink's options
// (SqsChangeConsumerConfig).
var sqsOptions = []Option{
	{Part: Server, Key: sqsSink + "region", Setting: "sqs-region", Takes: "a region; unset, `AWS_REGION` or the profile's (Debezium Server does not start without it)",
		read: toFlag("sqs-region")},
	{Part: Server, Key: sqsSink + "endpoint", Setting: "sqs-endpoint", Takes: "an `http://` or `https://` URL", read: toFlag("sqs-endpoint")},
	{Part: Server, Key: sqsSink + "queue.url", Setting: "sqs-queue-url", Takes: "the queue's URL; `.fifo` at its end, a FIFO queue",
		read: toFlag("sqs-queue-url")},
	{Part: Server, Key: sqsSink + "credentials.profile", Setting: "sqs-profile", Takes: "a profile of the shared files; unset, AWS's default chain, as Debezium Server's",
		read: toFlag("sqs-profile")},
	{Part: Server, Key: sqsSink + "fifo.message.group.id", Default: "cdc-group", Setting: "sqs-group-id", Takes: "1 to 128 letters, digits and punctuation",
		read: toFlag("sqs-group-id")},
}

func init() { options = append(options, sqsOptions...) }

// sqsSettings refuses what Debezium Server's sqs sink cannot run: no
// queue URL (it does not start), and a value format in bytes, whose body
// would be a Java array's name ("[B@...").
func sqsSettings(c config, r *reading) {
	if strings.TrimSpace(c.other["debezium.sink.type"]) != "sqs" {
		return
	}
	if strings.TrimSpace(c.other[sqsSink+"queue.url"]) == "" {
		r.refuse("debezium.sink.type", `"sqs" without debezium.sink.sqs.queue.url: Debezium Server's sqs sink does not start without it`)
	}
	switch f := strings.TrimSpace(c.other["debezium.format.value"]); f {
	case "jsonbytearray", "binary":
		r.refuse("debezium.format.value", fmt.Sprintf("%q with debezium.sink.type=sqs: the sink sends the value's toString as the body, which for bytes is the name of a Java array (use json, simplestring or cloudevents)", f))
	}
}
