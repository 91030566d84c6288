package debezium

import (
	"strings"
	"testing"
)

// The avro converters' options become the registry flags of their part:
// Apicurio's defaults (no auto-registration, 8-byte ids in headers)
// unless set, Confluent's API with its user info, a BinaryDataConverter's
// delegate read the same; what pgoutbox does not implement is refused,
// naming the option.
func TestRegistryOptions(t *testing.T) {
	const base = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "p",
  "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", `
	for _, tc := range []struct {
		name    string
		conf    string
		want    map[string]string // flag -> value ("" : not set)
		refused []string
	}{
		{"apicurio defaults", `"value.converter": "io.apicurio.registry.utils.converter.AvroConverter",
  "value.converter.apicurio.registry.url": "http://r:8080/apis/registry/v2"}`,
			map[string]string{"value-converter": "avro", "value-registry-url": "http://r:8080/apis/registry/v2", "value-registry-api": "apicurio",
				"value-registry-auto-register": "false", "value-registry-id-size": "", "key-registry-url": ""}, nil},
		{"apicurio as-confluent", `"key.converter": "io.apicurio.registry.utils.converter.AvroConverter",
  "key.converter.apicurio.registry.url": "http://r/apis/registry/v2", "key.converter.apicurio.registry.auto-register": "true",
  "key.converter.apicurio.registry.as-confluent": "true", "key.converter.apicurio.registry.headers.enabled": "false",
  "key.converter.apicurio.registry.use-id": "contentId", "key.converter.apicurio.auth.username": "u", "key.converter.apicurio.auth.password": "pw"}`,
			map[string]string{"key-converter": "avro", "key-registry-auto-register": "true", "key-registry-id-size": "4", "key-registry-headers": "false",
				"key-registry-use-id": "contentId", "key-registry-user": "u", "key-registry-password": "pw"}, nil},
		{"confluent", `"value.converter": "io.confluent.connect.avro.AvroConverter", "value.converter.schema.registry.url": "https://sr:8081",
  "value.converter.basic.auth.credentials.source": "USER_INFO", "value.converter.basic.auth.user.info": "me:se:cret"}`,
			map[string]string{"value-converter": "avro", "value-registry-api": "confluent", "value-registry-url": "https://sr:8081",
				"value-registry-user": "me", "value-registry-password": "se:cret", "value-registry-auto-register": ""}, nil},
		{"strategies", `"key.converter": "io.apicurio.registry.utils.converter.AvroConverter", "key.converter.apicurio.registry.url": "http://r",
  "key.converter.apicurio.registry.artifact-resolver-strategy": "io.apicurio.registry.serde.avro.strategy.TopicRecordIdStrategy",
  "value.converter": "io.confluent.connect.avro.AvroConverter", "value.converter.schema.registry.url": "http://sr",
  "value.converter.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy"}`,
			map[string]string{"key-registry-strategy": "topic-record", "value-registry-strategy": "record"}, nil},
		{"binary delegate", `"value.converter": "io.debezium.converters.BinaryDataConverter",
  "value.converter.delegate.converter.type": "io.confluent.connect.avro.AvroConverter",
  "value.converter.delegate.converter.type.schema.registry.url": "http://sr"}`,
			map[string]string{"value-converter": "binary:avro", "value-registry-url": "http://sr", "value-registry-api": "confluent"}, nil},
		{"refused", `"value.converter": "io.apicurio.registry.utils.converter.AvroConverter",
  "value.converter.apicurio.registry.artifact-resolver-strategy": "com.example.OwnStrategy",
  "value.converter.apicurio.registry.avro.encoding": "JSON",
  "header.converter": "io.confluent.connect.avro.AvroConverter"}`, nil,
			[]string{"value.converter.apicurio.registry.url:", "value.converter.apicurio.registry.artifact-resolver-strategy:",
				"value.converter.apicurio.registry.avro.encoding:", "header.converter:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := translateConnect(t, base+tc.conf)
			if len(tc.refused) > 0 {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, k := range tc.refused {
					if !strings.Contains(err.Error(), k) {
						t.Errorf("the refusal does not name %s:\n%v", k, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for flag, want := range tc.want {
				got, ok := settingOf(tr, flag)
				if want == "" && ok || want != "" && got != want {
					t.Errorf("--%s = %q (set %v), want %q", flag, got, ok, want)
				}
			}
		})
	}
}
