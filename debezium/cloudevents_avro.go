package debezium

import (
	"fmt"
	"strings"
)

// cloudEventsSerializers reads a CloudEventsConverter's serializer.type
// (the event's) and data.serializer.type (the data's), each json (the
// default) or avro, and what Debezium's converter refuses of them or
// pgoutbox does not implement with them.
func cloudEventsSerializers(opts map[string]string) (event, data string, problems []string) {
	read := func(k string) string {
		v, ok := opts[k]
		if !ok {
			return "json"
		}
		switch s := strings.ToLower(strings.TrimSpace(v)); s {
		case "json", "avro":
			return s
		}
		problems = append(problems, fmt.Sprintf("%s=%s: want json or avro", k, v))
		return ""
	}
	event, data = read("serializer.type"), read("data.serializer.type")
	if event == "avro" && data == "json" {
		// CloudEventsConverter.configure throws.
		problems = append(problems, "serializer.type=avro with data.serializer.type=json: Debezium's converter does not start (Cannot use 'application/json' data content type within Avro events)")
	}
	if event != "avro" && data != "avro" {
		return event, data, problems
	}
	if _, ok := opts["avro.apicurio.registry.url"]; !ok {
		if _, ok := opts["avro.schema.registry.url"]; !ok {
			problems = append(problems, "avro.apicurio.registry.url (or avro.schema.registry.url): Avro CloudEvents need the schema registry's URL; Debezium's converter does not start without it")
		}
	}
	if event == "avro" {
		if _, ok := opts["schema.cloudevents.name"]; ok {
			problems = append(problems, "schema.cloudevents.name: naming the Avro event's schema is not implemented (it is <topic.prefix>.<database>.CloudEvents.Envelope)")
		}
		if v, ok := opts["schema.name.adjustment.mode"]; ok && !strings.EqualFold(strings.TrimSpace(v), "avro") {
			problems = append(problems, fmt.Sprintf("schema.name.adjustment.mode=%s: not implemented for the Avro event's schema name (avro is)", v))
		}
	}
	return event, data, problems
}

// cloudEventsRegistry returns the AvroConverter a CloudEventsConverter
// with Avro builds, with its options (avro.* without the prefix) and
// their names: Apicurio's when avro.apicurio.registry.url is set, else
// Confluent's; class is "" when nothing is Avro.
func cloudEventsRegistry(opts map[string]string, name func(string) string) (class string, sub map[string]string, subName func(string) string) {
	if _, data, problems := cloudEventsSerializers(opts); data != "avro" || len(problems) > 0 {
		return "", nil, name
	}
	sub = map[string]string{}
	for k, v := range opts {
		if rest, ok := strings.CutPrefix(k, "avro."); ok {
			sub[rest] = v
		}
	}
	// The converter is handed no headers, so the id is always before the
	// datum, whatever this says.
	delete(sub, "apicurio.registry.headers.enabled")
	class = confluentAvroConverter
	if _, ok := sub["apicurio.registry.url"]; ok {
		class = apicurioAvroConverter
	}
	return class, sub, func(k string) string { return name("avro." + k) }
}
