package debezium

import (
	"fmt"
	"strings"
)

// The registry converters pgoutbox implements.
const (
	apicurioAvroConverter  = "io.apicurio.registry.utils.converter.AvroConverter"
	apicurioJSONConverter  = "io.apicurio.registry.utils.converter.ExtJsonConverter"
	confluentAvroConverter = "io.confluent.connect.avro.AvroConverter"
)

// registryOptions maps an avro converter's options (opts, its
// key.converter.* without the prefix) to --<part>-registry-* settings; a
// BinaryDataConverter's or Debezium's ByteArrayConverter's are its
// delegate's. name spells an option as the
// configuration does, for ignored and refused. It returns nothing for
// other converters.
func registryOptions(r *reading, part, class string, opts map[string]string, name func(string) string) {
	if class == binaryDataConverter || class == debeziumByteArray {
		class = opts["delegate.converter.type"]
		sub := map[string]string{}
		for k, v := range opts {
			if rest, ok := strings.CutPrefix(k, "delegate.converter.type."); ok {
				sub[rest] = v
			}
		}
		opts = sub
		inner := name
		name = func(k string) string { return inner("delegate.converter.type." + k) }
	}
	if class == cloudEventsConverter {
		class, opts, name = cloudEventsRegistry(opts, name)
	}
	set := func(flag, v string) { r.set(part+"-registry-"+flag, v) }
	refuse := func(k, why string) { r.refuse(name(k), why) }
	boolOpt := func(k, flag string) {
		switch v := strings.ToLower(strings.TrimSpace(opts[k])); v {
		case "true", "false":
			set(flag, v)
		default:
			refuse(k, fmt.Sprintf("%q: want true or false", opts[k]))
		}
	}
	switch class {
	case apicurioAvroConverter, apicurioJSONConverter:
		if _, ok := opts["apicurio.registry.url"]; !ok {
			refuse("apicurio.registry.url", "the converter needs the registry's URL")
		}
		if _, ok := opts["apicurio.registry.auto-register"]; !ok {
			set("auto-register", "false") // Apicurio's default, unlike Confluent's
		}
		for _, k := range sortedKeys(opts) {
			v := strings.TrimSpace(opts[k])
			switch k {
			case "apicurio.registry.url":
				set("url", v)
			case "apicurio.registry.auto-register":
				boolOpt(k, "auto-register")
			case "apicurio.registry.find-latest":
				boolOpt(k, "find-latest")
			case "apicurio.registry.headers.enabled":
				boolOpt(k, "headers")
			case "apicurio.registry.as-confluent":
				if strings.EqualFold(v, "true") {
					set("id-size", "4")
				}
			case "apicurio.registry.id-handler":
				switch v {
				case "io.apicurio.registry.serde.Legacy4ByteIdHandler":
					set("id-size", "4")
				case "io.apicurio.registry.serde.DefaultIdHandler":
				default:
					refuse(k, fmt.Sprintf("%q: pgoutbox implements DefaultIdHandler and Legacy4ByteIdHandler", v))
				}
			case "apicurio.registry.use-id":
				set("use-id", v)
			case "apicurio.auth.username":
				set("user", v)
			case "apicurio.auth.password":
				set("password", v)
			case "apicurio.registry.artifact-resolver-strategy":
				s, ok := apicurioStrategies[v]
				if ok && class == apicurioJSONConverter && s != "topic" && s != "simple-topic" {
					refuse(k, fmt.Sprintf("%q names artifacts after an Avro record; ExtJsonConverter registers Kafka Connect schemas (pgoutbox implements TopicIdStrategy and SimpleTopicIdStrategy for it)", v))
				} else if ok {
					set("strategy", s)
				} else {
					refuse(k, fmt.Sprintf("%q: pgoutbox implements TopicIdStrategy, SimpleTopicIdStrategy, RecordIdStrategy, TopicRecordIdStrategy and QualifiedRecordIdStrategy", v))
				}
			case "apicurio.registry.avro.encoding":
				if !strings.EqualFold(v, "BINARY") {
					refuse(k, fmt.Sprintf("%q: pgoutbox writes Avro's binary encoding only", v))
				}
			default:
				r.ignore(name(k))
			}
		}
		set("api", "apicurio")
	case confluentAvroConverter:
		if _, ok := opts["schema.registry.url"]; !ok {
			refuse("schema.registry.url", "the converter needs the registry's URL")
		}
		for _, k := range sortedKeys(opts) {
			v := strings.TrimSpace(opts[k])
			switch k {
			case "schema.registry.url":
				if strings.Contains(v, ",") {
					refuse(k, "pgoutbox takes one registry URL")
				}
				set("url", v)
			case "auto.register.schemas":
				boolOpt(k, "auto-register")
			case "basic.auth.credentials.source":
				if v != "USER_INFO" {
					refuse(k, fmt.Sprintf("%q: pgoutbox implements USER_INFO (basic.auth.user.info)", v))
				}
			case "basic.auth.user.info":
				user, pass, _ := strings.Cut(v, ":")
				set("user", user)
				set("password", pass)
			case "key.subject.name.strategy", "value.subject.name.strategy":
				if !strings.HasPrefix(k, part+".") {
					r.ignore(name(k))
				} else if s, ok := confluentStrategies[v]; ok {
					set("strategy", s)
				} else {
					refuse(k, fmt.Sprintf("%q: pgoutbox implements TopicNameStrategy, RecordNameStrategy and TopicRecordNameStrategy", v))
				}
			default:
				r.ignore(name(k))
			}
		}
		set("api", "confluent")
	}
}

// The subject strategies by class, as the registry flags name them.
var (
	apicurioStrategies = map[string]string{
		"io.apicurio.registry.serde.strategy.TopicIdStrategy":                "topic",
		"io.apicurio.registry.serde.strategy.SimpleTopicIdStrategy":          "simple-topic",
		"io.apicurio.registry.serde.avro.strategy.RecordIdStrategy":          "record",
		"io.apicurio.registry.serde.avro.strategy.TopicRecordIdStrategy":     "topic-record",
		"io.apicurio.registry.serde.avro.strategy.QualifiedRecordIdStrategy": "qualified-record",
	}
	confluentStrategies = map[string]string{
		"io.confluent.kafka.serializers.subject.TopicNameStrategy":       "topic",
		"io.confluent.kafka.serializers.subject.RecordNameStrategy":      "record",
		"io.confluent.kafka.serializers.subject.TopicRecordNameStrategy": "topic-record",
	}
)
