package debezium

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// rabbitStreamSink starts the RabbitMQ Streams sink's options.
const rabbitStreamSink = "debezium.sink.rabbitmqstream."

// rabbitStreamOptions are Debezium Server's rabbitmqstream sink's options
// (RabbitMqStreamNativeChangeConsumerConfig). The server's address, the
// confirm timeouts and the formats are read together
// (rabbitStreamSettings).
var rabbitStreamOptions = []Option{
	{Part: Server, Key: rabbitStreamSink + "host", Default: "localhost", Setting: "rabbitmqstream-host", Takes: "any; `connection.host` over it, as Debezium Server takes it", read: accept},
	{Part: Server, Key: rabbitStreamSink + "port", Default: "5552", Setting: "rabbitmqstream-port", Takes: "a port; `connection.port` over it",
		Refuses: "what is not a port", read: accept},
	{Part: Server, Key: rabbitStreamSink + "connection.host", Setting: "rabbitmqstream-host", Takes: "any (deprecated by Debezium Server, which takes it over `host`)", read: accept},
	{Part: Server, Key: rabbitStreamSink + "connection.port", Setting: "rabbitmqstream-port", Takes: "a port (deprecated, over `port`)", Refuses: "what is not a port", read: accept},
	{Part: Server, Key: rabbitStreamSink + "username", Default: "guest", Setting: "rabbitmqstream-user", Takes: "any", read: toFlag("rabbitmqstream-user")},
	{Part: Server, Key: rabbitStreamSink + "password", Default: "guest", Setting: "rabbitmqstream-password", Takes: "any", read: toFlag("rabbitmqstream-password")},
	{Part: Server, Key: rabbitStreamSink + "virtualHost", Default: "/", Setting: "rabbitmqstream-vhost", Takes: "any", read: toFlag("rabbitmqstream-vhost")},
	{Part: Server, Key: rabbitStreamSink + "tls.enable", Default: "false", Setting: "rabbitmqstream-tls",
		Takes:   "`true`, `false`; pgoutbox verifies the server's certificate against the system's roots (as Debezium Server, with the JVM's) or `--rabbitmqstream-tls-ca`",
		Refuses: "another value", read: boolFlag("rabbitmqstream-tls")},
	{Part: Server, Key: rabbitStreamSink + "tls.serverName", Setting: Ignored,
		Takes: "ignored, as by Debezium Server 3.6, which builds an engine with it that it never uses; `--rabbitmqstream-tls-server-name` names the one in the certificate",
		read:  ignore("Debezium Server 3.6 does not use it either; --rabbitmqstream-tls-server-name names the one in the certificate")},
	{Part: Server, Key: rabbitStreamSink + "rpcTimeout", Default: "10", Setting: "rabbitmqstream-rpc-timeout", Takes: "seconds",
		Refuses: "a value that is not a positive number", read: seconds("rabbitmqstream-rpc-timeout")},
	{Part: Server, Key: rabbitStreamSink + "requestedMaxFrameSize", Default: "0", Setting: "rabbitmqstream-max-frame-bytes",
		Takes: "bytes; `0`, the server's frame_max, which pgoutbox takes as RabbitMQ's default, 1 MiB (`--rabbitmqstream-max-frame-bytes` for another)", Refuses: "a negative value",
		read: func(r *reading, k, v string) {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			switch {
			case err != nil || n < 0:
				r.refuse(k, fmt.Sprintf("%q is not a number of bytes", v))
			case n > 0:
				r.set("rabbitmqstream-max-frame-bytes", strconv.Itoa(n))
			}
		}},
	{Part: Server, Key: rabbitStreamSink + "stream", Setting: "rabbitmqstream-stream", Takes: "any; unset, the stream named like the topic", read: toFlag("rabbitmqstream-stream")},
	{Part: Server, Key: rabbitStreamSink + "stream.maxAge", Setting: "rabbitmqstream-max-age", Takes: "an ISO-8601 duration (`PT1H`, `P7D`), as Java's `Duration.parse`",
		Refuses: "another value, which Debezium Server fails on", read: func(r *reading, k, v string) {
			d, err := isoDuration(strings.TrimSpace(v))
			if err != nil {
				r.refuse(k, err.Error())
				return
			}
			r.set("rabbitmqstream-max-age", d.String())
		}},
	{Part: Server, Key: rabbitStreamSink + "stream.maxLength", Setting: "rabbitmqstream-max-length", Takes: "a size: digits, then `kb`, `mb`, `gb`, `tb` or nothing",
		Refuses: "another value", read: byteCapacity("rabbitmqstream-max-length")},
	{Part: Server, Key: rabbitStreamSink + "stream.maxSegmentSize", Setting: "rabbitmqstream-max-segment-size", Takes: "a size, as `stream.maxLength`",
		Refuses: "another value", read: byteCapacity("rabbitmqstream-max-segment-size")},
	{Part: Server, Key: rabbitStreamSink + "superStream.enable", Default: "false", Takes: "`false`",
		Refuses: "`true`: super streams are not implemented (RabbitMQ 3.11 and later have them)",
		read: func(r *reading, k, v string) {
			if b, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil || b {
				r.refuse(k, fmt.Sprintf("%q: super streams (partitioned streams) are not implemented; publish to one stream", v))
			}
		}},
	{Part: Server, Key: rabbitStreamSink + "superStream.", Setting: Ignored, Takes: "ignored without `superStream.enable`, as Debezium Server ignores it",
		read: ignore("without superStream.enable, as Debezium Server")},
	{Part: Server, Key: rabbitStreamSink + "producer.name", Setting: "rabbitmqstream-producer-name", Takes: "any", read: toFlag("rabbitmqstream-producer-name")},
	{Part: Server, Key: rabbitStreamSink + "producer.filterValue",
		Refuses: "any: stream filtering is not implemented (RabbitMQ 3.13 and later have it)",
		read:    refuse("stream filtering (a filter value per message, RabbitMQ 3.13 and later) is not implemented")},
	{Part: Server, Key: rabbitStreamSink + "producer.batchSize", Default: "100", Setting: "rabbitmqstream-batch-size", Takes: "a positive number",
		Refuses: "other values", read: intIn("rabbitmqstream-batch-size", 1, 1<<20)},
	{Part: Server, Key: rabbitStreamSink + "producer.subEntrySize", Default: "1", Setting: Ignored,
		Takes: "`1`; more is ignored: each message is its own entry (a consumer reads the same messages)",
		read: func(r *reading, k, v string) {
			if strings.TrimSpace(v) != "1" {
				r.ignore(k + " (each message is its own entry; a consumer reads the same messages)")
			}
		}},
	{Part: Server, Key: rabbitStreamSink + "producer.maxUnconfirmedMessages", Default: "10000", Setting: Ignored,
		Takes: "ignored: `--max-buffered-records` bounds the messages waiting for their confirm",
		read:  ignore("--max-buffered-records bounds the messages waiting for their confirm")},
	{Part: Server, Key: rabbitStreamSink + "producer.confirmTimeout", Default: "30", Setting: "rabbitmqstream-ack-timeout",
		Takes: "seconds, each message's; `batchConfirmTimeout` when shorter", Refuses: "a value that is not a positive number", read: accept},
	{Part: Server, Key: rabbitStreamSink + "batchConfirmTimeout", Default: "30", Setting: "rabbitmqstream-ack-timeout",
		Takes: "seconds: no message waits longer for its confirm", Refuses: "a value that is not a positive number", read: accept},
	{Part: Server, Key: rabbitStreamSink + "null.value", Default: "default", Setting: "rabbitmqstream-null-value", Takes: "any", read: toFlag("rabbitmqstream-null-value")},
	{Part: Server, Key: rabbitStreamSink, Setting: Ignored,
		Takes: "ignored (`requestedHeartbeat`, `max*ByConnection`, `id`, `producer.enqueueTimeout`, `producer.batchPublishingDelay`): pgoutbox connects again itself and sends again what was not confirmed",
		read:  ignore("pgoutbox connects again itself and sends again what was not confirmed")},
}

