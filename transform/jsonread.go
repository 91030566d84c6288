package transform

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
)

// This file reads what JsonConverter with schemas.enable=true writes,
// {"schema":…,"payload":…}, back into Kafka Connect data, as
// JsonConverter.toConnectData does: the router's record is rendered so
// (schema.ConvJSONSchemas) and read here, which loses nothing of it.

// jnode is a parsed JSON value; objects keep their members' order.
type jnode struct {
	kind byte   // 'o' object, 'a' array, 's' string, 'n' number, 't' true, 'f' false, 'z' null
	text string // a string's value, a number's text
	keys []string
	vals []*jnode // an object's values, an array's elements
}

func (n *jnode) member(key string) *jnode {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// decodeEnvelope reads JsonConverter's {"schema":…,"payload":…}; nil data
// is a null schema and value (a tombstone). Schemas are looked up in
// cache by their text first: the router writes the same few again and
// again.
func decodeEnvelope(data []byte, cache *schemaCache) (*Schema, any, error) {
	if data == nil {
		return nil, nil, nil
	}
	const head, mid = `{"schema":`, `,"payload":`
	if bytes.HasPrefix(data, []byte(head)) && data[len(data)-1] == '}' {
		if end := skipValue(data, len(head)); end > 0 && bytes.HasPrefix(data[end:], []byte(mid)) {
			raw := data[len(head):end]
			sch, ok := cache.get(raw)
			if !ok {
				n, err := parseJSON(raw)
				if err == nil {
					sch, err = readSchema(n)
				}
				if err != nil {
					return nil, nil, fmt.Errorf("transform: reading the record's schema: %w", err)
				}
				cache.put(raw, sch)
			}
			n, err := parseJSON(data[end+len(mid) : len(data)-1])
			if err != nil {
				return nil, nil, fmt.Errorf("transform: reading the record: %w", err)
			}
			v, err := readValue(sch, n)
			if err != nil {
				return nil, nil, fmt.Errorf("transform: reading the record's value: %w", err)
			}
			return sch, v, nil
		}
	}
	n, err := parseJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("transform: reading the record: %w", err)
	}
	if n.kind != 'o' || len(n.keys) != 2 || n.member("schema") == nil || n.member("payload") == nil {
		return nil, nil, errors.New("transform: reading the record: not a JsonConverter envelope")
	}
	sch, err := readSchema(n.member("schema"))
	if err != nil {
		return nil, nil, fmt.Errorf("transform: reading the record's schema: %w", err)
	}
	v, err := readValue(sch, n.member("payload"))
	if err != nil {
		return nil, nil, fmt.Errorf("transform: reading the record's value: %w", err)
	}
	return sch, v, nil
}

// parseJSON reads one JSON value, and nothing after it.
func parseJSON(b []byte) (*jnode, error) {
	p := jparser{b: b}
	n, err := p.value()
	if err == nil {
		p.space()
		if p.i != len(p.b) {
			err = errors.New("trailing data")
		}
	}
	return n, err
}

// skipValue returns the end of the JSON value at b[i:] (where the writer
// put no white space), 0 when it has none.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return 0
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth < 0 {
				return 0
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		if depth == 0 && (b[i] == '"' || b[i] == '}' || b[i] == ']') {
			return i + 1
		}
	}
	return 0
}

// maxSchemas bounds the schema cache: past it, schemas are read every time
// (an expanded payload's schema may differ from row to row).
const maxSchemas = 256

// schemaCache holds read schemas by their JSON text, copy-on-write: a hit
// is a lock-free map read. Schemas are never changed once read, so one is
// shared by every record of its text.
type schemaCache struct {
	m  atomic.Pointer[map[string]*Schema]
	mu sync.Mutex
}

func (c *schemaCache) get(raw []byte) (*Schema, bool) {
	if c == nil {
		return nil, false
	}
	if m := c.m.Load(); m != nil {
		s, ok := (*m)[string(raw)]
		return s, ok
	}
	return nil, false
}

func (c *schemaCache) put(raw []byte, s *Schema) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[string]*Schema
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if _, ok := old[string(raw)]; ok || len(old) >= maxSchemas {
		return
	}
	m := make(map[string]*Schema, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[string(raw)] = s
	c.m.Store(&m)
}

