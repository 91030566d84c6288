package schema

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
)

// This file writes Avro for the avro converter: a part's schema as Kafka
// Connect's AvroData (Apicurio's io.apicurio.registry.utils.converter.avro,
// a fork of Confluent's, with connect.meta.data on) derives it from
// Debezium's Connect schema, printed as Avro's Java Schema.toString does,
// and its value in Avro's binary encoding. The registry's framing (an id
// before the datum, or headers) is the registry package's.

// avroNames tracks the enclosing namespace while a schema is written
// (Avro writes a named type's namespace only where it differs from it),
// and the named types already defined in it.
type avroNames struct {
	space   string
	defined map[string]bool
}

func (n *avroNames) define(full string) {
	if n.defined == nil {
		n.defined = map[string]bool{}
	}
	n.defined[full] = true
}

// decimalName is Kafka Connect's Decimal logical type.
const decimalName = "org.apache.kafka.connect.data.Decimal"

// avroLogicalTypes are the Avro logical types AvroData gives Kafka
// Connect's logical types (its logicalType property, written after the
// Connect metadata): Debezium's time.precision.mode=connect makes dates,
// times and timestamps Connect's Date, Time and Timestamp.
var avroLogicalTypes = map[string]string{
	decimalName:                               "decimal",
	"org.apache.kafka.connect.data.Date":      "date",
	"org.apache.kafka.connect.data.Time":      "time-millis",
	"org.apache.kafka.connect.data.Timestamp": "timestamp-millis",
}

// appendAvroDecimalProps appends Avro's decimal scale and precision from
// a Decimal's Connect parameters ({"scale":"2","connect.decimal.precision":"10"});
// AvroData takes 64 for a precision Connect does not give.
func appendAvroDecimalProps(dst []byte, params string) []byte {
	var p struct {
		Scale     string `json:"scale"`
		Precision string `json:"connect.decimal.precision"`
	}
	_ = json.Unmarshal([]byte(params), &p) // written by connectTypeOf
	if p.Precision == "" {
		p.Precision = "64"
	}
	dst = append(dst, `,"scale":`...)
	dst = append(dst, p.Scale...)
	dst = append(dst, `,"precision":`...)
	return append(dst, p.Precision...)
}

// appendAvroConnect appends the Avro schema of a Connect type: a primitive
// alone, or an object with the Connect metadata AvroData keeps
// (connect.type for int8 and int16, then connect.doc, connect.version,
// connect.parameters and connect.name); Kafka Connect's Decimal is Avro's
// decimal logical type on bytes (scale, precision, 64 when Connect names
// none), Debezium's VariableScaleDecimal a record. n tracks the names
// already defined (a record named twice is written by name the second
// time); nil for a schema of its own.
func appendAvroConnect(dst []byte, ct connectType, optional bool, n *avroNames) ([]byte, bool) {
	return appendAvroConnectDefault(dst, ct, optional, nil, n)
}