func init() { options = append(options, rabbitStreamOptions...) }

// rabbitStreamSettings reads what the sink's options say together: the
// server's address (the deprecated connection.host and connection.port
// over host and port, as Debezium Server takes them), the confirm timeout
// (the shorter of a message's and a batch's), and the formats the sink
// fails on at its first record: its message-id is the key as text, its
// application properties the headers as text.
func (c config) rabbitStreamSettings(r *reading) {
	if strings.TrimSpace(c.other["debezium.sink.type"]) != "rabbitmqstream" {
		return
	}
	get := func(k string) (string, bool) {
		v, ok := c.other[rabbitStreamSink+k]
		return strings.TrimSpace(v), ok
	}
	for _, pair := range [][2]string{{"connection.host", "host"}, {"connection.port", "port"}} {
		k, v, ok := pair[0], "", false
		if v, ok = get(pair[0]); !ok {
			k = pair[1]
			v, ok = get(pair[1])
		}
		if !ok {
			continue
		}
		flag := "rabbitmqstream-" + pair[1]
		if pair[1] == "port" {
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
				r.refuse(rabbitStreamSink+k, fmt.Sprintf("%q is not a port", v))
				continue
			}
		}
		r.set(flag, v)
	}
	timeout := time.Duration(0)
	for _, k := range []string{"producer.confirmTimeout", "batchConfirmTimeout"} {
		v, ok := get(k)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			r.refuse(rabbitStreamSink+k, fmt.Sprintf("%q is not a positive number of seconds", v))
			continue
		}
		if d := time.Duration(n) * time.Second; timeout == 0 || d < timeout {
			timeout = d
		}
	}
	if timeout > 0 {
		r.set("rabbitmqstream-ack-timeout", timeout.String())
	}
	switch f := strings.TrimSpace(c.other["debezium.format.key"]); f {
	case "jsonbytearray", "binary":
		r.refuse("debezium.format.key", fmt.Sprintf("%q with debezium.sink.type=rabbitmqstream: the sink sends the key as the message-id text and fails at the first record of bytes (use json or simplestring)", f))
	}
	if strings.TrimSpace(c.other["debezium.format.header"]) == "jsonbytearray" {
		r.refuse("debezium.format.header", `"jsonbytearray" with debezium.sink.type=rabbitmqstream: the sink sends headers as text properties and fails at the first record with a header (use json)`)
	}
}