// readSchema reads a schema as JsonConverter.asConnectSchema does.
func readSchema(n *jnode) (*Schema, error) {
	if n.kind == 'z' {
		return nil, nil
	}
	if n.kind != 'o' {
		return nil, errors.New("a schema is an object")
	}
	s := &Schema{}
	str := func(key string) (string, bool, error) {
		m := n.member(key)
		if m == nil || m.kind == 'z' {
			return "", false, nil
		}
		if m.kind != 's' {
			return "", false, fmt.Errorf("schema %q is not a string", key)
		}
		return m.text, true, nil
	}
	t, ok, err := str("type")
	if err != nil || !ok {
		return nil, errors.New("schema without a type")
	}
	s.Type = Type(t)
	if m := n.member("optional"); m != nil {
		s.Optional = m.kind == 't'
	}
	if s.Name, _, err = str("name"); err != nil {
		return nil, err
	}
	if m := n.member("version"); m != nil && m.kind == 'n' {
		v, err := strconv.ParseInt(m.text, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("schema version %s", m.text)
		}
		v32 := int32(v)
		s.Version = &v32
	}
	if doc, ok, err := str("doc"); err != nil {
		return nil, err
	} else if ok {
		s.Doc = &doc
	}
	if m := n.member("parameters"); m != nil && m.kind == 'o' {
		s.Params = make([]Param, 0, len(m.keys))
		for i, k := range m.keys {
			s.Params = append(s.Params, Param{Key: k, Value: m.vals[i].text})
		}
	}
	switch s.Type {
	case Int8, Int16, Int32, Int64, Float32, Float64, Boolean, String, Bytes:
	case StructT:
		fs := n.member("fields")
		if fs == nil || fs.kind != 'a' {
			return nil, errors.New("struct schema without fields")
		}
		for _, f := range fs.vals {
			fsch, err := readSchema(f)
			if err != nil || fsch == nil {
				return nil, fmt.Errorf("struct field: %v", err)
			}
			name := f.member("field")
			if name == nil || name.kind != 's' {
				return nil, errors.New("struct field without a name")
			}
			s.Fields = append(s.Fields, Field{Name: name.text, Schema: fsch})
		}
	case Array:
		if s.Items, err = subSchema(n, "items"); err != nil {
			return nil, err
		}
	case Map:
		if s.Keys, err = subSchema(n, "keys"); err != nil {
			return nil, err
		}
		if s.Values, err = subSchema(n, "values"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown schema type %q", s.Type)
	}
	if m := n.member("default"); m != nil && m.kind != 'z' {
		if s.Default, err = readValue(s, m); err != nil {
			return nil, fmt.Errorf("default: %w", err)
		}
		s.HasDefault = true
	}
	return s, nil
}

func subSchema(n *jnode, key string) (*Schema, error) {
	m := n.member(key)
	if m == nil {
		return nil, fmt.Errorf("schema without %s", key)
	}
	s, err := readSchema(m)
	if err == nil && s == nil {
		err = fmt.Errorf("schema without %s", key)
	}
	return s, err
}

// readValue reads a value of schema s (JsonConverter.convertToConnect).
func readValue(s *Schema, n *jnode) (any, error) {
	if n.kind == 'z' {
		return nil, nil
	}
	if s == nil {
		return nil, errors.New("a value without a schema")
	}
	bad := func() (any, error) { return nil, fmt.Errorf("a %s value cannot be %q", s.Type, n.text) }
	switch s.Type {
	case Int8, Int16, Int32, Int64:
		if n.kind != 'n' {
			return bad()
		}
		v, err := strconv.ParseInt(n.text, 10, 64)
		if err != nil {
			return bad()
		}
		return v, nil
	case Float32, Float64:
		bits := 64
		if s.Type == Float32 {
			bits = 32
		}
		switch {
		case n.kind == 's' && n.text == "NaN":
			return math.NaN(), nil
		case n.kind == 's' && n.text == "Infinity":
			return math.Inf(1), nil
		case n.kind == 's' && n.text == "-Infinity":
			return math.Inf(-1), nil
		case n.kind != 'n':
			return bad()
		}
		f, err := strconv.ParseFloat(n.text, bits)
		if err != nil {
			return bad()
		}
		return f, nil
	case Boolean:
		if n.kind != 't' && n.kind != 'f' {
			return bad()
		}
		return n.kind == 't', nil
	case String:
		if n.kind != 's' {
			return bad()
		}
		return n.text, nil
	case Bytes:
		if n.kind != 's' {
			return bad()
		}
		b, err := base64.StdEncoding.DecodeString(n.text)
		if err != nil {
			return bad()
		}
		return b, nil
	case Array:
		if n.kind != 'a' {
			return bad()
		}
		out := make([]any, len(n.vals))
		for i, e := range n.vals {
			v, err := readValue(s.Items, e)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case Map:
		return readMap(s, n)
	case StructT:
		if n.kind != 'o' {
			return bad()
		}
		st := &Struct{Schema: s, Values: make([]any, len(s.Fields))}
		for i, f := range s.Fields {
			m := n.member(f.Name)
			if m == nil {
				continue
			}
			v, err := readValue(f.Schema, m)
			if err != nil {
				return nil, err
			}
			st.Values[i] = v
		}
		return st, nil
	}
	return bad()
}

// readMap reads a map: an object when its keys are strings, an array of
// [key, value] pairs otherwise.
func readMap(s *Schema, n *jnode) (any, error) {
	var out []MapEntry
	switch {
	case s.Keys.Type == String && n.kind == 'o':
		for i, k := range n.keys {
			v, err := readValue(s.Values, n.vals[i])
			if err != nil {
				return nil, err
			}
			out = append(out, MapEntry{Key: k, Value: v})
		}
	case n.kind == 'a':
		for _, pair := range n.vals {
			if pair.kind != 'a' || len(pair.vals) != 2 {
				return nil, errors.New("a map entry is a [key, value] pair")
			}
			k, err := readValue(s.Keys, pair.vals[0])
			if err != nil {
				return nil, err
			}
			v, err := readValue(s.Values, pair.vals[1])
			if err != nil {
				return nil, err
			}
			out = append(out, MapEntry{Key: k, Value: v})
		}
	default:
		return nil, errors.New("a map is an object or an array of pairs")
	}
	if out == nil {
		out = []MapEntry{}
	}
	return out, nil
}

// jparser is a strict JSON reader that keeps objects' member order.
type jparser struct {
	b []byte
	i int
}

func (p *jparser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *jparser) value() (*jnode, error) {
	p.space()
	if p.i >= len(p.b) {
		return nil, errors.New("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		n := &jnode{kind: 'o'}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return n, nil
		}
		for {
			p.space()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return nil, errors.New("object member without a name")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, errors.New("missing ':'")
			}
			p.i++
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			n.keys, n.vals = append(n.keys, k), append(n.vals, v)
			if done, err := p.next('}'); err != nil || done {
				return n, err
			}
		}
	case c == '[':
		p.i++
		n := &jnode{kind: 'a'}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return n, nil
		}
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
			if done, err := p.next(']'); err != nil || done {
				return n, err
			}
		}
	case c == '"':
		s, err := p.str()
		return &jnode{kind: 's', text: s}, err
	case c == '-' || c >= '0' && c <= '9':
		start := p.i
		for p.i < len(p.b) && (p.b[p.i] >= '0' && p.b[p.i] <= '9' || p.b[p.i] == '-' || p.b[p.i] == '+' || p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
			p.i++
		}
		return &jnode{kind: 'n', text: string(p.b[start:p.i])}, nil
	}
	for _, lit := range [...]struct {
		s    string
		kind byte
	}{{"true", 't'}, {"false", 'f'}, {"null", 'z'}} {
		if len(p.b)-p.i >= len(lit.s) && string(p.b[p.i:p.i+len(lit.s)]) == lit.s {
			p.i += len(lit.s)
			return &jnode{kind: lit.kind}, nil
		}
	}
	return nil, fmt.Errorf("unexpected %q", p.b[p.i])
}

// next consumes a ',' (false) or the closing byte (true).
func (p *jparser) next(closing byte) (bool, error) {
	p.space()
	if p.i >= len(p.b) {
		return false, errors.New("unexpected end")
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		return false, nil
	case closing:
		p.i++
		return true, nil
	}
	return false, fmt.Errorf("unexpected %q", p.b[p.i])
}

// str reads a JSON string at p.i (its opening quote); one with escapes is
// unescaped by encoding/json.
func (p *jparser) str() (string, error) {
	start := p.i
	escaped := false
	for p.i++; p.i < len(p.b); p.i++ {
		switch p.b[p.i] {
		case '\\':
			escaped = true
			p.i++
		case '"':
			p.i++
			raw := p.b[start:p.i]
			if !escaped {
				return string(raw[1 : len(raw)-1]), nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", err
			}
			return s, nil
		}
	}
	return "", errors.New("unterminated string")
}
