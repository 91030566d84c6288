package debezium

import "strings"

// pubsubSink starts the Pub/Sub sink's options.
const pubsubSink = "debezium.sink.pubsub."

// pubsubOptions are Debezium Server's pubsub sink's options
// (PubSubChangeConsumerConfig).
var pubsubOptions = []Option{
	{Part: Server, Key: pubsubSink + "project.id", Setting: "pubsub-project", Takes: "a project; unset, the credentials' (`GOOGLE_CLOUD_PROJECT`), as Debezium Server's",
		read: toFlag("pubsub-project")},
	{Part: Server, Key: pubsubSink + "address", Setting: "pubsub-address", Takes: "an emulator's `host:port`", read: toFlag("pubsub-address")},
	{Part: Server, Key: pubsubSink + "region", Setting: "pubsub-region", Takes: "a region: `<region>-pubsub.googleapis.com`", read: toFlag("pubsub-region")},
	{Part: Server, Key: pubsubSink + "ordering.enabled", Default: "true", Setting: "pubsub-ordering", Takes: "`true`, `false`",
		Refuses: "another value", read: boolFlag("pubsub-ordering")},
	{Part: Server, Key: pubsubSink + "ordering.key", Setting: "pubsub-ordering-key", Takes: "one ordering key for every message", read: toFlag("pubsub-ordering-key")},
	{Part: Server, Key: pubsubSink + "null.key", Default: "default", Setting: "pubsub-null-key", Takes: "any", read: toFlag("pubsub-null-key")},
	{Part: Server, Key: pubsubSink + "batch.delay.threshold.ms", Default: "100", Setting: Ignored,
		Takes: "ignored: a request carries what arrived while the one before it was out, and waits for nothing more",
		read:  ignore("a request carries what arrived while the one before it was out")},
	{Part: Server, Key: pubsubSink + "batch.element.count.threshold", Default: "100", Setting: "pubsub-batch-count", Takes: "1 to 1000, Pub/Sub's most",
		Refuses: "another value", read: intIn("pubsub-batch-count", 1, 1000)},
	{Part: Server, Key: pubsubSink + "batch.request.byte.threshold", Default: "9500000", Setting: "pubsub-batch-bytes", Takes: "a positive number",
		Refuses: "another value", read: intIn("pubsub-batch-bytes", 1, 1<<30)},
	{Part: Server, Key: pubsubSink + "wait.message.delivery.timeout.ms", Default: "30000", Setting: "pubsub-timeout", Takes: "milliseconds, each request's wait for Pub/Sub's answer",
		Refuses: "a value that is not a positive number", read: millis("pubsub-timeout")},
	{Part: Server, Key: pubsubSink + "retry.", Setting: Ignored,
		Takes: "ignored: the client's own retries; a message without an answer in time is sent again from the last confirmed position",
		read:  ignore("the Pub/Sub client's own retries")},
	{Part: Server, Key: pubsubSink + "flowcontrol.", Setting: Ignored, Takes: "ignored: `--max-buffered-records` bounds what waits",
		read: ignore("--max-buffered-records bounds what waits")},
	{Part: Server, Key: pubsubSink + "concurrency.threads", Setting: Ignored, Takes: "ignored: the client's goroutines", read: ignore("the client's goroutines")},
	{Part: Server, Key: pubsubSink + "compression.threshold.bytes", Setting: Ignored, Takes: "ignored: the transport's compression changes no message",
		read: ignore("the transport's compression changes no message")},
	{Part: Server, Key: pubsubSink + "channel.shutdown.timeout.ms", Setting: Ignored, Takes: "ignored", read: ignore("")},
}

func init() { options = append(options, pubsubOptions...) }

// pubsubSettings refuses what Debezium Server's pubsub sink fails on at
// its first record: headers in bytes (its attributes are text).
func pubsubSettings(c config, r *reading) {
	if strings.TrimSpace(c.other["debezium.sink.type"]) != "pubsub" {
		return
	}
	if strings.TrimSpace(c.other["debezium.format.header"]) == "jsonbytearray" {
		r.refuse("debezium.format.header", `"jsonbytearray" with debezium.sink.type=pubsub: the sink sends headers as text attributes and fails at the first record with a header (use json)`)
	}
}
