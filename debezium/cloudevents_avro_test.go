package debezium

import (
	"strings"
	"testing"
)

// CloudEventsConverter with Avro: the serializers become the converter,
// and the avro.* options the value's registry settings, with the id always
// before the datum.
func TestCloudEventsAvro(t *testing.T) {
	const base = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
  "value.converter": "io.debezium.converters.CloudEventsConverter"`
	for _, tt := range []struct {
		name, opts, want, refused string
		settings                  map[string]string
	}{
		{name: "avro event and data, Apicurio",
			opts: `"value.converter.serializer.type": "avro", "value.converter.data.serializer.type": "avro",
  "value.converter.avro.apicurio.registry.url": "http://r:8080/apis/registry/v2", "value.converter.avro.apicurio.registry.auto-register": "true",
  "value.converter.avro.apicurio.registry.headers.enabled": "true"`,
			want:     "cloudevents:avro:avro",
			settings: map[string]string{"value-registry-url": "http://r:8080/apis/registry/v2", "value-registry-api": "apicurio", "value-registry-auto-register": "true", "value-registry-headers": ""}},
		{name: "avro data in a JSON event, Apicurio's default registration",
			opts:     `"value.converter.data.serializer.type": "AVRO", "value.converter.avro.apicurio.registry.url": "http://r:8080/apis/registry/v2"`,
			want:     "cloudevents:avro",
			settings: map[string]string{"value-registry-auto-register": "false", "value-registry-api": "apicurio"}},
		{name: "Confluent's converter",
			opts:     `"value.converter.serializer.type": "avro", "value.converter.data.serializer.type": "avro", "value.converter.avro.schema.registry.url": "http://schema-registry:8081"`,
			want:     "cloudevents:avro:avro",
			settings: map[string]string{"value-registry-url": "http://schema-registry:8081", "value-registry-api": "confluent"}},
		{name: "json: avro options unread",
			opts:     `"value.converter.avro.apicurio.registry.url": "http://r:8080/apis/registry/v2"`,
			want:     "cloudevents:json-schemas",
			settings: map[string]string{"value-registry-url": ""}},
		{name: "an unknown id handler",
			opts:    `"value.converter.data.serializer.type": "avro", "value.converter.avro.apicurio.registry.url": "http://r", "value.converter.avro.apicurio.registry.id-handler": "x.Y"`,
			refused: "value.converter.avro.apicurio.registry.id-handler"},
		{name: "a named event schema",
			opts:    `"value.converter.serializer.type": "avro", "value.converter.data.serializer.type": "avro", "value.converter.avro.apicurio.registry.url": "http://r", "value.converter.schema.cloudevents.name": "E"`,
			refused: "schema.cloudevents.name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := translateConnect(t, base+",\n  "+tt.opts+"}")
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
			for k, want := range tt.settings {
				if got, _ := settingOf(tr, k); got != want {
					t.Errorf("--%s %q, want %q", k, got, want)
				}
			}
		})
	}
}

// Debezium Server's cloudevents format with Avro is refused: its
// AvroConverter is Apicurio's 3.x.
func TestCloudEventsAvroServer(t *testing.T) {
	const base = "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\ndebezium.sink.type=kafka\n"
	_, _, err := Read([]byte(base + "debezium.format.value=cloudevents\ndebezium.format.value.data.serializer.type=avro\ndebezium.format.value.avro.apicurio.registry.url=http://r\n"))
	if err == nil || !strings.Contains(err.Error(), "Apicurio 3.x") {
		t.Fatalf("err %v, want a refusal", err)
	}
}
