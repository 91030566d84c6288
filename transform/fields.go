package transform

import (
	"fmt"
	"slices"
	"strings"
)

// insertField is InsertField$Key and $Value: fields of the record's
// topic, partition, timestamp or a static string appended to a struct.
type insertField struct {
	key                                 bool
	topic, partition, timestamp, static *insertion
	staticValue                         string
	withDefault                         bool
}

// insertion is a field to insert: its name, and whether it is optional
// ("name?" or "name", the default) or required ("name!").
type insertion struct {
	name     string
	optional bool
}

func parseInsertion(spec string, set bool) *insertion {
	switch {
	case !set:
		return nil
	case strings.HasSuffix(spec, "?"):
		return &insertion{name: strings.TrimSuffix(spec, "?"), optional: true}
	case strings.HasSuffix(spec, "!"):
		return &insertion{name: strings.TrimSuffix(spec, "!")}
	}
	return &insertion{name: spec, optional: true}
}

func newInsertField(o *options, key bool) transformation {
	t := &insertField{key: key}
	spec := func(name string) *insertion {
		v, set := o.str(name, false, "")
		return parseInsertion(v, set)
	}
	t.topic, t.partition, t.timestamp, t.static = spec("topic.field"), spec("partition.field"), spec("timestamp.field"), spec("static.field")
	offset := spec("offset.field")
	value, valueSet := o.str("static.value", false, "")
	t.staticValue = value
	t.withDefault = o.boolean("replace.null.with.default", true)
	switch {
	case t.topic == nil && t.partition == nil && offset == nil && t.timestamp == nil && t.static == nil:
		o.refuse("type", "no field insertion configured (Kafka Connect refuses it)")
	case t.static != nil && !valueSet:
		o.refuse("static.value", "missing for "+o.p.name(o.prefix+"static.field")+" (Kafka Connect refuses it)")
	case slices.ContainsFunc([]*insertion{t.topic, t.partition, t.timestamp, t.static}, func(in *insertion) bool { return in != nil && in.name == "" }):
		o.refuse("type", "a field without a name: Kafka Connect's task fails at the first record (fieldName cannot be null)")
	case offset != nil:
		o.refuse("offset.field", "a Kafka offset exists for sink connectors only: Kafka Connect's task fails at the first record")
	}
	if o.failed {
		return nil
	}
	return t
}

func (t *insertField) onKey() bool { return t.key }

func (t *insertField) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if v == nil {
		return true, nil
	}
	st, err := requireStruct(s, v, "field insertion")
	if err != nil {
		return false, err
	}
	ns := st.Schema.withBasics()
	ns.Fields = slices.Clone(st.Schema.Fields)
	nv := &Struct{Schema: ns, Values: make([]any, len(st.Values), len(st.Values)+4)}
	for i := range st.Values {
		nv.Values[i] = st.get(i, t.withDefault)
	}
	add := func(in *insertion, s *Schema, v any) error {
		if in == nil {
			return nil
		}
		if ns.field(in.name) >= 0 {
			return dataErrorf("cannot create field %q: the struct has one of that name", in.name)
		}
		fs := *s
		fs.Optional = in.optional
		ns.Fields = append(ns.Fields, Field{Name: in.name, Schema: &fs})
		nv.Values = append(nv.Values, v)
		return nil
	}
	var partition any
	if r.HasPartition {
		partition = int64(r.Partition)
	}
	v32 := int32(1)
	for _, f := range [...]struct {
		in *insertion
		s  Schema
		v  any
	}{
		{t.topic, Schema{Type: String}, r.Topic},
		{t.partition, Schema{Type: Int32}, partition},
		{t.timestamp, Schema{Type: Int64, Name: timestampName, Version: &v32}, r.Timestamp},
		{t.static, Schema{Type: String}, t.staticValue},
	} {
		if err := add(f.in, &f.s, f.v); err != nil {
			return false, err
		}
	}
	setOperand(r, t.key, ns, nv)
	return true, nil
}

// replaceField is ReplaceField$Key and $Value: a struct's fields kept
// (include), dropped (exclude, which wins) and renamed.
type replaceField struct {
	key              bool
	exclude, include []string
	renames, reverse map[string]string
	withDefault      bool
}

func newReplaceField(o *options, key bool) transformation {
	t := &replaceField{key: key, renames: map[string]string{}, reverse: map[string]string{}}
	t.exclude = o.list("exclude", false, false, true)
	t.include = o.list("include", false, false, true)
	for _, m := range o.list("renames", false, false, false) {
		// Java's split(":") drops trailing empty strings: "a:" and
		// "a:b:c" are not pairs, ":b" is.
		parts := strings.Split(m, ":")
		for len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		if len(parts) != 2 {
			o.refuse("renames", fmt.Sprintf("invalid rename mapping %q: want from:to", m))
			continue
		}
		t.renames[parts[0]] = parts[1]
	}
	for from, to := range t.renames {
		t.reverse[to] = from
	}
	t.withDefault = o.boolean("replace.null.with.default", true)
	if o.failed {
		return nil
	}
	return t
}

func (t *replaceField) onKey() bool { return t.key }

func (t *replaceField) keep(name string) bool {
	return !slices.Contains(t.exclude, name) && (len(t.include) == 0 || slices.Contains(t.include, name))
}

func (t *replaceField) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if v == nil {
		return true, nil
	}
	st, err := requireStruct(s, v, "field replacement")
	if err != nil {
		return false, err
	}
	ns := st.Schema.withBasics()
	for _, f := range st.Schema.Fields {
		if !t.keep(f.Name) {
			continue
		}
		name := f.Name
		if to, ok := t.renames[name]; ok {
			name = to
		}
		if ns.field(name) >= 0 {
			return false, dataErrorf("cannot create field %q: the struct has one of that name", name)
		}
		ns.Fields = append(ns.Fields, Field{Name: name, Schema: f.Schema})
	}
	nv := &Struct{Schema: ns, Values: make([]any, len(ns.Fields))}
	for i, f := range ns.Fields {
		from := f.Name
		if r, ok := t.reverse[from]; ok {
			from = r
		}
		if j := st.Schema.field(from); j >= 0 {
			nv.Values[i] = st.get(j, t.withDefault)
		}
	}
	setOperand(r, t.key, ns, nv)
	return true, nil
}
