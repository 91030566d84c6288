package debezium

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pgoutbox/pgoutbox/schema"
)

// The converter classes pgoutbox writes as, by the class a configuration
// names, and the run value (--key-converter and so on) each becomes.
const (
	stringConverter       = "org.apache.kafka.connect.storage.StringConverter"
	simpleHeaderConverter = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
	jsonConverter         = "org.apache.kafka.connect.json.JsonConverter"
	kafkaByteArray        = "org.apache.kafka.connect.converters.ByteArrayConverter"
	binaryDataConverter   = "io.debezium.converters.BinaryDataConverter"
	debeziumByteArray     = "io.debezium.converters.ByteArrayConverter"
	byteBufferConverter   = "io.debezium.converters.ByteBufferConverter"
	cloudEventsConverter  = "io.debezium.converters.CloudEventsConverter"
)

// numberConverters are Kafka's converters of one Connect type each, by
// class, with their run values.
var numberConverters = map[string]string{
	"org.apache.kafka.connect.converters.LongConverter":    "long",
	"org.apache.kafka.connect.converters.IntegerConverter": "integer",
	"org.apache.kafka.connect.converters.ShortConverter":   "short",
	"org.apache.kafka.connect.converters.FloatConverter":   "float",
	"org.apache.kafka.connect.converters.DoubleConverter":  "double",
	"org.apache.kafka.connect.converters.BooleanConverter": "boolean",
}

// successors are the converter classes Debezium no longer ships, and
// what took their place: ByteBufferConverter (1.x) was renamed
// BinaryDataConverter in 2.0 (DBZ-4600), the same conversion.
var successors = map[string]string{
	byteBufferConverter: binaryDataConverter,
}

// Successor returns the class that took the place of a converter class
// Debezium no longer ships; ok is false for any other class.
func Successor(class string) (string, bool) {
	s, ok := successors[class]
	return s, ok
}

// converters reads the key, value and header converters: Kafka Connect's
// key.converter (and so on) with their options, or Debezium Server's
// debezium.format.*. It removes their keys from c.other.
func (c config) converters(r *reading) {
	if c.server {
		c.serverConverters(r)
		return
	}
	for _, part := range []string{"key", "value", "header"} {
		prefix := part + ".converter."
		opts := map[string]string{}
		for k, v := range c.other {
			if rest, ok := strings.CutPrefix(k, prefix); ok {
				opts[rest] = v
				delete(c.other, k)
			}
		}
		class := c.other[part+".converter"]
		if s, ok := successors[class]; ok {
			r.warnings = append(r.warnings, fmt.Sprintf("%s.converter=%s: Debezium 2.0 renamed it %s (Debezium 3.6 ships no %s); pgoutbox writes as %[3]s",
				part, class, s, class[strings.LastIndexByte(class, '.')+1:]))
			class = s
		}
		conv, ok, why := connectConverter(part, class, opts)
		if !ok {
			r.refuse(part+".converter", why)
		}
		r.set(part+"-converter", conv)
		cloudEventsSettings(r, conv, opts)
		registryOptions(r, part, c.other[part+".converter"], opts, func(k string) string { return prefix + k })
		delete(c.other, part+".converter")
	}
}

// serverConverters reads debezium.format.key|value|header, which picks a
// part's converter; debezium.format.<part>.* configures it, and
// debezium.format.* all three (Debezium Server passes them on as
// key.converter.* and so on).
func (c config) serverConverters(r *reading) {
	formats := map[string]string{}
	opts := map[string]map[string]string{"key": {}, "value": {}, "header": {}}
	shared := map[string]string{}
	for k, v := range c.other {
		rest, ok := strings.CutPrefix(k, "debezium.format.")
		if !ok {
			continue
		}
		delete(c.other, k)
		part, opt, _ := strings.Cut(rest, ".")
		switch {
		case opts[part] != nil && opt == "":
			formats[part] = v
		case opts[part] != nil:
			opts[part][opt] = v
		default:
			shared[rest] = v
		}
	}
	for _, part := range []string{"key", "value", "header"} {
		o := maps.Clone(shared)
		maps.Copy(o, opts[part])
		// ConverterBuilder takes a class given with the format's options
		// (debezium.format.<part>.class, or debezium.format.class for
		// every part) over the format's own converter: what a Kafka
		// Connect configuration's <part>.converter names.
		given, hasClass := o["class"]
		delete(o, "class")
		given = strings.TrimSpace(given)
		class, why := serverFormat(part, formats[part])
		switch {
		case formats[part] == "clientprovided" && given == "":
			why = "clientprovided needs the converter's class (debezium.format." + part + ".class), as Debezium Server refuses it without one"
		case hasClass && given != "" && builderFormat(part, formats[part]):
			class, why = given, ""
		}
		if why != "" {
			r.refuse("debezium.format."+part, why)
			continue
		}
		if _, ok := o["apicurio.registry.url"]; ok && class == jsonConverter && !hasClass && part != "header" {
			// ConverterBuilder: json with Apicurio's registry is its
			// ExtJsonConverter.
			class = apicurioJSONConverter
		}
		conv, ok, why := connectConverter(part, class, o)
		if !ok {
			r.refuse("debezium.format."+part, why)
		}
		if ok && strings.HasPrefix(conv, "cloudevents:avro") {
			ok = false
			r.refuse("debezium.format."+part, "cloudevents with Avro (serializer.type or data.serializer.type avro) writes through Debezium Server's Apicurio 3.x AvroConverter (registry API v3), which pgoutbox does not implement")
		}
		if ok && strings.TrimSpace(c.other["debezium.sink.type"]) == "sns" {
			r.set(part+"-converter", snsConverter(r, part, conv))
		} else {
			r.set(part+"-converter", conv)
		}
		cloudEventsSettings(r, conv, o)
		registryOptions(r, part, class, o, func(k string) string { return "debezium.format." + part + "." + k })
	}
	if formats["header"] == "jsonbytearray" {
		// The same bytes as json; Debezium Server's RabbitMQ sink sends
		// them as AMQP byte arrays rather than strings.
		r.set("rabbitmq-header-bytes", "true")
	}
}

