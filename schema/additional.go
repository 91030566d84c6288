package schema

import (
	"errors"
	"fmt"
	"strings"
)

// Placement is where an additional column goes in a message, as in
// Debezium's table.fields.additional.placement.
type Placement string

// The placements.
const (
	// PlaceHeader adds a Kafka header named by the alias.
	PlaceHeader Placement = "header"
	// PlaceEnvelope adds a field to the value: in the Debezium outbox
	// format the value becomes {"payload":…, alias:…}; in CloudEvents
	// the alias becomes an extension attribute.
	PlaceEnvelope Placement = "envelope"
	// PlacePartition sends the record to the partition the column (an
	// integer) names, instead of the one its key hashes to; NULL keeps
	// the key's. Events of one aggregate keep their order only if they
	// name one partition.
	PlacePartition Placement = "partition"
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
// "type:header:eventType,source:envelope". Spaces around items are ignored
// and placements are case-insensitive, as in Debezium; an empty list, an
// empty item or one without a placement is refused, as Debezium refuses
// them.
func ParseAdditionalFields(s string) ([]AdditionalField, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("schema: additional fields: empty list (want column:placement[:alias],...)")
	}
	var out []AdditionalField
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("schema: additional field %q: want column:placement[:alias]", item)
		}
		f := AdditionalField{Column: strings.TrimSpace(parts[0]), Placement: Placement(strings.ToLower(strings.TrimSpace(parts[1])))}
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
		if p := IdentifierProblem(f.Column); p != "" {
			return fmt.Errorf("schema: additional field column %q: %s", f.Column, p)
		}
		switch f.Placement {
		case PlaceHeader, PlaceEnvelope, PlacePartition:
		default:
			return fmt.Errorf("schema: additional field %s: unknown placement %q (want header, envelope or partition)", f.Column, f.Placement)
		}
		alias := f.Alias
		if alias == "" {
			alias = f.Column
		}
		if f.Placement == PlaceEnvelope && alias == "payload" {
			return fmt.Errorf("schema: additional field %s: envelope alias \"payload\" is taken by the payload", f.Column)
		}
		// Kafka headers may repeat a key (Debezium adds each); an envelope
		// field or a second partition may not.
		k := string(f.Placement) + ":" + alias
		if f.Placement == PlacePartition {
			k = string(f.Placement)
		}
		if seen[k] && f.Placement != PlaceHeader {
			return fmt.Errorf("schema: additional %s field %q appears twice", f.Placement, alias)
		}
		seen[k] = true
	}
	return nil
}
