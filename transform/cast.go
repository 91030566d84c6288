package transform

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
)

// cast is Cast$Key and $Value: a struct's fields, or the whole part, cast
// to int8, int16, int32, int64, float32, float64, boolean or string, as
// Java casts and parses them.
type cast struct {
	key         bool
	whole       Type // the whole part's type; "" when fields are cast
	fields      map[string]Type
	withDefault bool
	schemas     sync.Map // *Schema -> *Schema, cast
}

// castTypes are the types Cast casts to, by their names in a spec.
var castTypes = map[string]Type{"int8": Int8, "int16": Int16, "int32": Int32, "int64": Int64,
	"float32": Float32, "float64": Float64, "boolean": Boolean, "string": String}

func newCast(o *options, key bool) transformation {
	t := &cast{key: key, fields: map[string]Type{}, withDefault: o.boolean("replace.null.with.default", true)}
	spec := o.list("spec", true, false, false)
	if len(spec) == 0 && !o.failed {
		o.refuse("spec", "empty: Kafka Connect requires at least one field to cast")
	}
	typeOf := func(name string) Type {
		typ, ok := castTypes[strings.ToLower(javaTrim(name))]
		if !ok {
			o.refuse("spec", fmt.Sprintf("invalid type %q: Cast casts to int8, int16, int32, int64, float32, float64, boolean and string", javaTrim(name)))
		}
		return typ
	}
	for _, m := range spec {
		// Java's split(":"), which drops trailing empty strings.
		parts := strings.Split(m, ":")
		for len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		switch len(parts) {
		case 1:
			t.whole = typeOf(parts[0])
		case 2:
			t.fields[javaTrim(parts[0])] = typeOf(parts[1])
		default:
			o.refuse("spec", fmt.Sprintf("invalid mapping %q: want field:type or a type", m))
		}
	}
	if t.whole != "" && len(spec) > 1 {
		o.refuse("spec", "a type for the whole value with other casts: Kafka Connect takes a single cast then")
	}
	if o.failed {
		return nil
	}
	return t
}

func (t *cast) onKey() bool { return t.key && t.whole == "" }

func (t *cast) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if v == nil {
		return true, nil
	}
	if s == nil {
		return false, dataErrorf("Cast of a value without a schema is not implemented")
	}
	ns, err := t.schema(s)
	if err != nil {
		return false, err
	}
	if t.whole != "" {
		nv, err := castValue(s, v, t.whole)
		if err != nil {
			return false, err
		}
		setOperand(r, t.key, ns, nv)
		return true, nil
	}
	st, err := requireStruct(s, v, "cast types")
	if err != nil {
		return false, err
	}
	nv := &Struct{Schema: ns, Values: make([]any, len(st.Values))}
	for i, f := range st.Schema.Fields {
		x := st.get(i, t.withDefault)
		if typ, ok := t.fields[f.Name]; ok {
			if x, err = castValue(f.Schema, x, typ); err != nil {
				return false, err
			}
		}
		nv.Values[i] = x
	}
	setOperand(r, t.key, ns, nv)
	return true, nil
}

// schema is s cast (getOrBuildSchema), built once per schema.
func (t *cast) schema(s *Schema) (*Schema, error) {
	if c, ok := t.schemas.Load(s); ok {
		return c.(*Schema), nil
	}
	var ns *Schema
	if t.whole != "" {
		// SchemaUtil.copySchemaBasics onto the new type: its name,
		// version, doc and parameters stay.
		ns = &Schema{Type: t.whole, Name: s.Name, Version: s.Version, Doc: s.Doc, Params: s.Params}
	} else {
		if s.Type != StructT {
			return nil, dataErrorf("Cannot list fields on non-struct type")
		}
		ns = s.withBasics()
		for _, f := range s.Fields {
			typ, ok := t.fields[f.Name]
			if !ok {
				ns.Fields = append(ns.Fields, f)
				continue
			}
			fs := &Schema{Type: typ, Optional: f.Schema.Optional}
			if f.Schema.HasDefault {
				d, err := castValue(f.Schema, f.Schema.Default, typ)
				if err != nil {
					return nil, err
				}
				fs.Default, fs.HasDefault = d, true
			}
			ns.Fields = append(ns.Fields, Field{Name: f.Name, Schema: fs})
		}
	}
	ns.Optional = s.Optional
	if s.HasDefault {
		d, err := castValue(s, s.Default, ns.Type)
		if err != nil {
			return nil, err
		}
		ns.Default, ns.HasDefault = d, true
	}
	c, _ := t.schemas.LoadOrStore(s, ns)
	return c.(*Schema), nil
}