// connectConverter maps a Kafka Connect converter class. Unset converters
// are the worker's; Kafka's defaults are JsonConverter with schemas for
// keys and values and SimpleHeaderConverter for headers. opts are the
// converter's own options (key.converter.* without the prefix).
func connectConverter(part, class string, opts map[string]string) (string, bool, string) {
	if class == "" {
		if part == "header" {
			return "string", true, ""
		}
		class = jsonConverter
	}
	if s, ok := successors[class]; ok {
		class = s
	}
	switch class {
	case stringConverter, simpleHeaderConverter:
		return "string", true, ""
	case jsonConverter:
		if opts["schemas.enable"] == "false" {
			return "json", true, ""
		}
		return "json-schemas", true, ""
	case kafkaByteArray:
		return "bytearray", true, ""
	case apicurioAvroConverter, confluentAvroConverter:
		if part == "header" {
			return "", false, fmt.Sprintf("%q writes keys and values only", class)
		}
		return "avro", true, ""
	case apicurioJSONConverter:
		if part == "header" {
			return "", false, fmt.Sprintf("%q writes keys and values only", class)
		}
		return "apicurio-json", true, ""
	case binaryDataConverter:
		return withDelegate("binary", part, opts)
	case debeziumByteArray:
		return withDelegate("debezium-bytearray", part, opts)
	case cloudEventsConverter:
		return cloudEvents(part, opts)
	}
	if n, ok := numberConverters[class]; ok {
		return n, true, ""
	}
	if known := knownConverter(class); known != "" {
		// A class of that name in another package, as Kafka Connect would
		// not find it either (ClassNotFoundException).
		return "", false, fmt.Sprintf("%q is no class Debezium or Kafka ship: %s is", class, known)
	}
	return "", false, fmt.Sprintf("%q is not supported (use StringConverter, JsonConverter, ByteArrayConverter, %s, %s, %s, io.debezium.converters.BinaryDataConverter, io.debezium.converters.ByteArrayConverter, %s or Kafka's number converters)", class, apicurioAvroConverter, apicurioJSONConverter, confluentAvroConverter, cloudEventsConverter)
}

// cloudEvents maps Debezium's CloudEventsConverter with its options
// (CloudEventsConverterConfig): JSON events with JSON data, with
// (json.schemas.enable, on by default) or without schemas, extension
// attributes on, the id and type made of the event. Other settings are
// refused, each naming why.
func cloudEvents(part string, opts map[string]string) (string, bool, string) {
	if part != "value" {
		return "", false, fmt.Sprintf("%q makes events of change events' values; as a %s converter it writes nothing usable", cloudEventsConverter, part)
	}
	event, data, problems := cloudEventsSerializers(opts)
	if v, ok := opts["extension.attributes.enable"]; ok && !strings.EqualFold(strings.TrimSpace(v), "true") {
		problems = append(problems, fmt.Sprintf("extension.attributes.enable=%s: not implemented (the attributes are always written)", v))
	}
	if v, ok := opts["opentelemetry.tracing.attributes.enable"]; ok && !strings.EqualFold(strings.TrimSpace(v), "false") {
		problems = append(problems, fmt.Sprintf("opentelemetry.tracing.attributes.enable=%s: not implemented", v))
	}
	if v, ok := opts["metadata.source"]; ok {
		if _, err := schema.ParseCloudEventsMetadata(v); err != nil {
			problems = append(problems, "metadata.source="+v+": "+err.Error())
		}
	}
	if len(problems) > 0 {
		return "", false, strings.Join(problems, "; ")
	}
	if data == "avro" {
		if event == "avro" {
			return "cloudevents:avro:avro", true, ""
		}
		return "cloudevents:avro", true, ""
	}
	if strings.EqualFold(strings.TrimSpace(opts["json.schemas.enable"]), "false") {
		return "cloudevents:json", true, ""
	}
	return "cloudevents:json-schemas", true, ""
}