// appendAvroConnectDefault is appendAvroConnect for a Connect type with a
// default (def, its Avro JSON; nil for none): AvroData writes it as
// connect.default, and an optional type's union puts the type before
// null, as Avro wants a default to be of the union's first branch.
func appendAvroConnectDefault(dst []byte, ct connectType, optional bool, def []byte, n *avroNames) ([]byte, bool) {
	if ct.name == variableScaleDecimal.name {
		if optional {
			dst = append(dst, `["null",`...)
		}
		if n != nil && n.defined[ct.name] {
			dst = appendJavaString(dst, ct.name)
		} else {
			if n != nil {
				n.define(ct.name)
			}
			dst = append(dst, `{"type":"record","name":"VariableScaleDecimal","namespace":"io.debezium.data",`+
				`"fields":[{"name":"scale","type":"int"},{"name":"value","type":"bytes"}],`+
				`"connect.doc":"Variable scaled decimal","connect.version":1,"connect.name":"io.debezium.data.VariableScaleDecimal"}`...)
		}
		if optional {
			dst = append(dst, ']')
		}
		return dst, true
	}
	var base, connectTyp string
	switch ct.typ {
	case "boolean", "float", "double", "string", "bytes":
		base = ct.typ
	case "int8", "int16":
		base, connectTyp = "int", ct.typ
	case "int32":
		base = "int"
	case "int64":
		base = "long"
	default:
		return dst, false
	}
	if ct.params != "" && ct.name != decimalName {
		return dst, false
	}
	if optional {
		dst = append(dst, '[')
		if def == nil {
			dst = append(dst, `"null",`...)
		}
	}
	if connectTyp == "" && ct.name == "" && ct.version == 0 && ct.doc == "" && def == nil {
		dst = append(dst, '"')
		dst = append(dst, base...)
		dst = append(dst, '"')
	} else {
		dst = append(dst, `{"type":"`...)
		dst = append(dst, base...)
		dst = append(dst, '"')
		if connectTyp != "" {
			dst = append(dst, `,"connect.type":"`...)
			dst = append(dst, connectTyp...)
			dst = append(dst, '"')
		}
		if ct.name == decimalName {
			dst = appendAvroDecimalProps(dst, ct.params)
		}
		if ct.doc != "" {
			dst = append(dst, `,"connect.doc":`...)
			dst = appendJavaString(dst, ct.doc)
		}
		if ct.version != 0 {
			dst = append(dst, `,"connect.version":`...)
			dst = strconv.AppendInt(dst, int64(ct.version), 10)
		}
		if ct.params != "" {
			dst = append(dst, `,"connect.parameters":`...)
			dst = append(dst, ct.params...)
		}
		if def != nil {
			dst = append(dst, `,"connect.default":`...)
			dst = append(dst, def...)
		}
		if ct.name != "" {
			dst = append(dst, `,"connect.name":`...)
			dst = appendJavaString(dst, ct.name)
		}
		if lt := avroLogicalTypes[ct.name]; lt != "" {
			dst = append(dst, `,"logicalType":"`...)
			dst = append(dst, lt...)
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	}
	if optional {
		if def != nil {
			dst = append(dst, `,"null"`...)
		}
		dst = append(dst, ']')
	}
	return dst, true
}

// avroDefault is a column's default (its JSON as JsonConverter writes it,
// def) as AvroData writes it in a schema: the same, but bytes as a string
// of one character per byte, as Avro's JSON encoding has them.
func avroDefault(ct connectType, def []byte) []byte {
	if def == nil || ct.typ != "bytes" {
		return def
	}
	s, err := strconv.Unquote(string(def))
	if err != nil {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return appendJavaString(nil, string(r))
}

// appendAvroRecordStart appends a record's schema up to its fields'
// opening bracket, and enters its namespace; name is the Connect schema's
// name, split at its last dot.
func (n *avroNames) appendRecordStart(dst []byte, name string) ([]byte, string) {
	space, local := "", name
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			space, local = name[:i], name[i+1:]
			break
		}
	}
	dst = append(dst, `{"type":"record","name":`...)
	dst = appendJavaString(dst, local)
	if space != n.space {
		dst = append(dst, `,"namespace":`...)
		dst = appendJavaString(dst, space)
	}
	outer := n.space
	n.space = space
	return append(dst, `,"fields":[`...), outer
}

// appendRecordEnd closes a record's schema: its Connect version and name,
// and leaves its namespace.
func (n *avroNames) appendRecordEnd(dst []byte, outer, name string, version *int32) []byte {
	n.space = outer
	dst = append(dst, ']')
	if version != nil {
		dst = append(dst, `,"connect.version":`...)
		dst = strconv.AppendInt(dst, int64(*version), 10)
	}
	dst = append(dst, `,"connect.name":`...)
	dst = appendJavaString(dst, name)
	return append(dst, '}')
}

// appendAvroField appends a record field's name and opening, "type":.
func appendAvroField(dst []byte, name string) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendJavaString(dst, name)
	return append(dst, `,"type":`...)
}

// appendAvroFieldEnd closes a field: an optional one defaults to null.
func appendAvroFieldEnd(dst []byte, optional bool) []byte {
	return appendAvroFieldEndDefault(dst, optional, nil)
}

