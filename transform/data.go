package transform

// Kafka Connect's data, as much of it as the router's records and the
// transforms use: a schema (org.apache.kafka.connect.data.ConnectSchema)
// and values of these Go types:
//
//	nil          null
//	bool         BOOLEAN
//	int64        INT8, INT16, INT32, INT64 (and the logical Date, Time,
//	             Timestamp: days, milliseconds of the day, milliseconds)
//	float64      FLOAT32, FLOAT64
//	string       STRING
//	[]byte       BYTES (and the logical Decimal: the unscaled value's
//	             two's complement, as BigInteger.toByteArray gives it)
//	*Struct      STRUCT
//	[]any        ARRAY
//	[]MapEntry   MAP, in order
//
// Values are never changed once built: a transform that changes one
// builds a new one, so a record's parts may be shared.

// Type is a schema's type as JsonConverter names it.
type Type string

// The types.
const (
	Int8    Type = "int8"
	Int16   Type = "int16"
	Int32   Type = "int32"
	Int64   Type = "int64"
	Float32 Type = "float"
	Float64 Type = "double"
	Boolean Type = "boolean"
	String  Type = "string"
	Bytes   Type = "bytes"
	Array   Type = "array"
	Map     Type = "map"
	StructT Type = "struct"
)

// Logical type names Kafka Connect defines.
const (
	decimalName   = "org.apache.kafka.connect.data.Decimal"
	dateName      = "org.apache.kafka.connect.data.Date"
	timeName      = "org.apache.kafka.connect.data.Time"
	timestampName = "org.apache.kafka.connect.data.Timestamp"
)

// Schema is a Kafka Connect schema.
type Schema struct {
	Type     Type
	Optional bool
	Name     string
	Version  *int32
	Doc      *string
	// Params are the schema's parameters in order; nil for none (an
	// empty, non-nil slice is an empty map, which JsonConverter writes).
	Params []Param
	// Default is the default value; HasDefault tells a null default from
	// none (Connect has no null default: HasDefault means non-nil).
	Default    any
	HasDefault bool
	// Fields of a struct; Items of an array; Keys and Values of a map.
	Fields       []Field
	Items        *Schema
	Keys, Values *Schema
}

// Param is one schema parameter.
type Param struct{ Key, Value string }

// Field is a struct's field.
type Field struct {
	Name   string
	Schema *Schema
}

// Struct is a STRUCT value: its schema, and a value per field in the
// schema's order.
type Struct struct {
	Schema *Schema
	Values []any
}

// MapEntry is one entry of a MAP value.
type MapEntry struct{ Key, Value any }

// field returns the index of the field named name, -1 for none.
func (s *Schema) field(name string) int {
	for i, f := range s.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// param returns the parameter named key.
func (s *Schema) param(key string) (string, bool) {
	for _, p := range s.Params {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// logical returns the schema's logical type name when it is one of
// Kafka Connect's own, "" otherwise.
func (s *Schema) logical() string {
	if s == nil {
		return ""
	}
	switch s.Name {
	case decimalName, dateName, timeName, timestampName:
		return s.Name
	}
	return ""
}

// get returns field i's value as Struct.get returns it: its default in
// place of a null when withDefault is set (replace.null.with.default),
// as Struct.getWithoutDefault otherwise.
func (st *Struct) get(i int, withDefault bool) any {
	v := st.Values[i]
	if v == nil && withDefault {
		if f := st.Schema.Fields[i].Schema; f.HasDefault {
			return f.Default
		}
	}
	return v
}

// withBasics is a new STRUCT schema with s's name, version, doc and
// parameters (SchemaUtil.copySchemaBasics into SchemaBuilder.struct()),
// not optional and without a default, as the transforms that rebuild a
// struct make it.
func (s *Schema) withBasics() *Schema {
	return &Schema{Type: StructT, Name: s.Name, Version: s.Version, Doc: s.Doc, Params: s.Params}
}
