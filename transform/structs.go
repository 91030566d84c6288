package transform

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"github.com/pgoutbox/pgoutbox/schema"
)

// This file holds Kafka Connect's transforms that take a field out of a
// struct, wrap a value in one, or build the key from the value's fields:
// ExtractField, HoistField, ValueToKey, Flatten; and MaskField, which
// blanks fields.

// extractField is ExtractField$Key and $Value: the struct replaced by one
// of its fields (field.syntax.version V1: a field of the struct; V2: a
// dotted path into nested structs).
type extractField struct {
	key         bool
	original    string
	path        []string
	withDefault bool
}

func newExtractField(o *options, key bool) transformation {
	f, ok := o.str("field", true, "")
	t := &extractField{key: key, original: f, path: []string{f}, withDefault: o.boolean("replace.null.with.default", true)}
	v, _ := o.str("field.syntax.version", false, "V1")
	switch strings.ToUpper(v) {
	case "V1":
	case "V2":
		if !ok {
			break
		}
		if strings.Contains(f, "`") {
			o.refuse("field", fmt.Sprintf("%q: backtick-quoted path segments are not implemented", f))
		}
		t.path = strings.Split(f, ".")
		for _, s := range t.path {
			if s == "" {
				o.refuse("field", fmt.Sprintf("%q: an empty path segment is not implemented", f))
				break
			}
		}
	default:
		o.refuse("field.syntax.version", fmt.Sprintf("%q: want V1 or V2", v))
	}
	if o.failed {
		return nil
	}
	return t
}

func (t *extractField) onKey() bool { return t.key }

func (t *extractField) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if s == nil {
		if v != nil {
			return false, dataErrorf("Only Map objects supported in absence of schema for [field extraction], found: %s", javaClass(s, v))
		}
		return true, nil
	}
	st, ok := v.(*Struct)
	if v != nil && !ok {
		return false, dataErrorf("Only Struct objects supported for [field extraction], found: %s", javaClass(s, v))
	}
	// The field's schema (SingleFieldPath.fieldFrom).
	fs := s
	for _, name := range t.path {
		if fs.Type != StructT {
			return false, dataErrorf("Cannot look up fields on non-struct type")
		}
		j := fs.field(name)
		if j < 0 {
			return false, dataErrorf("Unknown field: %s", t.original)
		}
		fs = fs.Fields[j].Schema
	}
	var out any
	if st != nil {
		var err error
		if out, err = t.valueFrom(st); err != nil {
			return false, err
		}
	}
	setOperand(r, t.key, fs, out)
	return true, nil
}

// valueFrom is SingleFieldPath.valueFrom: the path's value, null where a
// struct on the way is null.
func (t *extractField) valueFrom(st *Struct) (any, error) {
	for i, name := range t.path {
		j := st.Schema.field(name)
		if j < 0 {
			return nil, nil
		}
		if i == len(t.path)-1 {
			return st.get(j, t.withDefault), nil
		}
		x := st.get(j, true)
		if x == nil {
			return nil, nil
		}
		next, ok := x.(*Struct)
		if !ok {
			return nil, dataErrorf("Only Struct objects supported for [nested field access], found: %s", javaClass(st.Schema.Fields[j].Schema, x))
		}
		st = next
	}
	return nil, nil
}

// hoistField is HoistField$Key and $Value: the part wrapped in a struct
// of one field.
type hoistField struct {
	key   bool
	field string
}

func newHoistField(o *options, key bool) transformation {
	f, _ := o.str("field", true, "")
	if o.failed {
		return nil
	}
	return &hoistField{key: key, field: f}
}

func (t *hoistField) makesStructKey() bool { return t.key }

func (t *hoistField) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if s == nil {
		// Kafka Connect makes a map without a schema of it, which
		// pgoutbox's converters do not write.
		return false, dataErrorf("HoistField on a record part without a schema (a tombstone's) is not implemented")
	}
	ns := &Schema{Type: StructT, Fields: []Field{{Name: t.field, Schema: s}}}
	setOperand(r, t.key, ns, &Struct{Schema: ns, Values: []any{v}})
	return true, nil
}

// valueToKey is ValueToKey: the key replaced by a struct of the value's
// fields.
type valueToKey struct {
	fields      []string
	withDefault bool
}

func newValueToKey(o *options) transformation {
	t := &valueToKey{fields: o.list("fields", true, true, false), withDefault: o.boolean("replace.null.with.default", true)}
	if o.failed {
		return nil
	}
	return t
}

