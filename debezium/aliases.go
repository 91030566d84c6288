package debezium

import (
	"strings"
)

// connectPlugins are the converters, transforms and predicates of a Kafka
// Connect 4 worker with Debezium's PostgreSQL connector on its plugin
// path, by the kind Kafka Connect prunes from their names
// (PluginType.simpleName), as their service files list them. The
// connector is not among them: Kafka Connect takes PostgresConnector and
// Postgres, but Debezium's task then loads connector.class by its name and
// fails (ClassNotFoundException). Kafka's Filter is left
// out: Debezium's scripting module, on many workers, has a Filter too,
// which makes the name no alias there, and read as Kafka's it would drop
// every record.
var connectPlugins = []struct {
	kind    string
	classes []string
}{
	{"Converter", []string{
		stringConverter, jsonConverter, kafkaByteArray,
		"org.apache.kafka.connect.converters.DoubleConverter", "org.apache.kafka.connect.converters.FloatConverter",
		"org.apache.kafka.connect.converters.IntegerConverter", "org.apache.kafka.connect.converters.LongConverter",
		"org.apache.kafka.connect.converters.ShortConverter", "org.apache.kafka.connect.converters.BooleanConverter",
		binaryDataConverter, debeziumByteArray, cloudEventsConverter,
	}},
	{"HeaderConverter", []string{
		simpleHeaderConverter, stringConverter, jsonConverter, kafkaByteArray,
		"org.apache.kafka.connect.converters.DoubleConverter", "org.apache.kafka.connect.converters.FloatConverter",
		"org.apache.kafka.connect.converters.IntegerConverter", "org.apache.kafka.connect.converters.LongConverter",
		"org.apache.kafka.connect.converters.ShortConverter", "org.apache.kafka.connect.converters.BooleanConverter",
		binaryDataConverter, debeziumByteArray,
	}},
	{"Transformation", []string{
		"org.apache.kafka.connect.transforms.Cast$Key", "org.apache.kafka.connect.transforms.Cast$Value",
		"org.apache.kafka.connect.transforms.DropHeaders",
		"org.apache.kafka.connect.transforms.ExtractField$Key", "org.apache.kafka.connect.transforms.ExtractField$Value",
		"org.apache.kafka.connect.transforms.Flatten$Key", "org.apache.kafka.connect.transforms.Flatten$Value",
		"org.apache.kafka.connect.transforms.HeaderFrom$Key", "org.apache.kafka.connect.transforms.HeaderFrom$Value",
		"org.apache.kafka.connect.transforms.HoistField$Key", "org.apache.kafka.connect.transforms.HoistField$Value",
		"org.apache.kafka.connect.transforms.InsertField$Key", "org.apache.kafka.connect.transforms.InsertField$Value",
		"org.apache.kafka.connect.transforms.InsertHeader",
		"org.apache.kafka.connect.transforms.MaskField$Key", "org.apache.kafka.connect.transforms.MaskField$Value",
		"org.apache.kafka.connect.transforms.RegexRouter",
		"org.apache.kafka.connect.transforms.ReplaceField$Key", "org.apache.kafka.connect.transforms.ReplaceField$Value",
		"org.apache.kafka.connect.transforms.SetSchemaMetadata$Key", "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
		"org.apache.kafka.connect.transforms.TimestampConverter$Key", "org.apache.kafka.connect.transforms.TimestampConverter$Value",
		"org.apache.kafka.connect.transforms.TimestampRouter",
		"org.apache.kafka.connect.transforms.ValueToKey",
		"io.debezium.transforms.ByLogicalTableRouter", "io.debezium.transforms.EnforceRecordSize",
		"io.debezium.transforms.ExtractChangedRecordState", "io.debezium.transforms.ExtractNewRecordState",
		"io.debezium.transforms.ExtractSchemaToNewRecord", "io.debezium.transforms.HeaderToValue",
		"io.debezium.transforms.SchemaChangeEventFilter", "io.debezium.transforms.TimezoneConverter",
		EventRouterClass, "io.debezium.transforms.partitions.PartitionRouting",
		"io.debezium.transforms.tracing.ActivateTracingSpan", "io.debezium.transforms.VectorToJsonConverter",
		"io.debezium.transforms.openlineage.OpenLineage", "io.debezium.transforms.SwapGeometryCoordinates",
		"io.debezium.transforms.GeometryFormatTransformer",
		"io.debezium.connector.postgresql.transforms.timescaledb.TimescaleDb",
		"io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
	}},
	{"Predicate", []string{
		"org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
		"org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
		"org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
	}},
}

// connectAliases are the other names Kafka Connect takes for those
// plugins' classes (PluginUtils.computeAliases): a class's simple name,
// and that name cut before its last occurrence of its kind (JsonConverter
// and Json, SimpleHeaderConverter and Simple), each where it names one
// class only. Kafka's ByteArrayConverter and Debezium's share theirs, and
// a nested class's simple name is Key or Value: none of those is an alias.
var connectAliases = func() map[string]string {
	classes := map[string]map[string]bool{}
	add := func(alias, class string) {
		if classes[alias] == nil {
			classes[alias] = map[string]bool{}
		}
		classes[alias][class] = true
	}
	for _, p := range connectPlugins {
		for _, class := range p.classes {
			simple := class[strings.LastIndexAny(class, ".$")+1:]
			add(simple, class)
			if i := strings.LastIndex(simple, p.kind); i > 0 {
				add(simple[:i], class)
			}
		}
	}
	aliases := map[string]string{}
	for alias, cs := range classes {
		if len(cs) == 1 {
			for class := range cs {
				aliases[alias] = class
			}
		}
	}
	return aliases
}()

// resolveAliases writes the class-valued options of a Kafka Connect
// configuration (the converters, each transform's and predicate's type)
// by their full class names where they name a plugin by its alias, as
// Kafka Connect's plugin class loader reads them. Debezium Server's files
// are not read through this: no Debezium Server run here used an alias.
func resolveAliases(props map[string]string) {
	keys := []string{"key.converter", "value.converter", "header.converter"}
	for _, list := range []string{"transforms", "predicates"} {
		for _, a := range strings.Split(props[list], ",") {
			if a = strings.TrimSpace(a); a != "" {
				keys = append(keys, list+"."+a+".type")
			}
		}
	}
	for _, k := range keys {
		if class, ok := connectAliases[strings.TrimSpace(props[k])]; ok {
			props[k] = class
		}
	}
}
