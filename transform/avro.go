package transform

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/pgoutbox/pgoutbox/schema"
)

// This file writes Kafka Connect data as the registries' AvroConverters
// do (AvroData with connect.meta.data on, as Apicurio's and Confluent's
// converters run it): the Avro schema of a Connect schema, printed as
// Avro's Schema.toString prints it, and the value in Avro's binary
// encoding. The registry's framing is package registry's.

// avroNames tracks the enclosing namespace while a schema is written and
// the named types already defined, which later uses name.
type avroNames struct {
	space   string
	defined map[string]bool
}

// avroLogical are the Avro logical types of Kafka Connect's logical types.
var avroLogical = map[string]string{decimalName: "decimal", dateName: "date", timeName: "time-millis", timestampName: "timestamp-millis"}

// encodeAvro writes v of schema s: its Avro schema and datum.
func encodeAvro(s *Schema, v any) (avroSchema string, datum []byte, err error) {
	if s == nil {
		return "", nil, dataErrorf("AvroConverter: a value without a schema")
	}
	var n avroNames
	sch := n.appendSchema(nil, s)
	datum, err = appendAvroDatum(nil, s, v)
	return string(sch), datum, err
}

// appendSchema appends s: an optional schema is a union with null, led by
// the type when s has a default (Avro's default is of the first branch).
func (n *avroNames) appendSchema(dst []byte, s *Schema) []byte {
	if !s.Optional {
		return n.appendType(dst, s)
	}
	if s.HasDefault {
		dst = append(dst, '[')
		dst = n.appendType(dst, s)
		return append(dst, `,"null"]`...)
	}
	dst = append(dst, `["null",`...)
	dst = n.appendType(dst, s)
	return append(dst, ']')
}

// appendType appends s without its optionality.
func (n *avroNames) appendType(dst []byte, s *Schema) []byte {
	switch s.Type {
	case StructT:
		return n.appendRecord(dst, s)
	case Array:
		dst = append(dst, `{"type":"array","items":`...)
		dst = n.appendSchema(dst, s.Items)
		dst = appendAvroProps(dst, s, "")
		return append(dst, '}')
	case Map:
		if s.Keys != nil && s.Keys.Type == String && !s.Keys.Optional {
			dst = append(dst, `{"type":"map","values":`...)
			dst = n.appendSchema(dst, s.Values)
			dst = appendAvroProps(dst, s, "")
			return append(dst, '}')
		}
		entry := &Schema{Type: StructT, Name: "io.confluent.connect.avro.MapEntry",
			Fields: []Field{{"key", s.Keys}, {"value", s.Values}}}
		dst = append(dst, `{"type":"array","items":`...)
		dst = n.appendRecord(dst, entry)
		return append(dst, '}')
	}
	var base, connectType string
	switch s.Type {
	case Int8, Int16:
		base, connectType = "int", string(s.Type)
	case Int32:
		base = "int"
	case Int64:
		base = "long"
	default: // float, double, boolean, string, bytes
		base = string(s.Type)
	}
	if connectType == "" && s.Name == "" && s.Version == nil && s.Doc == nil && s.Params == nil && !s.HasDefault {
		return strconv.AppendQuote(dst, base)
	}
	dst = append(dst, `{"type":`...)
	dst = strconv.AppendQuote(dst, base)
	if connectType != "" {
		dst = append(dst, `,"connect.type":`...)
		dst = strconv.AppendQuote(dst, connectType)
	}
	if s.Name == decimalName {
		scale, _ := s.param("scale")
		precision, ok := s.param("connect.decimal.precision")
		if !ok {
			precision = "64"
		}
		dst = append(dst, `,"scale":`...)
		dst = append(dst, scale...)
		dst = append(dst, `,"precision":`...)
		dst = append(dst, precision...)
	}
	dst = appendAvroProps(dst, s, avroLogical[s.Name])
	return append(dst, '}')
}

// appendAvroProps appends the Connect metadata AvroData keeps, in its
// order, and the logical type.
func appendAvroProps(dst []byte, s *Schema, logical string) []byte {
	if s.Doc != nil {
		dst = append(dst, `,"connect.doc":`...)
		dst = schema.AppendJSONString(dst, *s.Doc)
	}
	if s.Version != nil {
		dst = append(dst, `,"connect.version":`...)
		dst = strconv.AppendInt(dst, int64(*s.Version), 10)
	}
	if s.Params != nil {
		dst = append(dst, `,"connect.parameters":`...)
		dst = appendParams(dst, s.Params)
	}
	if s.HasDefault && s.Type != StructT {
		dst = append(dst, `,"connect.default":`...)
		dst = appendAvroJSON(dst, s, s.Default)
	}
	if s.Name != "" && s.Type != StructT {
		dst = append(dst, `,"connect.name":`...)
		dst = schema.AppendJSONString(dst, s.Name)
	}
	if logical != "" {
		dst = append(dst, `,"logicalType":`...)
		dst = strconv.AppendQuote(dst, logical)
	}
	return dst
}