// appendAvroFieldEndDefault closes a field with its default (Avro JSON;
// nil for none).
func appendAvroFieldEndDefault(dst []byte, optional bool, def []byte) []byte {
	switch {
	case def != nil:
		dst = append(dst, `,"default":`...)
		dst = append(dst, def...)
	case optional:
		dst = append(dst, `,"default":null`...)
	}
	return append(dst, '}')
}

// appendCSchema appends an inferred (expanded JSON) schema: optional
// (a union with null) as every field of it is, or, for the expanded
// payload as the whole value, not.
func (n *avroNames) appendCSchema(dst []byte, s *cschema, optional bool) []byte {
	if optional {
		dst = append(dst, `["null",`...)
	}
	switch s.typ {
	case "struct":
		var outer string
		dst, outer = n.appendRecordStart(dst, s.name)
		for i, f := range s.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendAvroField(dst, f.name)
			dst = n.appendCSchema(dst, f.s, true)
			dst = appendAvroFieldEnd(dst, true)
		}
		dst = n.appendRecordEnd(dst, outer, s.name, nil)
	case "array":
		dst = append(dst, `{"type":"array","items":`...)
		dst = n.appendCSchema(dst, s.items, !s.items.required)
		dst = append(dst, '}')
	case "int32":
		dst = append(dst, `"int"`...)
	case "int64":
		dst = append(dst, `"long"`...)
	default: // string, boolean, double
		dst = append(dst, '"')
		dst = append(dst, s.typ...)
		dst = append(dst, '"')
	}
	if optional {
		dst = append(dst, ']')
	}
	return dst
}

// appendAvroLong appends v in Avro's zig-zag variable-length encoding.
func appendAvroLong(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

func appendAvroBytes[T ~string | ~[]byte](dst []byte, b T) []byte {
	dst = appendAvroLong(dst, int64(len(b)))
	return append(dst, b...)
}

// appendAvroValue appends a column's text value in Avro's binary encoding
// of its Connect type under the value options m (not null: the caller
// writes a union's branch): AvroData's value of what Debezium's converter
// makes of the column. reason is set when the text is not a value of the
// type.
func appendAvroValue(dst []byte, t pgType, m valueModes, text []byte) ([]byte, string) {
	ct, _ := connectTypeOf(t, m)
	switch ct.typ {
	case "boolean":
		switch string(text) {
		case "t", "true":
			return append(dst, 1), ""
		case "f", "false":
			return append(dst, 0), ""
		}
		return dst, "malformed boolean"
	case "float":
		f, err := strconv.ParseFloat(string(text), 32)
		if err != nil && !math.IsInf(f, 0) {
			return dst, "malformed float"
		}
		return appendAvroFloat(dst, f), ""
	case "double":
		var f float64
		if t.oid == oidNumeric || t.oid == oidMoney { // decimal.handling.mode=double
			if _, reason := parseDecimal(t, text); reason != "" {
				return dst, reason
			}
			f = decimalFloat(t, text)
		} else {
			var err error
			if f, err = strconv.ParseFloat(string(text), 64); err != nil && !math.IsInf(f, 0) {
				return dst, "malformed float"
			}
		}
		return appendAvroDouble(dst, f), ""
	case "int16", "int32", "int64":
		// Integers as Postgres prints them; the temporal types and
		// intervals as JsonConverter's number of them.
		v, reason := appendConnectValue(nil, t, m, text)
		if reason != "" {
			return dst, reason
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return dst, "malformed integer"
		}
		return appendAvroLong(dst, n), ""
	case "bytes":
		if t.oid == oidBytea {
			b, ok := decodeByteaHex(text)
			if !ok {
				return dst, "malformed bytea (hex output expected)"
			}
			return appendAvroBytes(dst, b), ""
		}
		return appendAvroDecimal(dst, t, text)
	case "struct": // VariableScaleDecimal
		return appendAvroDecimal(dst, t, text)
	}
	// A string: the Connect value's text, which StringConverter writes,
	// then moved behind its length.
	start := len(dst)
	dst, reason := appendStringValue(dst, t, m, text)
	if reason != "" {
		return dst[:start], reason
	}
	n := len(dst) - start
	var lb [binary.MaxVarintLen64]byte
	l := appendAvroLong(lb[:0], int64(n))
	dst = append(dst, l...)
	copy(dst[start+len(l):], dst[start:start+n])
	copy(dst[start:], l)
	return dst, ""
}

// appendAvroFloat and appendAvroDouble append an Avro float and double:
// little-endian IEEE 754, a NaN as Java's Float.floatToIntBits and
// Double.doubleToLongBits give it (the canonical quiet NaN; Go's NaN has
// another payload).
func appendAvroFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) {
		return binary.LittleEndian.AppendUint32(dst, 0x7fc00000)
	}
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f)))
}