func (t *valueToKey) makesStructKey() bool { return true }

func (t *valueToKey) apply(r *Record) (bool, error) {
	if r.ValueSchema == nil {
		return false, dataErrorf("Only Map objects supported in absence of schema for [copying fields from value to key], found: %s", javaClass(nil, r.Value))
	}
	st, ok := r.Value.(*Struct)
	if !ok {
		return false, dataErrorf("Only Struct objects supported for [copying fields from value to key], found: %s", javaClass(r.ValueSchema, r.Value))
	}
	ks := &Schema{Type: StructT, Fields: make([]Field, len(t.fields))}
	kv := &Struct{Schema: ks, Values: make([]any, len(t.fields))}
	for i, name := range t.fields {
		j := st.Schema.field(name)
		if j < 0 {
			return false, dataErrorf("Field does not exist: %s", name)
		}
		ks.Fields[i] = Field{Name: name, Schema: st.Schema.Fields[j].Schema}
		kv.Values[i] = st.get(j, t.withDefault)
	}
	// The value's schema becomes its struct's own (Struct.schema()), which
	// may differ from the record's (an optional copy of it).
	r.KeySchema, r.Key, r.ValueSchema = ks, kv, st.Schema
	return true, nil
}

// maskField is MaskField$Key and $Value: the named fields' values
// replaced by their type's empty value (0, false, "", an empty array or
// map), or by replacement converted to the field's type; a null stays
// null.
type maskField struct {
	key         bool
	fields      map[string]bool
	replacement *string
	withDefault bool
}

func newMaskField(o *options, key bool) transformation {
	t := &maskField{key: key, fields: map[string]bool{}, withDefault: o.boolean("replace.null.with.default", true)}
	for _, f := range o.list("fields", true, true, false) {
		t.fields[f] = true
	}
	if v, ok := o.raw("replacement"); ok {
		if javaTrim(v) == "" {
			o.refuse("replacement", "empty (Kafka Connect requires a non-empty string)")
		}
		t.replacement = &v
	}
	if o.failed {
		return nil
	}
	return t
}

func (t *maskField) onKey() bool { return t.key }

func (t *maskField) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	st, err := requireStruct(s, v, "mask fields")
	if err != nil {
		return false, err
	}
	nv := &Struct{Schema: st.Schema, Values: make([]any, len(st.Values))}
	for i, f := range st.Schema.Fields {
		x := st.get(i, t.withDefault)
		if t.fields[f.Name] && x != nil {
			if x, err = t.mask(f.Schema, x); err != nil {
				return false, err
			}
		}
		nv.Values[i] = x
	}
	setOperand(r, t.key, s, nv)
	return true, nil
}

// mask is MaskField's masked value of x, by the Java class Connect holds
// it in.
func (t *maskField) mask(s *Schema, x any) (any, error) {
	logical := s.logical()
	if t.replacement == nil {
		switch {
		case logical == decimalName:
			return maskDecimal(s, "0") // BigDecimal.ZERO
		case logical != "":
			return int64(0), nil // new Date(0)
		}
		switch x.(type) {
		case bool:
			return false, nil
		case int64:
			return int64(0), nil
		case float64:
			return float64(0), nil
		case string:
			return "", nil
		case []any:
			return []any{}, nil
		case []MapEntry:
			return []MapEntry{}, nil
		}
		return nil, dataErrorf("Cannot mask value of type: %s", javaClass(s, x))
	}
	rep := *t.replacement
	switch {
	case logical == decimalName:
		return maskDecimal(s, rep)
	case logical != "":
		return nil, dataErrorf("Cannot mask value of type %s with custom replacement.", javaClass(s, x))
	}
	switch s.Type {
	case String:
		return rep, nil
	case Int8, Int16, Int32, Int64:
		bits := map[Type]int{Int8: 8, Int16: 16, Int32: 32, Int64: 64}[s.Type]
		n, err := strconv.ParseInt(javaTrim(rep), 10, bits)
		if err != nil {
			return nil, dataErrorf("Unable to convert %s (class java.lang.String) to number", rep)
		}
		return n, nil
	case Float32, Float64:
		f, err := strconv.ParseFloat(javaTrim(rep), 64)
		if err != nil {
			return nil, dataErrorf("Unable to convert %s (class java.lang.String) to number", rep)
		}
		return f, nil
	}
	return nil, dataErrorf("Cannot mask value of type %s with custom replacement.", javaClass(s, x))
}

