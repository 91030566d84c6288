package transform

// setSchemaMetadata is SetSchemaMetadata$Key and $Value: the schema's
// name, version or both replaced; a struct value takes the new schema.
type setSchemaMetadata struct {
	key         bool
	name        string
	hasName     bool
	version     *int32
	withDefault bool
}

func newSetSchemaMetadata(o *options, key bool) transformation {
	t := &setSchemaMetadata{key: key}
	t.name, t.hasName = o.str("schema.name", false, "")
	t.version = o.int32("schema.version")
	t.withDefault = o.boolean("replace.null.with.default", true)
	if !t.hasName && t.version == nil && !o.failed {
		o.refuse("type", "neither schema.name nor schema.version configured (Kafka Connect refuses it)")
	}
	if o.failed {
		return nil
	}
	return t
}

// onKey: Kafka Connect 4.3's SetSchemaMetadata fails on any schema but a
// struct's (Cannot list fields on non-struct type), and the Outbox Event
// Router's key is a column's value.
func (t *setSchemaMetadata) onKey() bool { return t.key }

func (t *setSchemaMetadata) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if s == nil && v == nil {
		return true, nil
	}
	if s == nil {
		return false, dataErrorf("Schema required for [updating schema metadata]")
	}
	if s.Type != StructT {
		// Kafka Connect 4.3 copies the schema's fields whatever its type,
		// and a schema of another type has none to list.
		return false, dataErrorf("Cannot list fields on non-struct type (SetSchemaMetadata of a %s schema)", s.Type)
	}
	ns := *s
	if t.hasName {
		ns.Name = t.name
	}
	if t.version != nil {
		ns.Version = t.version
	}
	var nv any = v
	if st, ok := v.(*Struct); ok {
		vs := make([]any, len(st.Values))
		for i := range vs {
			vs[i] = st.get(i, t.withDefault)
		}
		nv = &Struct{Schema: &ns, Values: vs}
	}
	setOperand(r, t.key, &ns, nv)
	return true, nil
}
