package schema

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file is Debezium's table.expand.json.payload: the payload string is
// parsed (Jackson), a Connect schema is inferred from it
// (io.debezium.transforms.outbox.JsonSchemaData with its defaults:
// null fields and empty arrays are dropped from the schema), the document is
// converted to a Struct against that schema, and JsonConverter writes it.
// Whenever Debezium's expansion throws, it keeps the payload as a string;
// expandPayload returns an error in exactly those cases so the caller does
// the same.

// jsonSchemaData is Debezium's JsonSchemaData with its
// table.json.payload.null.behavior: a null field left out of the schema
// (ignore, the default), or given Connect's optional bytes schema
// (optional_bytes), which an array of objects' merge replaces with a
// value's type where another element has one.
type jsonSchemaData struct{ nullBytes bool }

// jnode is a parsed JSON value with object member order kept.
type jnode struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, 'z' null
	str   string
	num   jnum
	b     bool
	keys  []string
	vals  []*jnode
	elems []*jnode
}

// jnum is a number as Jackson's default tree model holds it.
type jnum struct {
	kind byte // 'i' IntNode, 'l' LongNode, 'd' DoubleNode, 'B' BigIntegerNode
	i    int64
	f    float64
}

func (n *jnode) get(key string) (*jnode, bool) {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i], true
		}
	}
	return nil, false
}

// parseJNode parses a JSON document as Jackson's tree model holds it.
// The document is validated first (json.Valid, which allocates nothing);
// the parse then reads the bytes directly, a string's bytes as they are
// unless it holds an escape or invalid UTF-8, which encoding/json decodes
// (U+FFFD for what is not UTF-8, as Jackson's replacement does).
func parseJNode(b []byte) (*jnode, error) {
	if !json.Valid(b) {
		return nil, errors.New("payload is not valid JSON")
	}
	p := jparse{b: b}
	return p.value(), nil
}

// jparse reads a valid JSON document.
type jparse struct {
	b []byte
	i int
}

func (p *jparse) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jparse) value() *jnode {
	p.ws()
	switch p.b[p.i] {
	case '{':
		p.i++
		n := &jnode{kind: 'o'}
		for {
			p.ws()
			if p.b[p.i] == '}' {
				p.i++
				return n
			}
			if p.b[p.i] == ',' {
				p.i++
				p.ws()
			}
			k := p.str()
			p.ws()
			p.i++ // ':'
			v := p.value()
			if _, dup := n.get(k); dup { // Jackson: the last value wins, in the first one's place
				for i := range n.keys {
					if n.keys[i] == k {
						n.vals[i] = v
					}
				}
				continue
			}
			n.keys = append(n.keys, k)
			n.vals = append(n.vals, v)
		}
	case '[':
		p.i++
		n := &jnode{kind: 'a'}
		for {
			p.ws()
			switch p.b[p.i] {
			case ']':
				p.i++
				return n
			case ',':
				p.i++
			}
			n.elems = append(n.elems, p.value())
		}
	case '"':
		return &jnode{kind: 's', str: p.str()}
	case 't':
		p.i += 4
		return &jnode{kind: 'b', b: true}
	case 'f':
		p.i += 5
		return &jnode{kind: 'b'}
	case 'n':
		p.i += 4
		return &jnode{kind: 'z'}
	}
	start := p.i
	for p.i < len(p.b) && strings.IndexByte("+-0123456789.eE", p.b[p.i]) >= 0 {
		p.i++
	}
	return &jnode{kind: 'n', num: parseJNum(string(p.b[start:p.i]))}
}

// str reads the string at p.i.
func (p *jparse) str() string {
	start, escaped := p.i, false
	k := start + 1
	for p.b[k] != '"' {
		if p.b[k] == '\\' {
			escaped = true
			k++
		}
		k++
	}
	p.i = k + 1
	raw := p.b[start+1 : k]
	if !escaped && utf8.Valid(raw) {
		return string(raw)
	}
	var s string
	_ = json.Unmarshal(p.b[start:p.i], &s) // valid: json.Valid passed
	return s
}

func parseJNum(s string) jnum {
	if !strings.ContainsAny(s, ".eE") {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			if v >= -1<<31 && v < 1<<31 {
				return jnum{kind: 'i', i: v}
			}
			return jnum{kind: 'l', i: v}
		}
		return jnum{kind: 'B'}
	}
	f, _ := strconv.ParseFloat(s, 64)
	return jnum{kind: 'd', f: f}
}

