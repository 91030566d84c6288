package debezium

import (
	"strings"
	"testing"
)

// provide.transaction.metadata turns --transaction-metadata on or off,
// and topic.transaction names the topic after topic.prefix, in either
// form of configuration.
func TestTransactionMetadataOptions(t *testing.T) {
	for _, tt := range []struct {
		name, conf    string
		meta, topic   string
		hasTopic      bool
		refusedSubstr string
	}{
		{name: "on", conf: `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop", "provide.transaction.metadata": "true"}`,
			meta: "true"},
		{name: "off", conf: `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "provide.transaction.metadata": "false"}`,
			meta: "false"},
		{name: "topic", conf: `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "shop", "provide.transaction.metadata": "TRUE", "topic.transaction": "tx"}`,
			meta: "true", topic: "shop.tx", hasTopic: true},
		{name: "server", conf: "debezium.sink.type=kafka\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
			"debezium.source.topic.prefix=shop\ndebezium.source.provide.transaction.metadata=true\ndebezium.source.topic.transaction=orders_tx\n",
			meta: "true", topic: "shop.orders_tx", hasTopic: true},
		{name: "not a boolean", conf: `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "provide.transaction.metadata": "yes"}`,
			refusedSubstr: "provide.transaction.metadata: "},
	} {
		tr, ok, err := Read([]byte(tt.conf))
		if !ok {
			t.Fatalf("%s: not read", tt.name)
		}
		if tt.refusedSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.refusedSubstr) {
				t.Errorf("%s: %v, want a refusal naming %q", tt.name, err, tt.refusedSubstr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got, _ := settingOf(tr, "transaction-metadata"); got != tt.meta {
			t.Errorf("%s: --transaction-metadata %q, want %q", tt.name, got, tt.meta)
		}
		if got, ok := settingOf(tr, "transaction-topic"); ok != tt.hasTopic || got != tt.topic {
			t.Errorf("%s: --transaction-topic %q (%v), want %q", tt.name, got, ok, tt.topic)
		}
	}
}
