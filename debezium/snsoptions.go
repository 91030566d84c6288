package debezium

import (
	"fmt"

	"github.com/pgoutbox/pgoutbox/schema"
)

// snsSink starts the SNS sink's options.
const snsSink = "debezium.sink.sns."

// snsOptions are Debezium Server's sns sink's options
// (SnsChangeConsumerConfig).
var snsOptions = []Option{
	{Part: Server, Key: snsSink + "region", Setting: "sns-region", Takes: "a region; unset, `AWS_REGION` or the profile's (Debezium Server does not start without it)",
		read: toFlag("sns-region")},
	{Part: Server, Key: snsSink + "endpoint", Setting: "sns-endpoint", Takes: "an `http://` or `https://` URL", read: toFlag("sns-endpoint")},
	{Part: Server, Key: snsSink + "credentials.profile", Setting: "sns-profile", Takes: "a profile of the shared files; unset, AWS's default chain, as Debezium Server's",
		read: toFlag("sns-profile")},
	{Part: Server, Key: snsSink + "topic.arn", Setting: "sns-topic-arn", Takes: "a topic's ARN; `.fifo` at its end, a FIFO topic: where an event goes whose destination is not an ARN, without `topic.arn.prefix`",
		read: toFlag("sns-topic-arn")},
	{Part: Server, Key: snsSink + "topic.arn.prefix", Setting: "sns-topic-arn-prefix", Takes: "an ARN's start (`arn:aws:sns:<region>:<account>:`): an event whose destination is not an ARN goes to it and the destination",
		read: toFlag("sns-topic-arn-prefix")},
	{Part: Server, Key: snsSink + "default.retries", Default: "5", Setting: "sns-retries", Takes: "1 to 100: the attempts of a request's messages SNS did not take",
		Refuses: "another value", read: intIn("sns-retries", 1, 100)},
	{Part: Server, Key: snsSink + "fifo.message.group.id.header", Default: "aggregateId", Setting: "sns-group-header", Takes: "a header's name",
		read: toFlag("sns-group-header")},
	{Part: Server, Key: snsSink + "fifo.message.dedup.id.header", Setting: "sns-dedup-header", Takes: "a header's name; unset, the event id (Debezium Server sends none: the topic must deduplicate by content)",
		read: toFlag("sns-dedup-header")},
	{Part: Server, Key: snsSink + "fifo.default.group.id", Default: "default", Setting: "sns-group-id", Takes: "1 to 128 letters, digits and punctuation",
		read: toFlag("sns-group-id")},
}

func init() { options = append(options, snsOptions...) }

// snsConverter is the converter pgoutbox writes a part with for
// Debezium Server's sns sink, which reads the Connect record itself: its
// key's and headers' text (toString, what StringConverter writes), and a
// value that is a String as it is, anything else through conv, the
// configured converter.
func snsConverter(r *reading, part, conv string) string {
	if part != "value" {
		return string(schema.ConvString)
	}
	text, err := schema.ParseConverter(string(schema.ConvText) + ":" + conv)
	switch {
	case err != nil:
		r.refuse("debezium.format.value", fmt.Sprintf("%q with debezium.sink.type=sns: the sink sends a value that is not text through the converter as text, which pgoutbox does with json, jsonbytearray, simplestring, binary and, after the Outbox Event Router, cloudevents", conv))
		return conv
	case schema.Converter(conv).IsCloudEvents() && r.router == "":
		// Change events are structs: the sink would send each as a
		// CloudEvent in JSON, which pgoutbox does not write for it.
		r.refuse("debezium.format.value", `"cloudevents" with debezium.sink.type=sns and change events: not implemented (after the Outbox Event Router, whose value is the payload's text, it is)`)
		return conv
	}
	return string(text)
}