// cschema is an inferred Connect schema; every one is optional.
type cschema struct {
	typ    string // string, boolean, int32, int64, double, bytes (a null), array, struct
	name   string // struct name
	fields []cfield
	items  *cschema
	// required: the merge of an array's distinct object schemas, which
	// SchemaUtil.copySchemaBasics leaves not optional; every other
	// inferred schema is optional.
	required bool
}

type cfield struct {
	name string
	s    *cschema
}

func (s *cschema) field(name string) *cschema {
	for _, f := range s.fields {
		if f.name == name {
			return f.s
		}
	}
	return nil
}

func (s *cschema) equal(o *cschema) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.typ != o.typ || s.name != o.name || s.required != o.required || len(s.fields) != len(o.fields) {
		return false
	}
	for i := range s.fields {
		if s.fields[i].name != o.fields[i].name || !s.fields[i].s.equal(o.fields[i].s) {
			return false
		}
	}
	if s.typ == "array" {
		return s.items.equal(o.items)
	}
	return true
}

var errExpand = errors.New("JSON expansion failed")

// inferSchema is JsonSchemaData.toConnectSchema; nil means no field.
func (j jsonSchemaData) inferSchema(key string, n *jnode) (*cschema, error) {
	switch n.kind {
	case 's':
		return &cschema{typ: "string"}, nil
	case 'b':
		return &cschema{typ: "boolean"}, nil
	case 'n':
		switch n.num.kind {
		case 'i':
			return &cschema{typ: "int32"}, nil
		case 'l':
			return &cschema{typ: "int64"}, nil
		}
		return &cschema{typ: "double"}, nil
	case 'a':
		if len(n.elems) == 0 {
			return nil, nil
		}
		items, err := j.arrayItemSchema(key, n)
		if err != nil {
			return nil, err
		}
		return &cschema{typ: "array", items: items}, nil
	case 'o':
		s := &cschema{typ: "struct", name: key}
		for i, k := range n.keys {
			fk := k
			if key != "" {
				fk = key + "." + k
			}
			fs, err := j.inferSchema(fk, n.vals[i])
			if err != nil {
				return nil, err
			}
			if fs != nil && s.field(k) == nil {
				s.fields = append(s.fields, cfield{k, fs})
			}
		}
		return s, nil
	case 'z':
		if j.nullBytes {
			return &cschema{typ: "bytes"}, nil
		}
	}
	return nil, nil
}

// arrayItemSchema is toConnectSchemaWithCycles with getFirstArrayElement.
// Debezium merges the element schemas of an array of objects in HashSet
// order; when they differ that order is not deterministic, and pgoutbox
// merges in document order.
func (j jsonSchemaData) arrayItemSchema(key string, n *jnode) (*cschema, error) {
	var ref *jnode
	var refSchema *cschema
	for _, e := range n.elems {
		if e.kind == 'z' {
			continue
		}
		if ref == nil {
			ref = e
		}
		if e.kind != ref.kind {
			return nil, errExpand // not a homogenous array
		}
		if ref.kind == 'n' {
			if refSchema == nil {
				refSchema, _ = j.inferSchema("", ref)
			}
			es, _ := j.inferSchema("", e)
			if es.typ != refSchema.typ {
				return nil, errExpand
			}
		}
	}
	if ref == nil {
		if j.nullBytes {
			return &cschema{typ: "bytes"}, nil // the schema of null
		}
		return nil, errExpand // only nulls: unrecognized member schema
	}
	if ref.kind != 'o' {
		s, err := j.inferSchema("", ref)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, errExpand
		}
		return s, nil
	}
	var merged, first *cschema
	for _, e := range n.elems {
		if e.kind != 'o' {
			continue
		}
		s, err := j.inferSchema(key, e)
		if err != nil {
			return nil, err
		}
		if merged == nil {
			merged, first = s, s
			continue
		}
		if s.equal(first) && !merged.required {
			continue // Debezium's HashSet holds equal schemas once
		}
		if !merged.required {
			// A second schema: mergeSchema builds a new struct from the
			// first's basics, not optional.
			merged = &cschema{typ: "struct", name: first.name, fields: slices.Clone(first.fields), required: true}
		}
		for _, f := range s.fields {
			i := slices.IndexFunc(merged.fields, func(m cfield) bool { return m.name == f.name })
			switch {
			case i < 0:
				merged.fields = append(merged.fields, f)
			case merged.fields[i].s.typ == "bytes" && f.s.typ != "bytes":
				merged.fields[i].s = f.s // mergeSchema: a null's bytes gives way to a value's type
			}
		}
	}
	return merged, nil
}

