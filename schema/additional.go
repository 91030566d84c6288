package schema

import (
	"fmt"
	"strings"
)

// Placement is where an additional column goes in a message, as in
// Debezium's table.fields.additional.placement.
type Placement string

// The placements. Debezium also has "partition" (an explicit Kafka
// partition); pgoutbox partitions by key only and refuses it.
const (
	// PlaceHeader adds a Kafka header named by the alias.
	PlaceHeader Placement = "header"
	// PlaceEnvelope adds a field to the value: in the Debezium outbox
	// format the value becomes {"payload":…, alias:…}; in CloudEvents
	// the alias becomes an extension attribute.
	PlaceEnvelope Placement = "envelope"
)

// AdditionalField is one extra column carried into the message.
type AdditionalField struct {
	Column    string
	Placement Placement
	// Alias names the header or field; empty means Column.
	Alias string
}

// ParseAdditionalFields parses Debezium's table.fields.additional.placement
// syntax: a comma-separated list of column:placement[:alias], for example
// "type:header:eventType,source:envelope". Spaces around items are ignored.
func ParseAdditionalFields(s string) ([]AdditionalField, error) {
	var out []AdditionalField
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("schema: additional field %q: want column:placement[:alias]", item)
		}
		f := AdditionalField{Column: strings.TrimSpace(parts[0]), Placement: Placement(strings.TrimSpace(parts[1]))}
		if len(parts) == 3 {
			f.Alias = strings.TrimSpace(parts[2])
		}
		out = append(out, f)
	}
	if err := validateAdditional(out); err != nil {
		return nil, err
	}
	return out, nil
}

// String formats fields back into the placement syntax.
func formatAdditional(fs []AdditionalField) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.Column + ":" + string(f.Placement))
		if f.Alias != "" {
			b.WriteString(":" + f.Alias)
		}
	}
	return b.String()
}

func validateAdditional(fs []AdditionalField) error {
	seen := map[string]bool{}
	for _, f := range fs {
		if f.Column == "" {
			return fmt.Errorf("schema: additional field %q: empty column name", formatAdditional([]AdditionalField{f}))
		}
		if len(f.Column) > maxIdentifierLen || strings.IndexByte(f.Column, 0) >= 0 {
			return fmt.Errorf("schema: additional field column %q is not a valid column name", f.Column)
		}
		switch f.Placement {
		case PlaceHeader, PlaceEnvelope:
		case "partition":
			return fmt.Errorf("schema: additional field %s: placement \"partition\" is not supported: pgoutbox partitions by the key so that an aggregate's events keep their order", f.Column)
		default:
			return fmt.Errorf("schema: additional field %s: unknown placement %q (want header or envelope)", f.Column, f.Placement)
		}
		alias := f.Alias
		if alias == "" {
			alias = f.Column
		}
		if f.Placement == PlaceEnvelope && alias == "payload" {
			return fmt.Errorf("schema: additional field %s: envelope alias \"payload\" is taken by the payload", f.Column)
		}
		k := string(f.Placement) + ":" + alias
		if seen[k] {
			return fmt.Errorf("schema: additional %s field %q appears twice", f.Placement, alias)
		}
		seen[k] = true
	}
	return nil
}
