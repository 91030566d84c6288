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
