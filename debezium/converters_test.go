package debezium

import (
	"strings"
	"testing"
)

// Debezium's CloudEventsConverter: the options pgoutbox writes as
// Debezium does become a cloudevents value converter; the others are
// refused naming the key and why.
func TestCloudEventsConverter(t *testing.T) {
	const base = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "value.converter": "io.debezium.converters.CloudEventsConverter"`
	for _, tt := range []struct {
		name, opts, want, refused string
		metadata                  string // --cloudevents-metadata-source, "" for none
	}{
		{name: "defaults", want: "cloudevents:json-schemas"},
		{name: "data without schemas", opts: `"value.converter.json.schemas.enable": "false"`, want: "cloudevents:json"},
		{name: "json serializers", opts: `"value.converter.serializer.type": "json", "value.converter.data.serializer.type": "JSON"`, want: "cloudevents:json-schemas"},
		{name: "default metadata source", opts: `"value.converter.metadata.source": "value,id:generate,type:generate,traceparent:header,dataSchemaName:generate"`, want: "cloudevents:json-schemas"},
		{name: "metadata source generating id and type", opts: `"value.converter.metadata.source": "value, id:generate, type:generate"`, want: "cloudevents:json-schemas"},
		{name: "avro data without a registry", opts: `"value.converter.data.serializer.type": "avro"`, refused: "avro.apicurio.registry.url"},
		{name: "avro envelope with json data", opts: `"value.converter.serializer.type": "avro", "value.converter.avro.apicurio.registry.url": "http://r/apis/registry/v2"`, refused: "Cannot use 'application/json'"},
		{name: "unknown serializer", opts: `"value.converter.serializer.type": "protobuf"`, refused: "serializer.type=protobuf: want json or avro"},
		{name: "no extension attributes", opts: `"value.converter.extension.attributes.enable": "false"`, refused: "extension.attributes.enable=false"},
		{name: "tracing attributes", opts: `"value.converter.opentelemetry.tracing.attributes.enable": "true"`, refused: "opentelemetry.tracing.attributes.enable=true"},
		{name: "metadata from headers", opts: `"value.converter.metadata.source": "header"`, want: "cloudevents:json-schemas", metadata: "header,id:header,type:header"},
		{name: "metadata from headers, id generated", opts: `"value.converter.metadata.source": "header,id:generate"`, want: "cloudevents:json-schemas", metadata: "header,id:generate,type:header"},
		{name: "id from a header", opts: `"value.converter.metadata.source": "value,id:header,type:generate"`, refused: "id or type from a header with the metadata from the value"},
		{name: "unknown metadata source", opts: `"value.converter.metadata.source": "value,id:random,type:generate"`, refused: "the sources are generate and header"},
		{name: "id from the value", opts: `"value.converter.metadata.source": "value"`, refused: "Debezium's task fails"},
		{name: "as the key converter", opts: `"key.converter": "io.debezium.converters.CloudEventsConverter"`, refused: "key.converter: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conf := base
			if tt.opts != "" {
				conf += ",\n  " + tt.opts
			}
			tr, err := translateConnect(t, conf+"}")
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("err %v, want a refusal naming %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := settingOf(tr, "value-converter"); got != tt.want {
				t.Errorf("--value-converter %q, want %q", got, tt.want)
			}
			if got, _ := settingOf(tr, "cloudevents-metadata-source"); got != tt.metadata {
				t.Errorf("--cloudevents-metadata-source %q, want %q", got, tt.metadata)
			}
		})
	}
}

// Debezium Server's cloudevents value format is CloudEventsConverter,
// with its options under debezium.format.value.*; not a key or header
// format.
func TestCloudEventsServerFormat(t *testing.T) {
	const base = "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\ndebezium.sink.type=kafka\n"
	tr, ok, err := Read([]byte(base + "debezium.format.value=cloudevents\ndebezium.format.value.json.schemas.enable=false\n"))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if got, _ := settingOf(tr, "value-converter"); got != "cloudevents:json" {
		t.Errorf("--value-converter %q, want cloudevents:json", got)
	}
	for _, part := range []string{"key", "header"} {
		_, _, err := Read([]byte(base + "debezium.format." + part + "=cloudevents\n"))
		if err == nil || !strings.Contains(err.Error(), "debezium.format."+part) {
			t.Errorf("format.%s=cloudevents: %v", part, err)
		}
	}
}

// Apicurio's ExtJsonConverter, by its class or as Debezium Server's json
// format with a registry, is apicurio-json with the registry's options;
// its artifacts are named after topics only.
func TestApicurioJSONConverter(t *testing.T) {
	tr, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "value.converter": "io.apicurio.registry.utils.converter.ExtJsonConverter",
  "value.converter.apicurio.registry.url": "http://registry:8080/apis/registry/v2",
  "value.converter.apicurio.registry.auto-register": "true"}`)
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"value-converter": "apicurio-json", "value-registry-url": "http://registry:8080/apis/registry/v2",
		"value-registry-auto-register": "true", "value-registry-api": "apicurio"} {
		if got, _ := settingOf(tr, flag); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
	const server = "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\ndebezium.sink.type=kafka\n"
	tr, _, err = Read([]byte(server + "debezium.format.value=json\ndebezium.format.value.apicurio.registry.url=http://registry:8080/apis/registry/v2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := settingOf(tr, "value-converter"); got != "apicurio-json" {
		t.Errorf("Debezium Server's json with a registry: --value-converter %q, want apicurio-json", got)
	}
	if got, _ := settingOf(tr, "key-converter"); got != "json-schemas" {
		t.Errorf("the key without a registry: --key-converter %q, want json-schemas", got)
	}
	for _, conf := range []string{
		`{"value.converter": "io.apicurio.registry.utils.converter.ExtJsonConverter", "value.converter.apicurio.registry.url": "http://r",
  "value.converter.apicurio.registry.artifact-resolver-strategy": "io.apicurio.registry.serde.avro.strategy.RecordIdStrategy"}`,
		`{"header.converter": "io.apicurio.registry.utils.converter.ExtJsonConverter"}`,
	} {
		if _, err := translateConnect(t, conf); err == nil {
			t.Errorf("%s: accepted", conf)
		}
	}
}

// A converter class under another package is refused, as Kafka Connect
// cannot load it, naming the class of that name pgoutbox takes.
func TestConverterOfAnotherPackage(t *testing.T) {
	for class, want := range map[string]string{
		"io.debezium.converters.spi.BinaryDataConverter":      "io.debezium.converters.BinaryDataConverter is",
		"io.debezium.converters.spi.ByteArrayConverter":       "io.debezium.converters.ByteArrayConverter is",
		"org.apache.kafka.connect.storage.ByteArrayConverter": "org.apache.kafka.connect.converters.ByteArrayConverter is",
		"com.example.JsonConverter":                           "org.apache.kafka.connect.json.JsonConverter is",
		"com.example.MyConverter":                             "is not supported",
	} {
		_, err := translateConnect(t, `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "value.converter": "`+class+`"}`)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal saying %q", class, err, want)
		}
	}
}

