package debezium

import (
	"fmt"
	"maps"
	"strings"
)

// The converter classes pgoutbox writes as, by the class a configuration
// names, and the run value (--key-converter and so on) each becomes.
const (
	stringConverter       = "org.apache.kafka.connect.storage.StringConverter"
	simpleHeaderConverter = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
	jsonConverter         = "org.apache.kafka.connect.json.JsonConverter"
	kafkaByteArray        = "org.apache.kafka.connect.converters.ByteArrayConverter"
	binaryDataConverter   = "io.debezium.converters.BinaryDataConverter"
)

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
		conv, ok, why := connectConverter(part, c.other[part+".converter"], opts)
		if !ok {
			r.refuse(part+".converter", why)
		}
		r.set(part+"-converter", conv)
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
		class, why := serverFormat(part, formats[part])
		if why != "" {
			r.refuse("debezium.format."+part, why)
			continue
		}
		o := maps.Clone(shared)
		maps.Copy(o, opts[part])
		conv, ok, why := connectConverter(part, class, o)
		if !ok {
			r.refuse("debezium.format."+part, why)
		}
		r.set(part+"-converter", conv)
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
	case binaryDataConverter:
		d := opts["delegate.converter.type"]
		if d == "" || part == "header" {
			// As a header converter it is configured without its
			// delegate (BinaryDataConverter.configure(Map) ignores
			// the options): it writes bytes, and Debezium's task
			// fails at the first header of another type.
			return "binary", true, ""
		}
		sub := map[string]string{}
		for k, v := range opts {
			if rest, ok := strings.CutPrefix(k, "delegate.converter.type."); ok {
				sub[rest] = v
			}
		}
		conv, ok, why := connectConverter(part, d, sub)
		if !ok || strings.HasPrefix(conv, "binary") {
			return "", false, fmt.Sprintf("delegate.converter.type %q is not supported (use StringConverter, JsonConverter or ByteArrayConverter)", d)
		}
		return "binary:" + conv, ok, why
	}
	return "", false, fmt.Sprintf("%q is not supported (use StringConverter, JsonConverter, ByteArrayConverter or io.debezium.converters.BinaryDataConverter)", class)
}

// serverFormat maps debezium.format.key/value/header to the converter
// class Debezium Server's engine takes for it (ConverterBuilder): json (the
// default, with schemas unless schemas.enable=false) and jsonbytearray
// (the same JSON as bytes) are JsonConverter, simplestring is
// StringConverter and binary BinaryDataConverter, for keys and values
// only: headers are json or jsonbytearray.
func serverFormat(part, format string) (string, string) {
	switch {
	case format == "", format == "json", format == "jsonbytearray":
		return jsonConverter, ""
	case format == "simplestring" && part != "header":
		return stringConverter, ""
	case format == "binary" && part != "header":
		return binaryDataConverter, ""
	case part == "header":
		return "", fmt.Sprintf("%q is not a header format of Debezium Server (json or jsonbytearray), which does not start with it", format)
	}
	return "", fmt.Sprintf("%q is not supported (use json, jsonbytearray, simplestring or binary)", format)
}