// maskDecimal is new BigDecimal(rep) in a Decimal field: Connect takes it
// only at the field's scale (BigDecimal.ZERO, the mask without a
// replacement, only at scale 0).
func maskDecimal(s *Schema, rep string) (any, error) {
	scale := 0
	if v, ok := s.param("scale"); ok {
		scale, _ = strconv.Atoi(v)
	}
	digits, frac, _ := strings.Cut(rep, ".")
	unscaled, ok := new(big.Int).SetString(digits+frac, 10)
	if !ok || strings.ContainsAny(rep, "eE") {
		return nil, dataErrorf("Unable to convert %s (class java.lang.String) to number", rep)
	}
	if len(frac) != scale {
		return nil, dataErrorf("Decimal value has mismatching scale for given Decimal schema. Schema has scale %d, value has scale %d.", scale, len(frac))
	}
	return schema.DecimalBytes(unscaled), nil
}

// flatten is Flatten$Key and $Value: nested structs' fields brought up
// into one struct, their names joined by delimiter; a field is optional
// when it or a struct around it is, and takes a struct's default where it
// has none of its own.
type flatten struct {
	key       bool
	delimiter string
	schemas   sync.Map // *Schema -> *Schema, flattened
}

func newFlatten(o *options, key bool) transformation {
	d, _ := o.str("delimiter", false, ".")
	return &flatten{key: key, delimiter: d}
}

func (t *flatten) onKey() bool { return t.key }

func (t *flatten) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if v == nil {
		return true, nil
	}
	st, err := requireStruct(s, v, "flattening")
	if err != nil {
		return false, err
	}
	ns, err := t.schema(s)
	if err != nil {
		return false, err
	}
	nv := &Struct{Schema: ns, Values: make([]any, 0, len(ns.Fields))}
	nv.Values = flatValues(s, st, nv.Values)
	setOperand(r, t.key, ns, nv)
	return true, nil
}

// schema is s flattened, built once per schema.
func (t *flatten) schema(s *Schema) (*Schema, error) {
	if c, ok := t.schemas.Load(s); ok {
		return c.(*Schema), nil
	}
	ns := s.withBasics()
	var parentDefault *Struct
	if s.HasDefault {
		parentDefault, _ = s.Default.(*Struct)
	}
	if err := t.flatSchema(s, "", ns, s.Optional, parentDefault); err != nil {
		return nil, err
	}
	c, _ := t.schemas.LoadOrStore(s, ns)
	return c.(*Schema), nil
}

// flatSchema appends s's fields to ns, under prefix (buildUpdatedSchema).
func (t *flatten) flatSchema(s *Schema, prefix string, ns *Schema, optional bool, parentDefault *Struct) error {
	for i, f := range s.Fields {
		name := f.Name
		if prefix != "" {
			name = prefix + t.delimiter + f.Name
		}
		var def any
		switch {
		case f.Schema.HasDefault:
			def = f.Schema.Default
		case parentDefault != nil:
			def = parentDefault.get(i, true)
		}
		fieldOptional := optional || f.Schema.Optional
		switch f.Schema.Type {
		case StructT:
			d, _ := def.(*Struct)
			if err := t.flatSchema(f.Schema, name, ns, fieldOptional, d); err != nil {
				return err
			}
		case Map:
			return dataErrorf("Flatten transformation does not support MAP for record with schemas (for field %s).", name)
		default:
			// SchemaUtil.copySchemaBasics: type, name, version, doc,
			// parameters (an array's items), then the optionality and
			// default.
			fs := &Schema{Type: f.Schema.Type, Name: f.Schema.Name, Version: f.Schema.Version, Doc: f.Schema.Doc,
				Params: f.Schema.Params, Items: f.Schema.Items, Optional: fieldOptional}
			if def != nil {
				fs.Default, fs.HasDefault = def, true
			}
			ns.Fields = append(ns.Fields, Field{Name: name, Schema: fs})
		}
	}
	return nil
}

// flatValues appends st's values, flattened as s is, to out; a null
// struct's fields are nulls (buildWithSchema).
func flatValues(s *Schema, st *Struct, out []any) []any {
	for i, f := range s.Fields {
		var x any
		if st != nil {
			x = st.get(i, true)
		}
		if f.Schema.Type == StructT {
			nested, _ := x.(*Struct)
			out = flatValues(f.Schema, nested, out)
			continue
		}
		out = append(out, x)
	}
	return out
}
