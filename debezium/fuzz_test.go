package debezium

import (
	"strings"
	"testing"
)

// FuzzRead feeds random files to Read: nothing may panic, a file that is
// not a Debezium configuration gives no settings, and a refusal names at
// least one option.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"name": "c", "config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "time.precision.mode": "connect",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "slot.drop.on.stop": true,
  "value.converter": "io.debezium.converters.ByteBufferConverter", "database.password": "${env:PW}"}}`,
		"debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\ndebezium.format.value=binary\ndebezium.source.decimal.handling.mode=string\n",
		"kafka-brokers = k:9092\n",
		`{"config": [1]}`,
		"debezium.transforms=a,,b\ndebezium.transforms.a.type=x\n",
		"kind: KafkaConnector\nspec:\n  class: io.debezium.connector.postgresql.PostgresConnector\n  config:\n    database.port: 5432\n    transforms: outbox\n---\nkind: KafkaConnect\nspec:\n  config:\n    key.converter: x\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, ok, err := Read(data)
		if !ok && len(tr.Settings) > 0 {
			t.Fatalf("not a Debezium configuration, yet settings %v", tr.Settings)
		}
		if err != nil && strings.HasPrefix(err.Error(), "options pgoutbox cannot honour") && !strings.Contains(err.Error(), ": ") {
			t.Fatalf("a refusal names no option: %v", err)
		}
	})
}
