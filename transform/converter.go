package transform

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/schema"
)

// This file writes a record's key, value and headers through the
// converters a configuration names (schema.Converter), as Kafka's
// JsonConverter, StringConverter, SimpleHeaderConverter and
// ByteArrayConverter and Debezium's BinaryDataConverter write Kafka
// Connect data (fromConnectData, fromConnectHeader).

// encodePart writes one part; nil is Kafka's null (no bytes at all).
// header selects SimpleHeaderConverter for the string converter.
func encodePart(conv schema.Converter, header bool, s *Schema, v any) ([]byte, error) {
	base, delegate, _ := strings.Cut(string(conv), ":")
	switch schema.Converter(base) {
	case schema.ConvJSON:
		if s == nil && v == nil {
			return nil, nil
		}
		return appendJSONValue(nil, s, v)
	case schema.ConvJSONSchemas:
		if s == nil && v == nil {
			return nil, nil
		}
		return appendJSONEnvelope(nil, s, v)
	case schema.ConvString:
		if v == nil {
			return nil, nil
		}
		if header {
			return appendValuesString(nil, s, v, false)
		}
		return appendJavaText(nil, s, v)
	case schema.ConvByteArray:
		if s != nil && s.Type != Bytes {
			return nil, dataErrorf("ByteArrayConverter: invalid schema type %s", s.Type)
		}
		if v == nil {
			return nil, nil
		}
		if b, ok := v.([]byte); ok && s.logical() == "" {
			return b, nil
		}
		return nil, dataErrorf("ByteArrayConverter: cannot write a %s", describe(s, v))
	case schema.ConvText:
		if _, ok := v.(string); ok || v == nil && s != nil && s.Type == String {
			return encodePart(schema.ConvString, header, s, v)
		}
		return encodePart(schema.Converter(delegate), header, s, v)
	case schema.ConvBinary:
		if b, ok := v.([]byte); ok && (s == nil || s.Type == Bytes && s.logical() == "") {
			return b, nil
		}
		if v == nil && (s == nil || s.Type == Bytes) {
			return nil, nil
		}
		if delegate == "" || header {
			// Debezium configures a header BinaryDataConverter without
			// its delegate.
			return nil, dataErrorf("BinaryDataConverter: no delegate converter for a %s", describe(s, v))
		}
		return encodePart(schema.Converter(delegate), header, s, v)
	}
	if c := schema.Converter(base); c.IsNumber() {
		return encodeNumber(c, s, v)
	}
	return nil, dataErrorf("unknown converter %q", conv)
}

// numberTypes are the Connect type each number converter's serializer
// takes (it casts the value to its Java class: another type fails).
var numberTypes = map[schema.Converter]Type{schema.ConvLong: Int64, schema.ConvInteger: Int32, schema.ConvShort: Int16,
	schema.ConvFloat: Float32, schema.ConvDouble: Float64, schema.ConvBoolean: Boolean}