// A class among a Debezium Server format's options names its converter,
// as ConverterBuilder takes it over the format's own; clientprovided
// needs one.
func TestServerFormatClass(t *testing.T) {
	const base = "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\ndebezium.sink.type=kafka\n"
	for _, tt := range []struct {
		name, props string
		want        map[string]string
		refused     string
	}{
		{"header class", "debezium.format.header.class=org.apache.kafka.connect.storage.SimpleHeaderConverter\n",
			map[string]string{"header-converter": "string", "key-converter": "json-schemas", "value-converter": "json-schemas"}, ""},
		{"value class over json", "debezium.format.value=json\ndebezium.format.value.class=org.apache.kafka.connect.storage.StringConverter\n",
			map[string]string{"value-converter": "string"}, ""},
		{"shared class", "debezium.format.class=org.apache.kafka.connect.storage.StringConverter\n",
			map[string]string{"key-converter": "string", "value-converter": "string", "header-converter": "string"}, ""},
		{"class over avro", "debezium.format.value=avro\ndebezium.format.value.class=org.apache.kafka.connect.json.JsonConverter\ndebezium.format.value.schemas.enable=false\n",
			map[string]string{"value-converter": "json"}, ""},
		{"class over a registry's json", "debezium.format.value.apicurio.registry.url=http://registry:8080/apis/registry/v2\ndebezium.format.value.class=org.apache.kafka.connect.json.JsonConverter\n",
			map[string]string{"value-converter": "json-schemas"}, ""},
		{"clientprovided", "debezium.format.key=clientprovided\ndebezium.format.key.class=org.apache.kafka.connect.json.JsonConverter\ndebezium.format.key.schemas.enable=false\n",
			map[string]string{"key-converter": "json"}, ""},
		{"clientprovided without a class", "debezium.format.key=clientprovided\n", nil, "debezium.format.key: clientprovided needs"},
		{"a class of no converter pgoutbox has", "debezium.format.value.class=com.example.MyConverter\n", nil, "debezium.format.value"},
		{"a header format Debezium Server refuses", "debezium.format.header=simplestring\ndebezium.format.header.class=org.apache.kafka.connect.storage.SimpleHeaderConverter\n", nil, "debezium.format.header"},
	} {
		tr, ok, err := Read([]byte(base + tt.props))
		if !ok {
			t.Fatalf("%s: not read", tt.name)
		}
		if tt.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tt.refused) {
				t.Errorf("%s: %v, want a refusal naming %q", tt.name, err, tt.refused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		for flag, want := range tt.want {
			if got, _ := settingOf(tr, flag); got != want {
				t.Errorf("%s: --%s %q, want %q", tt.name, flag, got, want)
			}
		}
	}
}