// appendRecord appends a struct's record, or its name when it was
// defined before: the full name, or the local one in its own namespace.
func (n *avroNames) appendRecord(dst []byte, s *Schema) []byte {
	full := s.Name
	if full == "" {
		full = "io.confluent.connect.avro.ConnectDefault"
	}
	space, local := "", full
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '.' {
			space, local = full[:i], full[i+1:]
			break
		}
	}
	if n.defined[full] {
		if space == n.space {
			return schema.AppendJSONString(dst, local)
		}
		return schema.AppendJSONString(dst, full)
	}
	if n.defined == nil {
		n.defined = map[string]bool{}
	}
	n.defined[full] = true
	dst = append(dst, `{"type":"record","name":`...)
	dst = schema.AppendJSONString(dst, local)
	if space != n.space {
		dst = append(dst, `,"namespace":`...)
		dst = schema.AppendJSONString(dst, space)
	}
	outer := n.space
	n.space = space
	dst = append(dst, `,"fields":[`...)
	for i, f := range s.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = schema.AppendJSONString(dst, f.Name)
		dst = append(dst, `,"type":`...)
		dst = n.appendSchema(dst, f.Schema)
		switch {
		case f.Schema.HasDefault:
			dst = append(dst, `,"default":`...)
			dst = appendAvroJSON(dst, f.Schema, f.Schema.Default)
		case f.Schema.Optional:
			dst = append(dst, `,"default":null`...)
		}
		dst = append(dst, '}')
	}
	n.space = outer
	dst = append(dst, ']')
	dst = appendAvroProps(dst, s, "") // a record's: doc, version, parameters
	if s.Name != "" {
		dst = append(dst, `,"connect.name":`...)
		dst = schema.AppendJSONString(dst, s.Name)
	}
	return append(dst, '}')
}

// appendAvroJSON appends a default in Avro's JSON encoding: bytes as a
// string of one character per byte, numbers and text as JSON has them.
func appendAvroJSON(dst []byte, s *Schema, v any) []byte {
	switch x := v.(type) {
	case []byte:
		r := make([]rune, len(x))
		for i, c := range x {
			r[i] = rune(c)
		}
		return schema.AppendJSONString(dst, string(r))
	case nil:
		return append(dst, "null"...)
	}
	// A default is a valid value of its schema: it cannot fail.
	out, _ := appendJSONValue(dst, &Schema{Type: s.Type, Items: s.Items, Keys: s.Keys, Values: s.Values, Fields: s.Fields}, v)
	return out
}

// appendAvroDatum appends v in Avro's binary encoding of s's schema.
func appendAvroDatum(dst []byte, s *Schema, v any) ([]byte, error) {
	if s.Optional {
		null, value := int64(0), int64(1)
		if s.HasDefault {
			null, value = 1, 0
		}
		if v == nil {
			return appendAvroLong(dst, null), nil
		}
		dst = appendAvroLong(dst, value)
	} else if v == nil {
		if !s.HasDefault {
			return dst, dataErrorf("AvroConverter: null value for a field that is required and has no default value")
		}
		v = s.Default
	}
	switch x := v.(type) {
	case bool:
		if x {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case int64:
		return appendAvroLong(dst, x), nil
	case float64:
		if s.Type == Float32 {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(x))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(x)), nil
	case string:
		dst = appendAvroLong(dst, int64(len(x)))
		return append(dst, x...), nil
	case []byte:
		dst = appendAvroLong(dst, int64(len(x)))
		return append(dst, x...), nil
	case *Struct:
		var err error
		for i, f := range s.Fields {
			if dst, err = appendAvroDatum(dst, f.Schema, x.Values[i]); err != nil {
				return dst, err
			}
		}
		return dst, nil
	case []any:
		var err error
		if len(x) > 0 {
			dst = appendAvroLong(dst, int64(len(x)))
			for _, item := range x {
				if dst, err = appendAvroDatum(dst, s.Items, item); err != nil {
					return dst, err
				}
			}
		}
		return append(dst, 0), nil
	case []MapEntry:
		var err error
		if len(x) > 0 {
			dst = appendAvroLong(dst, int64(len(x)))
			for _, e := range x {
				if dst, err = appendAvroDatum(dst, s.Keys, e.Key); err != nil {
					return dst, err
				}
				if dst, err = appendAvroDatum(dst, s.Values, e.Value); err != nil {
					return dst, err
				}
			}
		}
		return append(dst, 0), nil
	}
	return dst, dataErrorf("AvroConverter: cannot write a %s", describe(s, v))
}

// appendAvroLong appends v in Avro's zig-zag variable-length encoding.
func appendAvroLong(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}