func appendAvroDouble(dst []byte, f float64) []byte {
	if math.IsNaN(f) {
		return binary.LittleEndian.AppendUint64(dst, 0x7ff8000000000000)
	}
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

// appendAvroDecimal appends a numeric or money under
// decimal.handling.mode=precise: Decimal's unscaled bytes, or a
// VariableScaleDecimal's {scale int, value bytes}.
func appendAvroDecimal(dst []byte, t pgType, text []byte) ([]byte, string) {
	d, reason := parseDecimal(t, text)
	if reason != "" {
		return dst, reason
	}
	if d.special {
		return dst, "not a number Avro can hold (NaN, Infinity) in a NOT NULL column"
	}
	if _, _, ok := t.numericScale(); !ok && t.oid == oidNumeric {
		dst = appendAvroLong(dst, int64(d.scale))
	}
	return appendAvroBytes(dst, d.bytes()), ""
}

// appendAvroData appends an expanded JSON value against its inferred
// schema: every one optional, so a union's branch first, but the merged
// schema of an array's objects. A null there failed the expansion
// (appendConnectData), which never reaches here.
func appendAvroData(dst []byte, n *jnode, s *cschema) []byte {
	if n == nil || n.kind == 'z' {
		return append(dst, 0)
	}
	if !s.required {
		dst = append(dst, 2) // the union's branch
	}
	switch s.typ {
	case "struct":
		for _, f := range s.fields {
			v, _ := n.get(f.name)
			dst = appendAvroData(dst, v, f.s)
		}
	case "array":
		if len(n.elems) > 0 {
			dst = appendAvroLong(dst, int64(len(n.elems)))
			for _, e := range n.elems {
				dst = appendAvroData(dst, e, s.items)
			}
		}
		dst = append(dst, 0)
	case "string":
		dst = appendAvroBytes(dst, n.str)
	case "boolean":
		if n.b {
			return append(dst, 1)
		}
		return append(dst, 0)
	case "int32", "int64":
		dst = appendAvroLong(dst, n.num.i)
	case "double":
		dst = appendAvroDouble(dst, n.num.f)
	}
	return dst
}

// avroSchemaOf is the Avro schema of a column's value written by conv
// under the value options m, "" when conv (or a binary converter's
// delegate for the value) is not avro;
// reason is set for a type the avro converter does not write.
func avroSchemaOf(conv Converter, t pgType, m valueModes, optional bool, def []byte) (string, string) {
	if c, ok := conv.writer(m.kind(t), false); !ok || c != ConvAvro {
		return "", ""
	}
	ct, _ := connectTypeOf(t, m)
	if ct.typ == "" {
		ct = connectType{typ: "string"}
	}
	s, ok := appendAvroConnectDefault(nil, ct, optional, avroDefault(ct, def), nil)
	if !ok {
		return "", "the avro converter does not write this column's type yet"
	}
	return string(s), ""
}

// appendAvroOutboxValue appends the outbox router's struct value (the
// payload with the envelope placements) or its expanded payload alone,
// in Avro, and returns its schema: a record named as EventRouterDelegate
// names the struct, <topic.prefix>.<schema>.<table>.<routed value>.Value,
// with the payload field first, expanded or as its column's type, then
// each placement; a nullable column is an optional field.
func (c *DebeziumConfig) appendAvroOutboxValue(buf []byte, r *Record, envelope []FieldValue, isStruct bool) ([]byte, string, error) {
	var (
		names avroNames
		sch   []byte
		exp   *cschema
		node  *jnode
	)
	payloadType := r.columnType(fPayload)
	payloadCT, _ := connectTypeOf(payloadType, c.vm)
	if payloadCT.typ == "" {
		payloadCT = connectType{typ: "string"}
	}
	if c.ExpandJSONPayload && payloadCT.typ == "string" && r.Payload != nil {
		if s, _, n, err := c.jsonSchemaData().expandPayloadNode(r.columnName(fPayload), payloadString(r, c.vm)); err == nil {
			exp, node = s, n
		}
	}
	if !isStruct {
		// An expanded payload alone: a record, not optional (the
		// router's value schema), so without a union's branch.
		start := len(buf)
		buf = appendAvroData(buf, node, exp)
		buf = append(buf[:start], buf[start+1:]...)
		return buf, string(names.appendCSchema(nil, exp, false)), nil
	}
	name := c.TopicPrefix + "." + r.Origin.Schema + "." + r.Origin.Table + "." + r.AggregateType + ".Value"
	sch, outer := names.appendRecordStart(sch, name)
	sch = appendAvroField(sch, "payload")
	payloadOptional := c.optional(r.columnName(fPayload))
	if exp != nil {
		sch = names.appendCSchema(sch, exp, true)
		sch = appendAvroFieldEnd(sch, true)
		buf = appendAvroData(buf, node, exp)
	} else {
		var ok bool
		def := avroDefault(payloadCT, c.defaultJSON(r.columnName(fPayload), payloadType))
		if sch, ok = appendAvroConnectDefault(sch, payloadCT, payloadOptional, def, &names); !ok {
			return buf, "", &RowError{Column: r.columnName(fPayload), Reason: "the avro converter does not write this column's type yet"}
		}
		sch = appendAvroFieldEndDefault(sch, payloadOptional, def)
		var reason string
		if buf, reason = appendAvroFieldValue(buf, payloadType, c.vm, r.Payload, payloadOptional, def != nil); reason != "" {
			return buf, "", &RowError{Column: r.columnName(fPayload), Reason: reason}
		}
	}
	for _, a := range envelope {
		ct, _ := connectTypeOf(a.typ(), c.vm)
		if ct.typ == "" {
			ct = connectType{typ: "string"}
		}
		optional := c.optional(a.Column)
		def := avroDefault(ct, c.defaultJSON(a.Column, a.typ()))
		sch = append(sch, ',')
		sch = appendAvroField(sch, a.Alias)
		var ok bool
		if sch, ok = appendAvroConnectDefault(sch, ct, optional, def, &names); !ok {
			return buf, "", &RowError{Column: a.Column, Reason: "the avro converter does not write this column's type yet"}
		}
		sch = appendAvroFieldEndDefault(sch, optional, def)
		var reason string
		if buf, reason = appendAvroFieldValue(buf, a.typ(), c.vm, a.Value, optional, def != nil); reason != "" {
			return buf, "", &RowError{Column: a.Column, Reason: reason}
		}
	}
	sch = names.appendRecordEnd(sch, outer, name, r.Version)
	return buf, string(sch), nil
}

// appendAvroFieldValue appends a field's value: an optional field's
// union branch first (null, or the value; the other way round when the
// field has a default, valueFirst).
func appendAvroFieldValue(dst []byte, t pgType, m valueModes, text []byte, optional, valueFirst bool) ([]byte, string) {
	text = m.valueOf(t, text, optional)
	nullBranch, valueBranch := byte(0), byte(2) // zig-zag 0 and 1
	if valueFirst {
		nullBranch, valueBranch = valueBranch, nullBranch
	}
	if isNullValue(t, m, text) {
		if !optional {
			return dst, "NULL in a column that is NOT NULL"
		}
		return append(dst, nullBranch), ""
	}
	if optional {
		dst = append(dst, valueBranch)
	}
	return appendAvroValue(dst, t, m, text)
}
