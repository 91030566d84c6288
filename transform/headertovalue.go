package transform

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// headerToValueClass is Debezium's HeaderToValue.
const headerToValueClass = "io.debezium.transforms.HeaderToValue"

// headerToValue is Debezium's HeaderToValue: the headers named in
// headers become the fields of the same position in fields, with each
// header's schema, appended to a struct value (any struct: an envelope,
// a row, the router's envelope placements); a dotted field goes into a
// nested struct, made when the value has none of that name. move also
// removes every header of those names. A null value passes untouched;
// any other value that is not a struct is Debezium's DataException.
//
// Debezium keeps the new schema per value schema, built from the first
// record's headers: a later record of an equal value schema gets that
// schema whatever headers it carries, which fails when it carries one the
// first lacked. schemas does the same.
type headerToValue struct {
	headers, fields []string
	move            bool

	mu      sync.Mutex
	schemas map[string]*Schema  // by the value schema's JSON
	byPtr   map[*Schema]*Schema // the same, by the schema read
}

// headerToValueCache is as many schemas as Debezium's cache holds.
const headerToValueCache = 64

func newHeaderToValue(o *options) transformation {
	headers := debeziumList(o, "headers")
	fields := debeziumList(o, "fields")
	op, set := o.raw("operation")
	switch op = strings.ToLower(javaTrim(op)); {
	case !set || op == "":
		o.refuse("operation", "missing (Debezium requires a value: move or copy)")
	case op != "move" && op != "copy":
		o.refuse("operation", fmt.Sprintf("%q: Debezium requires move or copy", op))
	}
	if o.failed {
		return nil
	}
	if len(headers) != len(fields) {
		o.refuse("fields", fmt.Sprintf("%d fields for %d headers (Debezium: 'fields' config must have the same number of elements as 'headers' config)", len(fields), len(headers)))
		return nil
	}
	return &headerToValue{headers: headers, fields: fields, move: op == "move", schemas: map[string]*Schema{}, byPtr: map[*Schema]*Schema{}}
}

// debeziumList reads a required LIST as Debezium's Configuration.getList
// splits it, not as Kafka Connect does: at each comma, Java's String.split
// dropping the empty items at the end only, each item trimmed. Debezium
// refuses a blank value, an empty item and an item with a space.
func debeziumList(o *options, name string) []string {
	v, ok := o.raw(name)
	if !ok || javaTrim(v) == "" {
		o.refuse(name, "missing (Debezium requires a value)")
		return nil
	}
	items := strings.Split(v, ",")
	for len(items) > 0 && items[len(items)-1] == "" {
		items = items[:len(items)-1]
	}
	for i := range items {
		items[i] = javaTrim(items[i])
	}
	switch {
	case slices.Contains(items, ""):
		o.refuse(name, fmt.Sprintf("%q: an empty item (Debezium: Empty string element(s) not permitted)", v))
	case slices.ContainsFunc(items, func(s string) bool { return strings.Contains(s, " ") }):
		o.refuse(name, fmt.Sprintf("%q: an item with a space (Debezium: Element(s) containing space not permitted)", v))
	}
	return items
}

// htvEntry is one header bound for the value: the field's path, split
// as Java splits it at its dots.
type htvEntry struct {
	path   string
	parts  []string
	schema *Schema
	value  any
}

// rootName is the name Debezium gives the value itself when it walks the
// paths: a nested struct of that name is taken for the value, too.
const rootName = "payload"

func (t *headerToValue) apply(r *Record) (bool, error) {
	if r.Value == nil {
		return true, nil
	}
	st, ok := r.Value.(*Struct)
	if !ok {
		return false, dataErrorf("Only Struct objects supported for [Header field insertion], found: %s", javaClass(r.ValueSchema, r.Value))
	}
	var entries []htvEntry
	var nested []string
	for _, h := range r.Headers {
		i := slices.Index(t.headers, h.Key)
		if i < 0 {
			continue
		}
		path := t.fields[i]
		entries = append(entries, htvEntry{path: path, parts: splitDots(path), schema: h.Schema, value: h.Value})
		if strings.Contains(path, ".") {
			nested = append(nested, path)
		}
	}
	if len(entries) == 0 {
		return true, nil
	}
	w := htvWalk{entries: entries, nested: nested}
	ns, err := t.schema(st.Schema, &w)
	if err != nil {
		return false, err
	}
	nv, err := w.value(st, ns, rootName, 0)
	if err != nil {
		return false, err
	}
	r.ValueSchema, r.Value = ns, nv
	if t.move {
		r.Headers = slices.DeleteFunc(slices.Clone(r.Headers), func(h Header) bool { return slices.Contains(t.headers, h.Key) })
	}
	return true, nil
}