// encodeNumber writes v as Kafka's LongSerializer, IntegerSerializer,
// ShortSerializer, FloatSerializer, DoubleSerializer or BooleanSerializer
// does: big-endian, a boolean as one byte; null as null.
func encodeNumber(c schema.Converter, s *Schema, v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if s == nil || s.Type != numberTypes[c] || s.logical() != "" {
		return nil, dataErrorf("%s converter: cannot write a %s (its serializer takes a %s)", c, describe(s, v), numberTypes[c])
	}
	switch x := v.(type) {
	case int64:
		n := map[schema.Converter]int{schema.ConvLong: 8, schema.ConvInteger: 4, schema.ConvShort: 2}[c]
		out := make([]byte, n)
		for i := range n {
			out[n-1-i] = byte(x >> (8 * i))
		}
		return out, nil
	case float64:
		if c == schema.ConvFloat {
			return binary.BigEndian.AppendUint32(nil, math.Float32bits(float32(x))), nil
		}
		return binary.BigEndian.AppendUint64(nil, math.Float64bits(x)), nil
	case bool:
		if x {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	}
	return nil, dataErrorf("%s converter: cannot write a %s", c, describe(s, v))
}

// describe names a value's Connect type for an error.
func describe(s *Schema, v any) string {
	if s != nil {
		if s.Name != "" {
			return string(s.Type) + " (" + s.Name + ")"
		}
		return string(s.Type)
	}
	switch v.(type) {
	case *Struct:
		return "struct"
	case []any:
		return "array"
	case []MapEntry:
		return "map"
	}
	return "value"
}

// appendJavaText appends v's Object.toString, which StringConverter writes
// for a key or a value. Only the values whose text is data are written:
// a Java object's name (a byte array's, a Struct's) or a Date in the
// worker's time zone are not.
func appendJavaText(dst []byte, s *Schema, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		return append(dst, x...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case float64:
		return appendJavaFloat(dst, s, x), nil
	case int64:
		if s.logical() == "" {
			return strconv.AppendInt(dst, x, 10), nil
		}
	case []byte:
		if s.logical() == decimalName {
			return appendDecimal(dst, s, x), nil
		}
	case *Struct:
		// Struct.toString: Struct{name=value,...}, null fields left out.
		dst = append(dst, "Struct{"...)
		first := true
		for i, fv := range x.Values {
			if fv == nil {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			f := x.Schema.Fields[i]
			dst = append(dst, f.Name...)
			dst = append(dst, '=')
			var err error
			if dst, err = appendJavaText(dst, f.Schema, fv); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, dataErrorf("StringConverter: pgoutbox does not write a %s as text (Kafka Connect writes the Java object's toString)", describe(s, v))
}

// appendJavaFloat appends Float.toString or Double.toString.
func appendJavaFloat(dst []byte, s *Schema, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	bits := 64
	if s != nil && s.Type == Float32 {
		bits = 32
	}
	return schema.AppendJSONFloat(dst, f, bits)
}

// appendDecimal appends a Decimal's BigDecimal.toString.
func appendDecimal(dst []byte, s *Schema, unscaled []byte) []byte {
	var n big.Int
	n.SetBytes(unscaled)
	if len(unscaled) > 0 && unscaled[0]&0x80 != 0 { // negative: two's complement
		var m big.Int
		m.Lsh(big.NewInt(1), uint(8*len(unscaled)))
		n.Sub(&n, &m)
	}
	scale := 0
	if p, ok := s.param("scale"); ok {
		scale, _ = strconv.Atoi(p)
	}
	return append(dst, schema.JavaDecimalString(&n, scale)...)
}

// appendValuesString appends v as Kafka Connect's Values.convertToString
// writes it (SimpleHeaderConverter): strings as they are at the top and
// quoted inside (only '\\' and '"' escaped), bytes in base64, arrays,
// maps and structs in brackets and braces, Connect's dates in ISO 8601
// (in UTC: Connect uses the worker's time zone).
func appendValuesString(dst []byte, s *Schema, v any, embedded bool) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		if !embedded {
			return append(dst, x...), nil
		}
		x = strings.ReplaceAll(strings.ReplaceAll(x, `\`, `\\`), `"`, `\"`)
		return append(append(append(dst, '"'), x...), '"'), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case float64:
		return appendJavaFloat(dst, s, x), nil
	case int64:
		if l := s.logical(); l == dateName || l == timeName || l == timestampName {
			return appendISODate(dst, l, x), nil
		}
		return strconv.AppendInt(dst, x, 10), nil
	case []byte:
		if s.logical() == decimalName {
			return appendDecimal(dst, s, x), nil
		}
		if embedded {
			dst = append(dst, '"')
		}
		dst = base64.StdEncoding.AppendEncode(dst, x)
		if embedded {
			dst = append(dst, '"')
		}
		return dst, nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendValuesString(dst, items(s), e, true); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case []MapEntry:
		dst = append(dst, '{')
		var ks, vs *Schema
		if s != nil {
			ks, vs = s.Keys, s.Values
		}
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendValuesString(dst, ks, e.Key, true); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = appendValuesString(dst, vs, e.Value, true); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case *Struct:
		dst = append(dst, '{')
		for i, f := range x.Schema.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst, _ = appendValuesString(dst, nil, f.Name, true)
			dst = append(dst, ':')
			if dst, err = appendValuesString(dst, f.Schema, x.get(i, true), true); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, dataErrorf("SimpleHeaderConverter: a value of type %T", v)
}

func items(s *Schema) *Schema {
	if s == nil {
		return nil
	}
	return s.Items
}

// appendISODate writes a Connect Date (days), Time or Timestamp
// (milliseconds) as Values.dateFormatFor does.
func appendISODate(dst []byte, logical string, v int64) []byte {
	if logical == dateName {
		v *= 24 * 60 * 60 * 1000
	}
	return schema.AppendValuesDate(dst, v)
}
