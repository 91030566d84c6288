package schema

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Converter is how a part of a Debezium-format message (key, value or
// header) is serialized, after the Kafka Connect converter its users
// configure.
type Converter string

// The converters.
const (
	// ConvString is StringConverter (keys, values) or
	// SimpleHeaderConverter (headers): the value's text.
	ConvString Converter = "string"
	// ConvJSON is JsonConverter with schemas.enable=false.
	ConvJSON Converter = "json"
	// ConvJSONSchemas is JsonConverter with schemas.enable=true:
	// {"schema":…,"payload":…}.
	ConvJSONSchemas Converter = "json-schemas"
)

// ParseConverter returns the converter named s; "" gives "" (the format's
// default).
func ParseConverter(s string) (Converter, error) {
	switch c := Converter(s); c {
	case "", ConvString, ConvJSON, ConvJSONSchemas:
		return c, nil
	}
	return "", fmt.Errorf("schema: unknown converter %q (want %q, %q or %q)", s, ConvString, ConvJSON, ConvJSONSchemas)
}

// DebeziumConfig configures the [DebeziumOutbox] and [Debezium] formats.
type DebeziumConfig struct {
	// Key, Value and Header are the converters. Defaults: for the outbox
	// format a string key, a JSON value without schemas and string
	// headers; for the change event a JSON key and value without schemas.
	Key, Value, Header Converter
	// ExpandJSONPayload is the outbox router's table.expand.json.payload.
	ExpandJSONPayload bool
	// TopicPrefix is Debezium's topic.prefix: source.name and the schema
	// names ("<prefix>.<schema>.<table>.Value"). Default "pgoutbox".
	TopicPrefix string
	// Version is source.version in change events. Default "pgoutbox".
	Version string
	// NotNull says which columns are NOT NULL, for the "optional" flags
	// of schemas; a column not in it is optional. cmd reads it from the
	// catalog.
	NotNull map[string]bool
	// KeyColumns are the primary key columns, the change event's key.
	// Default: the id column.
	KeyColumns []string
	// Now is the clock for the change event's ts_ms; default time.Now.
	Now func() time.Time
}

func (c DebeziumConfig) withDefaults(f Format) DebeziumConfig {
	if c.Key == "" {
		c.Key = ConvString
		if f == Debezium {
			c.Key = ConvJSON
		}
	}
	if c.Value == "" {
		c.Value = ConvJSON
	}
	if c.Header == "" {
		c.Header = ConvString
	}
	if c.TopicPrefix == "" {
		c.TopicPrefix = "pgoutbox"
	}
	if c.Version == "" {
		c.Version = "pgoutbox"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c DebeziumConfig) validate(f Format) error {
	for _, v := range []Converter{c.Key, c.Value, c.Header} {
		if _, err := ParseConverter(string(v)); err != nil {
			return err
		}
	}
	c = c.withDefaults(f)
	if f == Debezium {
		if c.Key == ConvString || c.Value == ConvString {
			return errors.New("schema: the debezium change event is a struct: use a json key and value converter")
		}
		if c.Key == ConvJSONSchemas || c.Value == ConvJSONSchemas {
			return errors.New("schema: the debezium change event with schemas (json-schemas) is not supported yet: use json")
		}
	}
	return nil
}

// optional reports whether a column is nullable, for schemas.
func (c *DebeziumConfig) optional(column string) bool { return !c.NotNull[column] }

// columnOID returns the type of the record's column for field f.
func (r *Record) columnOID(f int) uint32 {
	if r.bind == nil {
		return oidText
	}
	return r.bind.oid[f]
}

func (r *Record) columnName(f int) string {
	if r.bind == nil {
		return fieldNames[f]
	}
	return r.bind.name[f]
}

// appendConverted writes a column value through a converter. For
// ConvJSONSchemas it wraps it as {"schema":…,"payload":…}.
func appendConverted(dst []byte, conv Converter, oid uint32, text []byte, optional bool) ([]byte, string) {
	switch conv {
	case ConvString:
		return appendStringValue(dst, oid, text)
	case ConvJSON:
		return appendConnectValue(dst, oid, text)
	}
	ct, _, _ := connectTypeOf(oid)
	if ct.typ == "" {
		ct = connectType{typ: "string"}
	}
	dst = append(dst, `{"schema":`...)
	dst = appendConnectSchema(dst, ct, optional, "")
	dst = append(dst, `,"payload":`...)
	dst, reason := appendConnectValue(dst, oid, text)
	return append(dst, '}'), reason
}

// encodeDebeziumOutbox writes what Debezium's Outbox Event Router
// (EventRouterDelegate.apply) emits for the row, after the converters:
//   - key: the aggregate id column's value;
//   - value: the payload column's value (a JSON string under JsonConverter,
//     or the expanded document with table.expand.json.payload), or, when
//     additional fields are placed in the envelope, a struct of payload
//     and those fields;
//   - headers: "id" (the id column), then the header placements in order.
//
// The topic is the router's business (route.topic.regex/replacement).
func (e *Encoder) encodeDebeziumOutbox(r *Record) (Message, error) {
	c := &e.dbz
	var (
		buf    = make([]byte, 0, len(r.AggregateID)+2*len(r.Payload)+64)
		reason string
	)
	// Key.
	buf, reason = appendConverted(buf, c.Key, r.columnOID(fAggregateID), []byte(r.AggregateID), c.optional(r.columnName(fAggregateID)))
	if reason != "" {
		return Message{}, &RowError{Column: r.columnName(fAggregateID), Reason: reason}
	}
	k := len(buf)

	// The payload as a Connect value: a Json string, or expanded.
	payloadOID := r.columnOID(fPayload)
	payloadCT, _, _ := connectTypeOf(payloadOID)
	if payloadCT.typ == "" {
		payloadCT = connectType{typ: "string"}
	}
	var (
		expSchema *cschema
		expValue  []byte
	)
	if c.ExpandJSONPayload && payloadCT.typ == "string" {
		if s, v, err := expandPayload(r.columnName(fPayload), r.Payload); err == nil {
			expSchema, expValue = s, v
		}
	}
	appendPayloadSchema := func(dst []byte, field string) []byte {
		if expSchema != nil {
			return appendCSchema(dst, expSchema, field)
		}
		return appendConnectSchema(dst, payloadCT, c.optional(r.columnName(fPayload)), field)
	}
	appendPayloadValue := func(dst []byte) ([]byte, string) {
		if expSchema != nil {
			return append(dst, expValue...), ""
		}
		return appendConnectValue(dst, payloadOID, r.Payload)
	}

	var envelope []FieldValue
	for _, a := range r.Additional {
		if a.Placement == PlaceEnvelope {
			envelope = append(envelope, a)
		}
	}
	switch {
	case c.Value == ConvString:
		if len(envelope) > 0 || expSchema != nil {
			return Message{}, errors.New("schema: a string value converter cannot write a struct value (envelope fields or an expanded payload)")
		}
		buf, reason = appendStringValue(buf, payloadOID, r.Payload)
	case len(envelope) == 0:
		if c.Value == ConvJSONSchemas {
			buf = append(buf, `{"schema":`...)
			buf = appendPayloadSchema(buf, "")
			buf = append(buf, `,"payload":`...)
		}
		buf, reason = appendPayloadValue(buf)
		if c.Value == ConvJSONSchemas {
			buf = append(buf, '}')
		}
	default:
		if c.Value == ConvJSONSchemas {
			buf = append(buf, `{"schema":{"type":"struct","fields":[`...)
			buf = appendPayloadSchema(buf, "payload")
			for _, a := range envelope {
				ct, _, _ := connectTypeOf(a.TypeOID)
				if ct.typ == "" {
					ct = connectType{typ: "string"}
				}
				buf = append(buf, ',')
				buf = appendConnectSchema(buf, ct, c.optional(a.Column), a.Alias)
			}
			// EventRouterDelegate.getSchemaName: the after struct's name
			// with the routed value inserted before ".Value".
			buf = append(buf, `],"optional":false,"name":`...)
			buf = appendJavaString(buf, c.TopicPrefix+"."+r.Origin.Schema+"."+r.Origin.Table+"."+r.AggregateType+".Value")
			buf = append(buf, `},"payload":`...)
		}
		buf = append(buf, `{"payload":`...)
		if buf, reason = appendPayloadValue(buf); reason != "" {
			break
		}
		for _, a := range envelope {
			buf = append(buf, ',')
			buf = appendJavaString(buf, a.Alias)
			buf = append(buf, ':')
			if buf, reason = appendConnectValue(buf, a.TypeOID, a.Value); reason != "" {
				return Message{}, &RowError{Column: a.Column, Reason: reason}
			}
		}
		buf = append(buf, '}')
		if c.Value == ConvJSONSchemas {
			buf = append(buf, '}')
		}
	}
	if reason != "" {
		return Message{}, &RowError{Column: r.columnName(fPayload), Reason: reason}
	}
	v := len(buf)

	// Headers: id first, then the header placements.
	hs := make([]Header, 0, 1+len(r.Additional)-len(envelope))
	buf, reason = appendConverted(buf, c.Header, r.columnOID(fID), []byte(r.ID), c.optional(r.columnName(fID)))
	if reason != "" {
		return Message{}, &RowError{Column: r.columnName(fID), Reason: reason}
	}
	hs = append(hs, Header{Key: "id", Value: buf[v:len(buf):len(buf)]})
	for _, a := range r.Additional {
		if a.Placement != PlaceHeader {
			continue
		}
		if a.Value == nil && c.Header == ConvString {
			hs = append(hs, Header{Key: a.Alias}) // SimpleHeaderConverter: null stays null
			continue
		}
		t := len(buf)
		if buf, reason = appendConverted(buf, c.Header, a.TypeOID, a.Value, c.optional(a.Column)); reason != "" {
			return Message{}, &RowError{Column: a.Column, Reason: reason}
		}
		hs = append(hs, Header{Key: a.Alias, Value: buf[t:len(buf):len(buf)]})
	}
	return Message{Key: buf[:k:k], Value: buf[k:v:v], Headers: hs}, nil
}

// encodeDebeziumChange writes Debezium's change event for an insert of the
// row (schemas off): key {pk columns}, value {before, after, source,
// transaction, op, ts_ms, ts_us, ts_ns}. Columns of types Debezium does not
// map are left out, as Debezium does (include.unknown.datatypes=false).
func (e *Encoder) encodeDebeziumChange(r *Record) (Message, error) {
	c := &e.dbz
	if r.Columns == nil || len(r.Columns) != len(r.Values) {
		return Message{}, errors.New("schema: the debezium change event needs the whole row (a Record built by a Binding)")
	}
	buf := make([]byte, 0, 512+2*len(r.Payload))
	var reason string

	keyCols := c.KeyColumns
	if len(keyCols) == 0 {
		keyCols = []string{r.columnName(fID)}
	}
	buf = append(buf, '{')
	for i, name := range keyCols {
		j := columnIndex(r.Columns, name)
		if j < 0 {
			return Message{}, fmt.Errorf("schema: key column %q is not in the table", name)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJavaString(buf, name)
		buf = append(buf, ':')
		if buf, reason = appendConnectValue(buf, r.Columns[j].TypeOID, r.Values[j]); reason != "" {
			return Message{}, &RowError{Column: name, Reason: reason}
		}
	}
	buf = append(buf, '}')
	k := len(buf)

	buf = append(buf, `{"before":null,"after":{`...)
	first := true
	for i, col := range r.Columns {
		_, ok, err := connectTypeOf(col.TypeOID)
		if err != nil {
			return Message{}, fmt.Errorf("column %s: %w", col.Name, err)
		}
		if !ok {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendJavaString(buf, col.Name)
		buf = append(buf, ':')
		if buf, reason = appendConnectValue(buf, col.TypeOID, r.Values[i]); reason != "" {
			return Message{}, &RowError{Column: col.Name, Reason: reason}
		}
	}
	o := &r.Origin
	ct := o.CommitTime
	if ct.IsZero() {
		ct = r.Time
	}
	buf = append(buf, `},"source":{"version":`...)
	buf = appendJavaString(buf, c.Version)
	buf = append(buf, `,"connector":"postgresql","name":`...)
	buf = appendJavaString(buf, c.TopicPrefix)
	buf = append(buf, `,"ts_ms":`...)
	buf = strconv.AppendInt(buf, ct.UnixMilli(), 10)
	buf = append(buf, `,"snapshot":"false","db":`...)
	buf = appendJavaString(buf, o.Database)
	buf = append(buf, `,"sequence":`...)
	if o.LSN == 0 {
		buf = append(buf, "null"...)
	} else {
		// Debezium: ["<last commit LSN>","<LSN>"]; see docs/debezium.md.
		buf = append(buf, `"[\"`...)
		buf = strconv.AppendUint(buf, o.CommitLSN, 10)
		buf = append(buf, `\",\"`...)
		buf = strconv.AppendUint(buf, o.LSN, 10)
		buf = append(buf, `\"]"`...)
	}
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, ct.UnixMicro(), 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, ct.UnixNano(), 10)
	buf = append(buf, `,"schema":`...)
	buf = appendJavaString(buf, o.Schema)
	buf = append(buf, `,"table":`...)
	buf = appendJavaString(buf, o.Table)
	buf = append(buf, `,"txId":`...)
	if o.TxID == 0 {
		buf = append(buf, "null"...)
	} else {
		buf = strconv.AppendUint(buf, o.TxID, 10)
	}
	buf = append(buf, `,"lsn":`...)
	if o.LSN == 0 {
		buf = append(buf, "null"...)
	} else {
		buf = strconv.AppendUint(buf, o.LSN, 10)
	}
	now := c.Now()
	buf = append(buf, `,"xmin":null,"origin":null,"origin_lsn":null},"transaction":null,"op":"c","ts_ms":`...)
	buf = strconv.AppendInt(buf, now.UnixMilli(), 10)
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, now.UnixMicro(), 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, now.UnixNano(), 10)
	buf = append(buf, '}')
	return Message{Key: buf[:k:k], Value: buf[k:]}, nil
}
