package transform

import (
	"fmt"
	"slices"
)

// insertHeader is InsertHeader: a header of the literal's value, as
// Values.parseString reads it, at the end.
type insertHeader struct {
	name   string
	schema *Schema
	value  any
}

func newInsertHeader(o *options) transformation {
	name, _ := o.str("header", true, "")
	lit, ok := o.str("value.literal", true, "")
	if !ok {
		return nil
	}
	s, v, err := parseLiteral(lit)
	if err != nil {
		o.refuse("value.literal", fmt.Sprintf("%q: %v", lit, err))
	}
	if o.failed {
		return nil
	}
	return insertHeader{name: name, schema: s, value: v}
}

func (t insertHeader) apply(r *Record) (bool, error) {
	r.Headers = append(slices.Clip(r.Headers), Header{Key: t.name, Schema: t.schema, Value: t.value})
	return true, nil
}

// dropHeaders is DropHeaders: every header of the names goes.
type dropHeaders struct{ names []string }

func newDropHeaders(o *options) transformation {
	names := o.list("headers", true, true, true)
	if o.failed {
		return nil
	}
	return dropHeaders{names: names}
}

func (t dropHeaders) apply(r *Record) (bool, error) {
	r.Headers = slices.DeleteFunc(slices.Clone(r.Headers), func(h Header) bool { return slices.Contains(t.names, h.Key) })
	return true, nil
}

// headerFrom is HeaderFrom$Key and $Value: struct fields copied or moved
// into headers, each with its field's schema.
type headerFrom struct {
	key             bool
	fields, headers []string
	move            bool
	withDefault     bool
}

func newHeaderFrom(o *options, key bool) transformation {
	fields := o.list("fields", true, true, false)
	headers := o.list("headers", true, true, false)
	op, ok := o.str("operation", true, "")
	if ok && op != "move" && op != "copy" {
		o.refuse("operation", fmt.Sprintf("%q: want move or copy", op))
	}
	if !o.failed && len(fields) != len(headers) {
		o.refuse("headers", "not as many as fields (Kafka Connect refuses it)")
	}
	t := &headerFrom{key: key, fields: fields, headers: headers, move: op == "move", withDefault: o.boolean("replace.null.with.default", true)}
	if o.failed {
		return nil
	}
	return t
}

// structKeyRefusal says why a transform of the key's struct cannot run
// after the Outbox Event Router, unless one before it made the key a
// struct.
const structKeyRefusal = "the Outbox Event Router's key is the aggregate id column, never a struct unless a ValueToKey or HoistField$Key before this transform makes one: Kafka Connect's task fails at the first record"

func (t *headerFrom) onKey() bool { return t.key }

func (t *headerFrom) apply(r *Record) (bool, error) {
	purpose := "header copy"
	if t.move {
		purpose = "header move"
	}
	s, v := operand(r, t.key)
	st, err := requireStruct(s, v, purpose)
	if err != nil {
		return false, err
	}
	for _, f := range t.fields {
		if s.field(f) < 0 {
			return false, dataErrorf("field %q is not in the schema (Kafka Connect: NullPointerException)", f)
		}
	}
	add := make([]Header, 0, len(t.fields))
	for i, f := range t.fields {
		fs := s.Fields[s.field(f)].Schema
		var fv any
		if j := st.Schema.field(f); j >= 0 {
			fv = st.get(j, t.withDefault)
		}
		if fv == nil && !fs.Optional {
			return false, dataErrorf("a null value requires an optional schema (header %s)", t.headers[i])
		}
		add = append(add, Header{Key: t.headers[i], Schema: fs, Value: fv})
	}
	if t.move {
		ns := s.withBasics()
		nv := &Struct{Schema: ns}
		for i, f := range s.Fields {
			if slices.Contains(t.fields, f.Name) {
				continue
			}
			ns.Fields = append(ns.Fields, f)
			nv.Values = append(nv.Values, st.get(i, t.withDefault))
		}
		setOperand(r, t.key, ns, nv)
	}
	r.Headers = append(slices.Clip(r.Headers), add...)
	return true, nil
}

// operand is the record's key or value with its schema.
func operand(r *Record, key bool) (*Schema, any) {
	if key {
		return r.KeySchema, r.Key
	}
	return r.ValueSchema, r.Value
}

func setOperand(r *Record, key bool, s *Schema, v any) {
	if key {
		r.KeySchema, r.Key = s, v
	} else {
		r.ValueSchema, r.Value = s, v
	}
}

// requireStruct is Requirements.requireStruct, or requireMap for a value
// without a schema (a tombstone's).
func requireStruct(s *Schema, v any, purpose string) (*Struct, error) {
	if s == nil {
		return nil, dataErrorf("Only Map objects supported in absence of schema for [%s], found: %s", purpose, javaClass(s, v))
	}
	st, ok := v.(*Struct)
	if !ok {
		return nil, dataErrorf("Only Struct objects supported for [%s], found: %s", purpose, javaClass(s, v))
	}
	return st, nil
}

// javaClass names v's Java class in Connect, for errors.
func javaClass(s *Schema, v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case *Struct:
		return "org.apache.kafka.connect.data.Struct"
	case string:
		return "java.lang.String"
	case bool:
		return "java.lang.Boolean"
	case []any:
		return "java.util.ArrayList"
	case []MapEntry:
		return "java.util.HashMap"
	case []byte:
		if s.logical() == decimalName {
			return "java.math.BigDecimal"
		}
		return "java.nio.HeapByteBuffer"
	case float64:
		if s != nil && s.Type == Float32 {
			return "java.lang.Float"
		}
		return "java.lang.Double"
	}
	if s == nil {
		return "java.lang.Long"
	}
	switch s.Type {
	case Int8:
		return "java.lang.Byte"
	case Int16:
		return "java.lang.Short"
	case Int32:
		return "java.lang.Integer"
	}
	return "java.lang.Long"
}
