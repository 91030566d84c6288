package debezium

import (
	"fmt"
	"strings"
)

// kinesisSink starts the Kinesis sink's options.
const kinesisSink = "debezium.sink.kinesis."

// kinesisOptions are Debezium Server's kinesis sink's options
// (KinesisChangeConsumerConfig).
var kinesisOptions = []Option{
	{Part: Server, Key: kinesisSink + "region", Setting: "kinesis-region", Takes: "a region; unset, `AWS_REGION` or the profile's (Debezium Server does not start without it)",
		read: toFlag("kinesis-region")},
	{Part: Server, Key: kinesisSink + "endpoint", Setting: "kinesis-endpoint", Takes: "an `http://` or `https://` URL", read: toFlag("kinesis-endpoint")},
	{Part: Server, Key: kinesisSink + "credentials.profile", Setting: "kinesis-profile", Takes: "a profile of the shared files; unset, AWS's default chain, as Debezium Server's",
		read: toFlag("kinesis-profile")},
	{Part: Server, Key: kinesisSink + "batch.size", Default: "500", Setting: "kinesis-batch-size", Takes: "1 to 500",
		Refuses: "another value, as Debezium Server refuses it", read: intIn("kinesis-batch-size", 1, 500)},
	{Part: Server, Key: kinesisSink + "default.retries", Default: "5", Setting: "kinesis-retries",
		Takes:   "a positive number: attempts at the entries Kinesis did not write before the relay starts again from its last confirmed position (Debezium Server stops there)",
		Refuses: "0 or less, on which Debezium Server fails its first batch", read: intIn("kinesis-retries", 1, 1<<20)},
	{Part: Server, Key: kinesisSink + "null.key", Default: "default", Setting: "kinesis-null-key", Takes: "1 to 256 characters",
		read: toFlag("kinesis-null-key")},
}

func init() { options = append(options, kinesisOptions...) }

// kinesisSettings refuses the key formats the sink fails on at its first
// record with a key: the partition key is the key as text.
func kinesisSettings(c config, r *reading) {
	if strings.TrimSpace(c.other["debezium.sink.type"]) != "kinesis" {
		return
	}
	switch f := strings.TrimSpace(c.other["debezium.format.key"]); f {
	case "jsonbytearray", "binary":
		r.refuse("debezium.format.key", fmt.Sprintf("%q with debezium.sink.type=kinesis: the sink sends the key as the partition key's text and fails at the first record of bytes (use json or simplestring)", f))
	}
}
