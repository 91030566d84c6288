package debezium

import "testing"

func TestResolveAliases(t *testing.T) {
	for _, c := range []struct{ key, value, want string }{
		// Debezium's task fails on the connector's alias: refused later.
		{"connector.class", "PostgresConnector", "PostgresConnector"},
		{"value.converter", "JsonConverter", jsonConverter},
		{"value.converter", "Json", jsonConverter},
		{"key.converter", "String", stringConverter},
		{"key.converter", "Long", "org.apache.kafka.connect.converters.LongConverter"},
		{"value.converter", "CloudEvents", cloudEventsConverter},
		{"header.converter", "Simple", simpleHeaderConverter},
		{"header.converter", "SimpleHeaderConverter", simpleHeaderConverter},
		// Kafka's and Debezium's share the name: no alias, as in Connect.
		{"value.converter", "ByteArrayConverter", "ByteArrayConverter"},
		{"value.converter", "ByteArray", "ByteArray"},
		{"transforms.a.type", "EventRouter", EventRouterClass},
		{"transforms.a.type", "ExtractNewRecordState", "io.debezium.transforms.ExtractNewRecordState"},
		{"transforms.a.type", "PartitionRouting", "io.debezium.transforms.partitions.PartitionRouting"},
		{"transforms.a.type", "RegexRouter", "org.apache.kafka.connect.transforms.RegexRouter"},
		// A nested class's simple name is shared by all of its kind.
		{"transforms.a.type", "Value", "Value"},
		{"transforms.a.type", "Filter", "Filter"},
		{"predicates.p.type", "TopicNameMatches", "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"},
		{"value.converter", "org.apache.kafka.connect.json.JsonConverter", jsonConverter},
	} {
		props := map[string]string{"transforms": "a", "predicates": " p ", c.key: c.value}
		resolveAliases(props)
		if props[c.key] != c.want {
			t.Errorf("%s=%q: %q, want %q", c.key, c.value, props[c.key], c.want)
		}
	}
	// Only a transform's type: the router's table.field.event.type names a column.
	props := map[string]string{"transforms": "outbox", "transforms.outbox.table.field.event.type": "Json"}
	resolveAliases(props)
	if got := props["transforms.outbox.table.field.event.type"]; got != "Json" {
		t.Errorf("an option ending in .type was read as a class: %q", got)
	}
}
