package schema

import (
	"errors"
	"fmt"
	"strings"
)

// CloudEventsMetadata is Debezium's CloudEventsConverter's
// metadata.source: where the converter takes a change event's metadata
// (its source block, op and transaction) and the CloudEvent's id and
// type from. The zero value is the converter's default: the record's
// value, the id and type generated from the source block.
type CloudEventsMetadata struct {
	// Headers takes the metadata from the record's source, op and
	// transaction headers (metadata.source's first part, header), as
	// after the Outbox Event Router with HeaderFrom before it.
	Headers bool
	// IDHeader and TypeHeader take the id and the type from the id and
	// type headers; otherwise they are generated.
	IDHeader, TypeHeader bool
}

// ParseCloudEventsMetadata reads metadata.source as
// CloudEventsConverterConfig.metadataSource does: a global part, value
// or header, then field:source parts for id, type, traceparent and
// dataSchemaName (generate or header), an unnamed field taking the
// global source. "" is the default. traceparent and dataSchemaName are
// read only by settings pgoutbox refuses (tracing attributes, Avro data).
// The id or type of the value, which has neither, is refused: Debezium's
// task fails on the null it gives.
func ParseCloudEventsMetadata(s string) (CloudEventsMetadata, error) {
	if strings.TrimSpace(s) == "" {
		return CloudEventsMetadata{}, nil
	}
	parts := strings.Split(s, ",")
	var m CloudEventsMetadata
	switch g := strings.ToLower(strings.TrimSpace(parts[0])); g {
	case "value":
	case "header":
		m.Headers = true
	default:
		return m, fmt.Errorf("metadata source %q: the first part is value or header", parts[0])
	}
	src := map[string]string{}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(p), ":")
		v = strings.ToLower(strings.TrimSpace(v))
		switch k = strings.TrimSpace(k); {
		case !ok:
			return m, fmt.Errorf("metadata source part %q: want field:source", p)
		case k != "id" && k != "type" && k != "traceparent" && k != "dataSchemaName":
			return m, fmt.Errorf("metadata source part %q: the fields are id, type, traceparent and dataSchemaName", p)
		case v != "generate" && v != "header":
			return m, fmt.Errorf("metadata source part %q: the sources are generate and header", p)
		}
		src[k] = v
	}
	for _, f := range []struct {
		name string
		dst  *bool
	}{{"id", &m.IDHeader}, {"type", &m.TypeHeader}} {
		switch v, set := src[f.name]; {
		case v == "header", !set && m.Headers:
			*f.dst = true
		case !set:
			return m, fmt.Errorf("metadata source %q: the %s is taken from the value, which has none: Debezium's task fails at the first record (give %s:generate)", s, f.name, f.name)
		}
	}
	if !m.Headers && (m.IDHeader || m.TypeHeader) {
		return m, errors.New("metadata source: an id or type from a header with the metadata from the value is not implemented")
	}
	return m, nil
}

// String is the setting as metadata.source writes it.
func (m CloudEventsMetadata) String() string {
	src := func(h bool) string {
		if h {
			return "header"
		}
		return "generate"
	}
	g := "value"
	if m.Headers {
		g = "header"
	}
	return g + ",id:" + src(m.IDHeader) + ",type:" + src(m.TypeHeader)
}
