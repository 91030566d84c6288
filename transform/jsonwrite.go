package transform

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/pgoutbox/pgoutbox/schema"
)

// This file writes Kafka Connect data as JsonConverter does
// (fromConnectData: asJsonSchema and convertToJson, with its default
// replace.null.with.default=true and decimal.format=BASE64).

// appendJSONEnvelope appends {"schema":…,"payload":…} (schemas.enable=true).
func appendJSONEnvelope(dst []byte, s *Schema, v any) ([]byte, error) {
	dst = append(dst, `{"schema":`...)
	dst = appendJSONSchema(dst, s, "")
	dst = append(dst, `,"payload":`...)
	dst, err := appendJSONValue(dst, s, v)
	return append(dst, '}'), err
}

// appendJSONSchema appends s as asJsonSchema writes it; field, when set,
// is a struct field's name, written last.
func appendJSONSchema(dst []byte, s *Schema, field string) []byte {
	if s == nil {
		dst = append(dst, "null"...)
		return dst
	}
	dst = append(dst, `{"type":"`...)
	dst = append(dst, s.Type...)
	dst = append(dst, '"')
	switch s.Type {
	case StructT:
		dst = append(dst, `,"fields":[`...)
		for i, f := range s.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONSchema(dst, f.Schema, f.Name)
		}
		dst = append(dst, ']')
	case Array:
		dst = append(dst, `,"items":`...)
		dst = appendJSONSchema(dst, s.Items, "")
	case Map:
		dst = append(dst, `,"keys":`...)
		dst = appendJSONSchema(dst, s.Keys, "")
		dst = append(dst, `,"values":`...)
		dst = appendJSONSchema(dst, s.Values, "")
	}
	dst = append(dst, `,"optional":`...)
	dst = strconv.AppendBool(dst, s.Optional)
	if s.Name != "" {
		dst = append(dst, `,"name":`...)
		dst = schema.AppendJSONString(dst, s.Name)
	}
	if s.Version != nil {
		dst = append(dst, `,"version":`...)
		dst = strconv.AppendInt(dst, int64(*s.Version), 10)
	}
	if s.Doc != nil {
		dst = append(dst, `,"doc":`...)
		dst = schema.AppendJSONString(dst, *s.Doc)
	}
	if s.Params != nil {
		dst = append(dst, `,"parameters":`...)
		dst = appendParams(dst, s.Params)
	}
	if s.HasDefault {
		dst = append(dst, `,"default":`...)
		// A default is a valid value of its schema: it cannot fail.
		dst, _ = appendJSONValue(dst, s, s.Default)
	}
	if field != "" {
		dst = append(dst, `,"field":`...)
		dst = schema.AppendJSONString(dst, field)
	}
	return append(dst, '}')
}

// appendJSONValue appends v as convertToJson writes it.
func appendJSONValue(dst []byte, s *Schema, v any) ([]byte, error) {
	if v == nil {
		switch {
		case s == nil:
			return append(dst, "null"...), nil
		case s.HasDefault:
			return appendJSONValue(dst, s, s.Default)
		case s.Optional:
			return append(dst, "null"...), nil
		}
		return dst, dataErrorf("JsonConverter: null value for a field that is required and has no default value")
	}
	if s == nil {
		return dst, dataErrorf("JsonConverter: a value without a schema")
	}
	var err error
	switch x := v.(type) {
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case float64:
		bits := 64
		if s.Type == Float32 {
			bits = 32
		}
		return schema.AppendJSONFloat(dst, x, bits), nil
	case string:
		return schema.AppendJSONString(dst, x), nil
	case []byte:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"'), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendJSONValue(dst, s.Items, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case []MapEntry:
		return appendJSONMap(dst, s, x)
	case *Struct:
		dst = append(dst, '{')
		for i, f := range x.Schema.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = schema.AppendJSONString(dst, f.Name)
			dst = append(dst, ':')
			if dst, err = appendJSONValue(dst, f.Schema, x.Values[i]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, dataErrorf("JsonConverter: a value of type %T", v)
}

// appendJSONMap writes a map as an object when its keys are strings, as
// an array of [key, value] pairs otherwise.
func appendJSONMap(dst []byte, s *Schema, m []MapEntry) ([]byte, error) {
	var err error
	if s.Keys.Type == String {
		dst = append(dst, '{')
		for i, e := range m {
			if i > 0 {
				dst = append(dst, ',')
			}
			k, _ := e.Key.(string)
			dst = schema.AppendJSONString(dst, k)
			dst = append(dst, ':')
			if dst, err = appendJSONValue(dst, s.Values, e.Value); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	dst = append(dst, '[')
	for i, e := range m {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		if dst, err = appendJSONValue(dst, s.Keys, e.Key); err != nil {
			return dst, err
		}
		dst = append(dst, ',')
		if dst, err = appendJSONValue(dst, s.Values, e.Value); err != nil {
			return dst, err
		}
		dst = append(dst, ']')
	}
	return append(dst, ']'), nil
}

// dataErrorf is a DataException of Kafka Connect: one record's problem.
func dataErrorf(format string, args ...any) error {
	return &DataError{Reason: fmt.Sprintf(format, args...)}
}

// appendParams appends a schema's parameters as a JSON object, in order.
func appendParams(dst []byte, params []Param) []byte {
	dst = append(dst, '{')
	for i, p := range params {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = schema.AppendJSONString(dst, p.Key)
		dst = append(dst, ':')
		dst = schema.AppendJSONString(dst, p.Value)
	}
	return append(dst, '}')
}