// cloudEventsSettings sets what a CloudEventsConverter's options say
// beyond the converter: its metadata source.
func cloudEventsSettings(r *reading, conv string, opts map[string]string) {
	if v := opts["metadata.source"]; v != "" && strings.HasPrefix(conv, "cloudevents") {
		if m, err := schema.ParseCloudEventsMetadata(v); err == nil && m != (schema.CloudEventsMetadata{}) {
			r.set("cloudevents-metadata-source", m.String())
		}
	}
}

// withDelegate maps Debezium's BinaryDataConverter (base binary) or
// ByteArrayConverter (debezium-bytearray) with its delegate.converter.type
// and the delegate's options.
func withDelegate(base, part string, opts map[string]string) (string, bool, string) {
	d := opts["delegate.converter.type"]
	if d == "" || part == "header" {
		// As a header converter it is configured without its delegate
		// (configure(Map) ignores the options): Debezium's task fails at
		// the first header the converter cannot write alone.
		return base, true, ""
	}
	sub := map[string]string{}
	for k, v := range opts {
		if rest, ok := strings.CutPrefix(k, "delegate.converter.type."); ok {
			sub[rest] = v
		}
	}
	conv, ok, why := connectConverter(part, d, sub)
	if !ok || strings.HasPrefix(conv, "binary") || strings.HasPrefix(conv, "debezium-bytearray") {
		return "", false, fmt.Sprintf("delegate.converter.type %q is not supported (use StringConverter, JsonConverter or ByteArrayConverter)", d)
	}
	return base + ":" + conv, ok, why
}

// serverFormat maps debezium.format.key/value/header to the converter
// class Debezium Server's engine takes for it (ConverterBuilder): json (the
// default, with schemas unless schemas.enable=false) and jsonbytearray
// (the same JSON as bytes) are JsonConverter, simplestring is
// StringConverter, binary BinaryDataConverter and cloudevents
// CloudEventsConverter, for keys and values only: headers are json or
// jsonbytearray.
func serverFormat(part, format string) (string, string) {
	switch {
	case format == "", format == "json", format == "jsonbytearray":
		return jsonConverter, ""
	case format == "simplestring" && part != "header":
		return stringConverter, ""
	case format == "binary" && part != "header":
		return binaryDataConverter, ""
	case format == "cloudevents" && part != "header":
		return cloudEventsConverter, ""
	case part == "header":
		return "", fmt.Sprintf("%q is not a header format of Debezium Server (json or jsonbytearray), which does not start with it", format)
	case format == "avro":
		// ConverterBuilder takes Apicurio's AvroConverter when
		// apicurio.registry.url is set, else Confluent's; Debezium
		// Server 3.6 ships Apicurio's 3.x converter (registry API v3).
		return "", "Debezium Server's avro format writes with Apicurio's 3.x converter (registry API v3), which pgoutbox does not implement yet; " +
			"the Kafka Connect form with io.apicurio.registry.utils.converter.AvroConverter (2.x) is implemented"
	}
	return "", fmt.Sprintf("%q is not supported (use json, jsonbytearray, simplestring, binary or cloudevents)", format)
}

// builderFormat tells a format Debezium Server's ConverterBuilder makes a
// converter of for part, whose class the options may name instead.
func builderFormat(part, format string) bool {
	switch format {
	case "", "json", "jsonbytearray", "clientprovided":
		return true
	case "cloudevents", "avro", "protobuf", "binary", "simplestring":
		return part != "header"
	}
	return false
}

// knownConverter is the converter class pgoutbox takes whose simple name
// is class's, "" when none is; of two, the one of class's vendor.
func knownConverter(class string) string {
	simple := class[strings.LastIndexByte(class, '.')+1:]
	vendor, _, _ := strings.Cut(class, ".")
	found := ""
	for _, c := range append([]string{stringConverter, simpleHeaderConverter, jsonConverter, kafkaByteArray, binaryDataConverter,
		debeziumByteArray, cloudEventsConverter, apicurioAvroConverter, apicurioJSONConverter, confluentAvroConverter}, slices.Sorted(maps.Keys(numberConverters))...) {
		if c == class || c[strings.LastIndexByte(c, '.')+1:] != simple {
			continue
		}
		if found == "" || strings.HasPrefix(c, vendor+".") {
			found = c
		}
	}
	return found
}