// castValue is castValueToType: x, of schema s, as typ.
func castValue(s *Schema, x any, typ Type) (any, error) {
	if x == nil {
		return nil, nil
	}
	switch s.Type {
	case Int8, Int16, Int32, Int64, Float32, Float64, Boolean, String, Bytes:
	default:
		return nil, dataErrorf("Cast transformation does not support casting from %s; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]",
			strings.ToUpper(javaTypeName(s.Type)))
	}
	if typ == String {
		return castToString(s, x)
	}
	if b, ok := x.([]byte); ok && s.logical() == decimalName {
		return castDecimal(s, b, typ), nil
	}
	switch v := x.(type) {
	case int64:
		return castInteger(v, typ), nil
	case float64:
		return castFloat(v, typ), nil
	case bool:
		n := int64(0)
		if v {
			n = 1
		}
		if typ == Boolean {
			return v, nil
		}
		return castInteger(n, typ), nil
	case string:
		return parseCast(v, typ)
	}
	return nil, dataErrorf("Unexpected type in Cast transformation: %s", javaClass(s, x))
}

// javaTypeName is Schema.Type's name of t.
func javaTypeName(t Type) string {
	switch t {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	}
	return string(t)
}

// castInteger casts a long as Java's Number methods do: the low bits.
func castInteger(n int64, typ Type) any {
	switch typ {
	case Int8:
		return int64(int8(n))
	case Int16:
		return int64(int16(n))
	case Int32:
		return int64(int32(n))
	case Float32:
		return float64(float32(n))
	case Float64:
		return float64(n)
	case Boolean:
		return n != 0
	}
	return n
}

// castFloat casts a double as Java does: to an int or long by rounding
// toward zero and saturating (NaN is 0), narrower from the int.
func castFloat(f float64, typ Type) any {
	switch typ {
	case Int8, Int16, Int32:
		return castInteger(javaDoubleToInt(f), typ)
	case Int64:
		return javaDoubleToLong(f)
	case Float32:
		return float64(float32(f))
	case Boolean:
		return javaDoubleToLong(f) != 0
	}
	return f
}

// javaDoubleToInt and javaDoubleToLong are Java's (int) and (long) of a
// double: toward zero, saturated at the type's bounds, NaN as 0.
func javaDoubleToInt(f float64) int64  { return saturate(f, math.MinInt32, math.MaxInt32) }
func javaDoubleToLong(f float64) int64 { return saturate(f, math.MinInt64, math.MaxInt64) }

func saturate(f float64, lo, hi int64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= float64(hi):
		return hi
	case f <= float64(lo):
		return lo
	}
	return int64(f)
}

// castDecimal casts a BigDecimal: its integer part's low bits for the
// integers, the nearest float or double.
func castDecimal(s *Schema, unscaled []byte, typ Type) any {
	n := new(big.Int).SetBytes(unscaled)
	if len(unscaled) > 0 && unscaled[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(unscaled))))
	}
	scale := 0
	if p, ok := s.param("scale"); ok {
		scale, _ = strconv.Atoi(p)
	}
	r := new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	if scale < 0 {
		r.SetInt(new(big.Int).Mul(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-scale)), nil)))
	}
	switch typ {
	case Float32:
		f, _ := r.Float32()
		return float64(f)
	case Float64:
		f, _ := r.Float64()
		return f
	}
	// toBigInteger (toward zero), then its low 64 bits.
	i := new(big.Int).Quo(r.Num(), r.Denom())
	low := new(big.Int).And(i, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	return castInteger(int64(low), typ)
}

// parseCast parses a string as Java's Byte.parseByte ... Double.parseDouble
// and Boolean.parseBoolean do.
func parseCast(v string, typ Type) (any, error) {
	switch typ {
	case Boolean:
		return strings.EqualFold(v, "true"), nil
	case Float32, Float64:
		t := javaTrim(v)
		t = strings.TrimRight(t, "fFdD")
		bits := 64
		if typ == Float32 {
			bits = 32
		}
		f, err := strconv.ParseFloat(t, bits)
		if err != nil && !strings.Contains(err.Error(), "range") {
			return nil, dataErrorf("Value (%s) was out of range for requested data type", v)
		}
		return f, nil
	}
	bits := map[Type]int{Int8: 8, Int16: 16, Int32: 32, Int64: 64}[typ]
	n, err := strconv.ParseInt(strings.TrimPrefix(v, "+"), 10, bits)
	if err != nil || strings.HasPrefix(v, "+-") || strings.HasPrefix(v, "+ ") {
		return nil, dataErrorf("Value (%s) was out of range for requested data type", v)
	}
	return n, nil
}

// castToString writes x as Java's toString does; Connect's dates in ISO
// 8601, bytes in base64.
func castToString(s *Schema, x any) (any, error) {
	switch v := x.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		switch s.logical() {
		case dateName, timeName, timestampName:
			return string(appendISODate(nil, s.logical(), v)), nil
		}
		return strconv.FormatInt(v, 10), nil
	case float64:
		return string(appendJavaFloat(nil, s, v)), nil
	case []byte:
		if s.logical() == decimalName {
			return string(appendDecimal(nil, s, v)), nil
		}
		return base64.StdEncoding.EncodeToString(v), nil
	}
	return nil, dataErrorf("Unexpected type in Cast transformation: %s", javaClass(s, x))
}