// seconds passes a positive number of seconds to flag as a duration.
func seconds(flag string) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			r.refuse(k, fmt.Sprintf("%q is not a positive number of seconds", v))
			return
		}
		r.set(flag, (time.Duration(n) * time.Second).String())
	}
}

// byteCapacity checks a size as the stream client's ByteCapacity.from
// reads it and passes it to flag.
func byteCapacity(flag string) func(*reading, string, string) {
	return func(r *reading, k, v string) {
		v = strings.TrimSpace(v)
		if !byteCapacityText.MatchString(v) {
			r.refuse(k, fmt.Sprintf("%q is not a size: digits, then kb, mb, gb, tb or nothing", v))
			return
		}
		r.set(flag, v)
	}
}

// byteCapacityText is ByteCapacity.from's pattern.
var byteCapacityText = regexp.MustCompile(`^\d+(kb|mb|gb|tb)?$`)

// isoDuration reads an ISO-8601 duration as Java's Duration.parse does:
// PnDTnHnMn.nS, each part optional but one, a sign before the whole or a
// part, the seconds with up to nine decimals, any case.
func isoDuration(s string) (time.Duration, error) {
	m := isoDurationText.FindStringSubmatch(strings.ToUpper(s))
	if m == nil || m[2] == "" && m[3] == "" && m[4] == "" && m[5] == "" || strings.HasSuffix(strings.ToUpper(s), "T") {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration (PT1H, P7D, PT30M)", s)
	}
	var total time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
		if m[2+i] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[2+i], 10, 64)
		if err != nil || n > int64(1<<62)/int64(unit) || n < -int64(1<<62)/int64(unit) {
			return 0, fmt.Errorf("%q is out of range", s)
		}
		total += time.Duration(n) * unit
	}
	if m[5] != "" {
		f, err := strconv.ParseFloat(m[5], 64)
		if err != nil || f > float64(1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("%q is out of range", s)
		}
		total += time.Duration(f * float64(time.Second))
	}
	if m[1] == "-" {
		total = -total
	}
	if total <= 0 {
		return 0, fmt.Errorf("%q: a stream's max age must be positive", s)
	}
	return total, nil
}

var isoDurationText = regexp.MustCompile(`^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:[.,]\d{0,9})?)S)?)?$`)