// appendConnectData converts n against s (toConnectData, with Struct.put's
// validation) and writes it as JsonConverter does.
func appendConnectData(dst []byte, n *jnode, s *cschema) ([]byte, error) {
	if n == nil || n.kind == 'z' {
		if s.required {
			return nil, errExpand // Struct.put: a null where the schema is not optional
		}
		return append(dst, "null"...), nil
	}
	switch s.typ {
	case "struct":
		if n.kind != 'o' {
			return nil, errExpand
		}
		dst = append(dst, '{')
		for i, f := range s.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJavaString(dst, f.name)
			dst = append(dst, ':')
			v, _ := n.get(f.name)
			var err error
			if dst, err = appendConnectData(dst, v, f.s); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case "array":
		if n.kind != 'a' {
			return nil, errExpand
		}
		dst = append(dst, '[')
		for i, e := range n.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendConnectData(dst, e, s.items); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case "string":
		if n.kind != 's' {
			return nil, errExpand
		}
		return appendJavaString(dst, n.str), nil
	case "boolean":
		if n.kind != 'b' {
			return nil, errExpand
		}
		return strconv.AppendBool(dst, n.b), nil
	case "int32", "int64":
		if n.kind != 'n' || (s.typ == "int32") != (n.num.kind == 'i') || (s.typ == "int64") != (n.num.kind == 'l') {
			return nil, errExpand
		}
		return strconv.AppendInt(dst, n.num.i, 10), nil
	case "double":
		if n.kind != 'n' || n.num.kind != 'd' {
			return nil, errExpand // a BigInteger's BigDecimal fails FLOAT64 validation
		}
		return appendJavaDouble(dst, n.num.f, 64), nil
	}
	return nil, errExpand
}

// appendCSchema writes s as JsonConverter.asJsonSchema, with "field" when
// field is not empty.
func appendCSchema(dst []byte, s *cschema, field string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, s.typ...)
	dst = append(dst, '"')
	switch s.typ {
	case "struct":
		dst = append(dst, `,"fields":[`...)
		for i, f := range s.fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCSchema(dst, f.s, f.name)
		}
		dst = append(dst, ']')
	case "array":
		dst = append(dst, `,"items":`...)
		dst = appendCSchema(dst, s.items, "")
	}
	dst = append(dst, `,"optional":`...)
	dst = strconv.AppendBool(dst, !s.required)
	if s.typ == "struct" && s.name != "" {
		dst = append(dst, `,"name":`...)
		dst = appendJavaString(dst, s.name)
	}
	if field != "" {
		dst = append(dst, `,"field":`...)
		dst = appendJavaString(dst, field)
	}
	return append(dst, '}')
}

// expandPayload expands payload (JSON text) as Debezium does, returning
// the schema and the JsonConverter value; an error means Debezium keeps the
// payload as a string. key is the payload field's name (the struct's
// schema name).
func (j jsonSchemaData) expandPayload(key string, payload []byte) (*cschema, []byte, error) {
	s, v, _, err := j.expandPayloadNode(key, payload)
	return s, v, err
}

// expandPayloadNode is expandPayload that also returns the parsed
// document, for converters that write it their own way (avro).
func (j jsonSchemaData) expandPayloadNode(key string, payload []byte) (*cschema, []byte, *jnode, error) {
	if len(payload) == 0 || (payload[0] != '{' && payload[0] != '[') {
		return nil, nil, nil, errExpand
	}
	n, err := parseJNode(payload)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := j.inferSchema(key, n)
	if err != nil {
		return nil, nil, nil, err
	}
	if s == nil || s.typ != "struct" {
		return nil, nil, nil, errExpand // toConnectData builds a Struct: only objects expand
	}
	v, err := appendConnectData(nil, n, s)
	if err != nil {
		return nil, nil, nil, err
	}
	return s, v, n, nil
}
