package debezium

import (
	"strings"
	"testing"
	"time"
)

const rabbitStreamBase = `debezium.sink.type=rabbitmqstream
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.topic.prefix=app
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
`

// Debezium Server's rabbitmqstream sink keys set the --rabbitmqstream-*
// flags: the deprecated connection.host and connection.port over host and
// port, the shorter confirm timeout; what the sink fails on at its first
// record, or what is not implemented, is refused at start naming the key.
func TestRabbitStreamSinkOptions(t *testing.T) {
	tr, _, err := Read([]byte(rabbitStreamBase + `debezium.sink.rabbitmqstream.host=ignored-host
debezium.sink.rabbitmqstream.connection.host=rabbit
debezium.sink.rabbitmqstream.port=5553
debezium.sink.rabbitmqstream.username=app
debezium.sink.rabbitmqstream.password=pw
debezium.sink.rabbitmqstream.virtualHost=prod
debezium.sink.rabbitmqstream.tls.enable=true
debezium.sink.rabbitmqstream.stream=events
debezium.sink.rabbitmqstream.stream.maxAge=P7D
debezium.sink.rabbitmqstream.stream.maxLength=20gb
debezium.sink.rabbitmqstream.stream.maxSegmentSize=500mb
debezium.sink.rabbitmqstream.producer.name=app-producer
debezium.sink.rabbitmqstream.producer.batchSize=50
debezium.sink.rabbitmqstream.producer.confirmTimeout=20
debezium.sink.rabbitmqstream.batchConfirmTimeout=5
debezium.sink.rabbitmqstream.producer.subEntrySize=10
debezium.sink.rabbitmqstream.requestedMaxFrameSize=2097152
debezium.sink.rabbitmqstream.rpcTimeout=3
debezium.sink.rabbitmqstream.requestedHeartbeat=30
debezium.sink.rabbitmqstream.null.value=gone
debezium.sink.rabbitmqstream.superStream.enable=false
`))
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"sink": "rabbitmqstream", "rabbitmqstream-host": "rabbit", "rabbitmqstream-port": "5553", "rabbitmqstream-user": "app",
		"rabbitmqstream-password": "pw", "rabbitmqstream-vhost": "prod", "rabbitmqstream-tls": "true", "rabbitmqstream-stream": "events",
		"rabbitmqstream-max-age": "168h0m0s", "rabbitmqstream-max-length": "20gb", "rabbitmqstream-max-segment-size": "500mb",
		"rabbitmqstream-producer-name": "app-producer", "rabbitmqstream-batch-size": "50", "rabbitmqstream-ack-timeout": "5s",
		"rabbitmqstream-max-frame-bytes": "2097152", "rabbitmqstream-rpc-timeout": "3s", "rabbitmqstream-null-value": "gone",
	} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
	ignored := strings.Join(tr.Ignored, "\n")
	for _, k := range []string{"producer.subEntrySize", "requestedHeartbeat"} {
		if !strings.Contains(ignored, rabbitStreamSink+k) {
			t.Errorf("%s not named among the ignored: %v", k, tr.Ignored)
		}
	}

	for _, tc := range []struct{ props, key string }{
		{"debezium.format.key=jsonbytearray\n", "debezium.format.key"},
		{"debezium.format.header=jsonbytearray\n", "debezium.format.header"},
		{"debezium.sink.rabbitmqstream.superStream.enable=true\n", "superStream.enable"},
		{"debezium.sink.rabbitmqstream.producer.filterValue=eventType\n", "producer.filterValue"},
		{"debezium.sink.rabbitmqstream.stream.maxAge=7d\n", "stream.maxAge"},
		{"debezium.sink.rabbitmqstream.stream.maxLength=20GiB\n", "stream.maxLength"},
		{"debezium.sink.rabbitmqstream.port=none\n", "debezium.sink.rabbitmqstream.port"},
		{"debezium.sink.rabbitmqstream.batchConfirmTimeout=0\n", "batchConfirmTimeout"},
	} {
		_, _, err := Read([]byte(rabbitStreamBase + tc.props))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want a refusal naming %s", strings.TrimSpace(tc.props), err, tc.key)
		}
	}
	// The value's bytes are sent as they are.
	if _, _, err := Read([]byte(rabbitStreamBase + "debezium.format.value=jsonbytearray\n")); err != nil {
		t.Errorf("jsonbytearray values: %v", err)
	}
}

// ISO-8601 durations as Java's Duration.parse reads them.
func TestISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT1H": time.Hour, "P7D": 7 * 24 * time.Hour, "pt30m": 30 * time.Minute, "PT1.5S": 1500 * time.Millisecond,
		"P1DT2H3M4S": 26*time.Hour + 3*time.Minute + 4*time.Second, "PT-30M1H": 0, "PT1H-30M": 30 * time.Minute,
	} {
		got, err := isoDuration(in)
		if want == 0 {
			if err == nil {
				t.Errorf("%s: %v, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "P1DT", "1h", "P1W", "PT-1H", "P1Y"} {
		if d, err := isoDuration(in); err == nil {
			t.Errorf("%q: %v, want an error", in, d)
		}
	}
}