// schema is the value schema s with the entries' fields, the one cached
// for an equal schema if there is one.
func (t *headerToValue) schema(s *Schema, w *htvWalk) (*Schema, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ns, ok := t.byPtr[s]; ok {
		return ns, nil
	}
	key := string(appendJSONSchema(nil, s, ""))
	if ns, ok := t.schemas[key]; ok {
		if len(t.byPtr) < headerToValueCache {
			t.byPtr[s] = ns
		}
		return ns, nil
	}
	if err := w.checkParents(s); err != nil {
		return nil, err
	}
	ns, err := w.schema(s, rootName, 0)
	if err != nil {
		return nil, err
	}
	if len(t.schemas) < headerToValueCache {
		t.schemas[key] = ns
		t.byPtr[s] = ns
	}
	return ns, nil
}

// splitDots is Java's split at dots: empty items kept, but not at the
// end.
func splitDots(path string) []string {
	parts := strings.Split(path, ".")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// htvWalk is one record's entries, and the paths among them with a dot,
// as Debezium walks the value's structs with them: at each struct, by its
// field name and depth, which field an entry sets there (own), which of
// its fields lead to a path (into), and which structs to make for a path
// whose parent the struct lacks (parents, child).
type htvWalk struct {
	entries []htvEntry
	nested  []string
}

// own is the field entry e sets in the struct at (its field name) and
// depth level: a plain name at the value, or a path's last part one level
// below a struct of its parent's name.
func (e *htvEntry) own(at string, level int) (string, bool) {
	if len(e.parts) == 1 && at == rootName {
		return e.parts[0], true
	}
	if len(e.parts) == level+1 {
		parent := 0
		if level > 0 {
			parent = level - 1
		}
		if e.parts[parent] == at {
			return e.parts[level], true
		}
	}
	return "", false
}

// into tells whether the field name leads to a path: Debezium asks
// whether some path holds the name and a dot anywhere in it.
func (w *htvWalk) into(name string) bool {
	for _, p := range w.nested {
		if strings.Contains(p, name+".") {
			return true
		}
	}
	return false
}

// parents are the structs to make in the struct at (of schema s): the
// part of a path at this level, when the path goes on below it and s has
// no field of that name.
func (w *htvWalk) parents(at string, s *Schema, level int) []string {
	var out []string
	for _, p := range w.nested {
		parts := splitDots(p)
		here := level == 0 && at == rootName || level > 0 && level < len(parts) && parts[level-1] == at
		if !here || level >= len(parts)-1 {
			continue
		}
		if f := parts[level]; s.field(f) < 0 && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// child is the field entry e sets in a struct made as parent: the next
// part of its path. Below the value, Debezium compares a joined path with
// the parent's name, which never matches: those structs stay empty.
func (e *htvEntry) child(parent, at string, level int) (string, bool) {
	switch {
	case level == 0 && at == rootName:
		if len(e.parts) > 1 && e.parts[0] == parent {
			return e.parts[1], true
		}
	case level > 0:
		if strings.Join(e.parts[:min(level+1, len(e.parts))], ".") == parent && level+1 < len(e.parts) {
			return e.parts[level+1], true
		}
	}
	return "", false
}

// checkParents fails a path through a field that is not a struct.
func (w *htvWalk) checkParents(s *Schema) error {
	for _, p := range w.nested {
		parts := splitDots(p)
		cur := s
		for _, name := range parts[:max(len(parts)-1, 0)] {
			if cur.Type != StructT {
				return dataErrorf("Cannot look up fields on non-struct type")
			}
			j := cur.field(name)
			if j < 0 {
				break
			}
			cur = cur.Fields[j].Schema
			if !nonPrimitive(cur) {
				return dataErrorf("Field '%s' is a primitive type, not a struct. Cannot add nested field '%s'.", name, p)
			}
		}
	}
	return nil
}

func nonPrimitive(s *Schema) bool { return s.Type == StructT || s.Type == Array || s.Type == Map }

// addField is SchemaBuilder.field.
func addField(s *Schema, name string, fs *Schema) error {
	switch {
	case name == "":
		return dataErrorf("fieldName cannot be null.")
	case fs == nil:
		return dataErrorf("fieldSchema for field %s cannot be null.", name)
	case s.field(name) >= 0:
		return dataErrorf("Cannot create field because of field name duplication %s", name)
	}
	s.Fields = append(s.Fields, Field{Name: name, Schema: fs})
	return nil
}

// schema is s, the struct at (at depth level), rebuilt with the entries'
// fields: not optional and without a default (copySchemaBasics), as is
// every struct on a path. A field of the name already there keeps its
// schema; the header's value goes into it.
func (w *htvWalk) schema(s *Schema, at string, level int) (*Schema, error) {
	if !nonPrimitive(s) {
		return s, nil
	}
	if s.Type != StructT {
		return nil, dataErrorf("Cannot list fields on non-struct type")
	}
	ns := s.withBasics()
	for _, f := range s.Fields {
		fs := f.Schema
		if w.into(f.Name) {
			var err error
			if fs, err = w.schema(fs, f.Name, level+1); err != nil {
				return nil, err
			}
		}
		ns.Fields = append(ns.Fields, Field{Name: f.Name, Schema: fs})
	}
	for i := range w.entries {
		if name, ok := w.entries[i].own(at, level); ok && ns.field(name) < 0 {
			if err := addField(ns, name, w.entries[i].schema); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range w.parents(at, s, level) {
		ps := &Schema{Type: StructT, Optional: true}
		for i := range w.entries {
			if name, ok := w.entries[i].child(p, at, level); ok {
				if err := addField(ps, name, w.entries[i].schema); err != nil {
					return nil, err
				}
			}
		}
		if err := addField(ns, p, ps); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// value is st, the struct at (at depth level), as a struct of ns with
// the entries' values. A null field is left out, so its default is what
// it gets; each value put is checked as Struct.put checks it.
func (w *htvWalk) value(st *Struct, ns *Schema, at string, level int) (*Struct, error) {
	out := &Struct{Schema: ns, Values: make([]any, len(ns.Fields))}
	put := func(name string, vs *Schema, v any) error {
		j := ns.field(name)
		if j < 0 {
			return dataErrorf("%s is not a valid field name", name)
		}
		if err := connectValidate("field: \""+name+"\"", ns.Fields[j].Schema, vs, v); err != nil {
			return err
		}
		out.Values[j] = v
		return nil
	}
	for i, f := range st.Schema.Fields {
		x := st.get(i, true)
		if x == nil {
			continue
		}
		if !w.into(f.Name) {
			// Under its own schema the value is valid already; under
			// another (a cached schema from records of other headers)
			// it is checked as Struct.put checks it.
			if j := ns.field(f.Name); j >= 0 && ns.Fields[j].Schema == f.Schema {
				out.Values[j] = x
			} else if err := put(f.Name, f.Schema, x); err != nil {
				return nil, err
			}
			continue
		}
		inner, ok := x.(*Struct)
		if !ok {
			return nil, dataErrorf("Only Struct objects supported for [Nested field], found: %s", javaClass(f.Schema, x))
		}
		j := ns.field(f.Name)
		if j < 0 {
			return nil, dataErrorf("%s is not a valid field name", f.Name)
		}
		sub, err := w.value(inner, ns.Fields[j].Schema, f.Name, level+1)
		if err != nil {
			return nil, err
		}
		if err := put(f.Name, sub.Schema, sub); err != nil {
			return nil, err
		}
	}
	for i := range w.entries {
		e := &w.entries[i]
		if name, ok := e.own(at, level); ok {
			if err := put(name, e.schema, e.value); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range w.parents(at, st.Schema, level) {
		j := ns.field(p)
		if j < 0 {
			continue
		}
		ps := ns.Fields[j].Schema
		pv := &Struct{Schema: ps, Values: make([]any, len(ps.Fields))}
		for i := range w.entries {
			e := &w.entries[i]
			name, ok := e.child(p, at, level)
			if !ok {
				continue
			}
			k := ps.field(name)
			if k < 0 {
				return nil, dataErrorf("%s is not a valid field name", name)
			}
			if err := connectValidate("field: \""+name+"\"", ps.Fields[k].Schema, e.schema, e.value); err != nil {
				return nil, err
			}
			pv.Values[k] = e.value
		}
		if err := put(p, ps, pv); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// connectValidate is ConnectSchema.validateValue: v, made under the
// schema vs (which tells its Java class), put where s is expected. A
// struct must be of an equal schema, with its required fields set.
func connectValidate(where string, s, vs *Schema, v any) error {
	if v == nil {
		if s.Optional {
			return nil
		}
		return dataErrorf("Invalid value: null used for required %s, schema type: %s", where, connectTypeName(s.Type))
	}
	if want, got := javaClassFor(s), javaClassOf(vs, v); want != got && !(want == "[B" && got == "java.nio.HeapByteBuffer") {
		name := ""
		if s.Name != "" {
			name = ` "` + s.Name + `"`
		}
		return dataErrorf("Invalid Java object for schema%s with type %s: class %s for %s", name, connectTypeName(s.Type), got, where)
	}
	switch x := v.(type) {
	case *Struct:
		if x.Schema != s && string(appendJSONSchema(nil, x.Schema, "")) != string(appendJSONSchema(nil, s, "")) {
			return dataErrorf("Struct schemas do not match.")
		}
		for i, f := range x.Schema.Fields {
			if x.Values[i] == nil && (f.Schema.Optional || f.Schema.HasDefault) {
				continue
			}
			if err := connectValidate("field: \""+f.Name+"\"", f.Schema, f.Schema, x.Values[i]); err != nil {
				return err
			}
		}
	case []any:
		var items *Schema
		if vs != nil {
			items = vs.Items
		}
		for _, e := range x {
			if err := connectValidate("element of array "+where, s.Items, items, e); err != nil {
				return err
			}
		}
	case []MapEntry:
		var ks, vals *Schema
		if vs != nil {
			ks, vals = vs.Keys, vs.Values
		}
		for _, e := range x {
			if err := connectValidate("key of map "+where, s.Keys, ks, e.Key); err != nil {
				return err
			}
			if err := connectValidate("value of map "+where, s.Values, vals, e.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// javaClassFor is the Java class Connect expects of a value of s (bytes
// may also be a ByteBuffer).
func javaClassFor(s *Schema) string {
	switch s.logical() {
	case decimalName:
		return "java.math.BigDecimal"
	case dateName, timeName, timestampName:
		return "java.util.Date"
	}
	switch s.Type {
	case Int8:
		return "java.lang.Byte"
	case Int16:
		return "java.lang.Short"
	case Int32:
		return "java.lang.Integer"
	case Int64:
		return "java.lang.Long"
	case Float32:
		return "java.lang.Float"
	case Float64:
		return "java.lang.Double"
	case Boolean:
		return "java.lang.Boolean"
	case String:
		return "java.lang.String"
	case Bytes:
		return "[B"
	case Array:
		return "java.util.List"
	case Map:
		return "java.util.Map"
	}
	return "org.apache.kafka.connect.data.Struct"
}

// javaClassOf is the Java class of v, made under vs, in the terms of
// javaClassFor.
func javaClassOf(vs *Schema, v any) string {
	switch v.(type) {
	case []any:
		return "java.util.List"
	case []MapEntry:
		return "java.util.Map"
	}
	switch vs.logical() {
	case dateName, timeName, timestampName:
		return "java.util.Date"
	}
	return javaClass(vs, v)
}

// connectTypeName is Schema.Type's name.
func connectTypeName(t Type) string {
	switch t {
	case Float32:
		return "FLOAT32"
	case Float64:
		return "FLOAT64"
	}
	return strings.ToUpper(string(t))
}
