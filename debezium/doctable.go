package debezium

import (
	"strings"
)

// ConverterClass is a row of the converter table: a Kafka Connect
// converter class and the run value it becomes.
type ConverterClass struct {
	Class string
	// Value is the run value (--key-converter and so on) it becomes,
	// "" for a class pgoutbox refuses.
	Value string
	// Takes says what pgoutbox makes of it.
	Takes string
}

// ConverterClasses returns the converter table.
func ConverterClasses() []ConverterClass { return converterClasses }

var converterClasses = []ConverterClass{
	{Class: stringConverter, Value: "string", Takes: "the value's text; refused with a `bytea` value or a struct"},
	{Class: simpleHeaderConverter, Value: "string", Takes: "as StringConverter"},
	{Class: jsonConverter, Value: "json-schemas", Takes: "`json-schemas`, or `json` with `schemas.enable=false`"},
	{Class: kafkaByteArray, Value: "bytearray", Takes: "`bytea` columns only"},
	{Class: binaryDataConverter, Value: "binary", Takes: "`bytea` as it is, the rest through `delegate.converter.type` (`binary:DELEGATE`)"},
	{Class: apicurioAvroConverter, Value: "avro", Takes: "keys and values in Avro through Apicurio Registry's API, with the `apicurio.registry.*` options below ([Avro through a schema registry](#avro-through-a-schema-registry))"},
	{Class: apicurioJSONConverter, Value: "apicurio-json", Takes: "keys and values as JsonConverter writes them without schemas, their Kafka Connect schemas registered in Apicurio Registry (KCONNECT artifacts, `apicurio.registry.*` options below), each framed as `{\"schemaId\":…,\"payload\":…}`; Debezium Server takes it for `json` with `apicurio.registry.url` ([JSON through Apicurio Registry](#json-through-apicurio-registry))"},
	{Class: confluentAvroConverter, Value: "avro", Takes: "keys and values in Avro through the Confluent API and wire format (`schema.registry.url` and the options below), also as BinaryDataConverter's delegate (`binary:avro`)"},
	{Class: byteBufferConverter, Value: "binary", Takes: "Debezium 1.x's name of BinaryDataConverter, which 3.6 no longer ships: written as BinaryDataConverter, with a warning at start"},
	{Class: cloudEventsConverter, Value: "cloudevents:json-schemas", Takes: "values of change events (no router): a CloudEvent in JSON of each, its data written with or without schemas (`cloudevents:json-schemas`, `cloudevents:json`), as [below](#cloudevents-debeziums-cloudeventsconverter); with Avro data `cloudevents:avro`, an Avro event `cloudevents:avro:avro` ([Avro CloudEvents](#avro-cloudevents))"},
	{Class: "org.apache.kafka.connect.converters.LongConverter", Value: "long", Takes: "an INT64 part (a key `ExtractField$Key` took out of a struct, say) as LongSerializer writes it, big-endian; another type fails its record, as Kafka Connect's task fails. So do `IntegerConverter` (`integer`, INT32), `ShortConverter` (`short`, INT16), `FloatConverter` (`float`, FLOAT32), `DoubleConverter` (`double`, FLOAT64) and `BooleanConverter` (`boolean`, one byte)"},
	{Class: debeziumByteArray, Value: "debezium-bytearray", Takes: "Debezium 3's: a `byte[]` as it is, anything else through `delegate.converter.type` (`debezium-bytearray:DELEGATE`); the connector's `bytea` values are not `byte[]`, so all go through the delegate but a NULL `bytea`, a null; without a delegate (always for headers) refused at start, as Debezium's task fails at the first record"},
}

// Markers around the part of docs/debezium.md written from the table.
const (
	DocBegin = "<!-- option table: written by go test ./debezium -run TestDocTable -update; do not edit -->"
	DocEnd   = "<!-- end of the option table -->"
)

var partTitles = []string{
	Connector: "Connector options (`debezium.source.*` in Debezium Server)",
	Router:    "The Outbox Event Router's options (`transforms.<name>.*`, `debezium.transforms.<name>.*`)",
	Converter: "Converters (Kafka Connect)",
	Server:    "Debezium Server's own options",
}

// DocTable writes the table as docs/debezium.md shows it, between
// DocBegin and DocEnd.
func DocTable() string {
	var b strings.Builder
	b.WriteString(DocBegin + "\n")
	for part, title := range partTitles {
		b.WriteString("\n" + title + ":\n\n")
		b.WriteString("| option (default) | pgoutbox | takes | refuses |\n|---|---|---|---|\n")
		for _, o := range options {
			if o.Part != Part(part) {
				continue
			}
			key := "`" + o.Key + "`"
			if strings.HasSuffix(o.Key, ".") {
				key = "`" + o.Key + "*`"
			}
			if o.Default != "" {
				key += " (`" + o.Default + "`)"
			}
			setting := o.Setting
			switch setting {
			case "":
				setting = "-"
			case Ignored:
			default:
				setting = "`--" + setting + "`"
			}
			b.WriteString("| " + key + " | " + setting + " | " + cell(o.Takes) + " | " + cell(o.Refuses) + " |\n")
		}
		if Part(part) == Converter {
			b.WriteString("\n| converter class | pgoutbox | |\n|---|---|---|\n")
			for _, c := range converterClasses {
				b.WriteString("| `" + c.Class + "` | `" + c.Value + "` | " + cell(c.Takes) + " |\n")
			}
		}
	}
	b.WriteString("\n" + DocEnd + "\n")
	return b.String()
}

// cell escapes a table cell's pipes.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
