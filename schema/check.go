package schema

import (
	"fmt"
	"strings"
)

// Check tells whether the rows of a table with these columns can become
// messages under enc, before any row is read: Bind's checks (every mapped
// column present, of a type its role can take), then what the format and
// its converters need of the columns' types. Every problem is named in
// one error, which wraps ErrMissingColumn or ErrColumnType.
func (c Columns) Check(cols []Column, enc EncoderConfig) error {
	b, err := c.Bind(cols)
	if err != nil {
		return err
	}
	f, err := ParseFormat(string(enc.Format))
	if err != nil {
		return err
	}
	var problems []string
	bad := func(col, why string) { problems = append(problems, col+": "+why) }
	for _, col := range cols {
		if col.Mapper.Truncate > 0 && !stringColumn(col.TypeOID) {
			bad(col.Name, fmt.Sprintf("truncating a column of type OID %d is not implemented (Debezium cuts only strings and bytes, and marks the schema of any type by its declared length)", col.TypeOID))
		}
	}
	if f == Debezium {
		d := enc.Debezium.withDefaults(f)
		d.checkKeyColumns(cols, d.keyColumns(b.name[fID]), bad)
	}
	switch f {
	case CloudEvents, CloudEventsBinary:
		if b.oid[fPayload] == oidBytea {
			bad(b.name[fPayload], "a bytea payload cannot be CloudEvents data, which is JSON: use a json, jsonb or text column, or --format debezium-outbox with --value-converter bytearray")
		}
	case DebeziumOutbox:
		d := enc.Debezium.withDefaults(f)
		// The routed value is the column's text: a column Debezium types
		// as a string under its default options.
		if ct, _ := connectTypeOf(b.typ(fAggregateType), valueModes{}); ct.typ != "string" {
			bad(b.name[fAggregateType], "Debezium's router reads route.by.field as a string: use a text column")
		}
		converts := func(part string, conv Converter, name string, t pgType) {
			if _, ok := conv.writer(d.vm.kindFor(conv, t), part == "header"); !ok {
				bad(name, fmt.Sprintf("the %s converter %s cannot write a value of its type (OID %d)%s", part, conv, t.oid, cannotWrite(conv, d.vm.kind(t))))
			}
		}
		if _, ok := d.Header.writer(javaOther, true); d.ContextHeaders && !ok {
			bad("__debezium.context.*", fmt.Sprintf("the header converter %s cannot write these headers of text (extended.headers.enabled)", d.Header))
		}
		converts("key", d.Key, b.name[fAggregateID], b.typ(fAggregateID))
		converts("header", d.Header, b.name[fID], b.typ(fID))
		if b.traceI >= 0 {
			converts("header", d.Header, cols[b.traceI].Name, pgType{oid: oidText, mod: -1})
		}
		envelope := b.envelope
		for i, a := range b.add {
			t := cols[b.addI[i]].typ()
			switch a.Placement {
			case PlaceHeader:
				converts("header", d.Header, a.Column, t)
			case PlaceEnvelope:
				envelope = true
			}
		}
		payloadCT, _ := connectTypeOf(b.typ(fPayload), d.vm)
		expandable := d.ExpandJSONPayload && (payloadCT.typ == "string" || payloadCT.typ == "")
		if d.Value.IsCloudEvents() {
			if !envelope && !expandable {
				bad(b.name[fPayload], "Debezium's CloudEventsConverter makes its data of a struct, which the value is only with table.expand.json.payload (a JSON payload) or envelope placements: Debezium's task fails at the first record (Mismatching schema)")
			}
		} else if envelope || expandable {
			if _, ok := d.Value.ForStruct(); !ok {
				what := "envelope placements make the value a struct"
				if !envelope {
					what = "table.expand.json.payload makes the value a struct"
				}
				bad(b.name[fPayload], fmt.Sprintf("%s, which the value converter %s cannot write (Debezium would fail, or print a Java object): use json or json-schemas", what, d.Value))
			}
		} else {
			converts("value", d.Value, b.name[fPayload], b.typ(fPayload))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrColumnType, strings.Join(problems, "; "))
	}
	return nil
}

// cannotWrite says why a converter cannot write a value of kind k, where
// the type alone does not say it.
func cannotWrite(conv Converter, k javaKind) string {
	switch {
	case conv.base() == ConvDebeziumByteArray && conv.delegate() == "":
		return ": Debezium's ByteArrayConverter passes only a byte[], which the connector's values are not (a bytea is a ByteBuffer), and without delegate.converter.type its task fails"
	case conv == ConvString && k == javaDate:
		return ": under time.precision.mode=connect the value is a java.util.Date, which StringConverter writes as its toString in the worker's time zone"
	}
	return ""
}
