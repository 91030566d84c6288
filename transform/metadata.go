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

func (t *setSchemaMetadata) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if s == nil && v == nil {
		return true, nil
	}
	if s == nil {
		return false, dataErrorf("Schema required for [updating schema metadata]")
	}
	ns := *s
	if t.hasName {
		ns.Name = t.name
	}
	if t.version != nil {
		ns.Version = t.version
	}
	if l := s.logical(); l != "" && ns.Name != s.Name && v != nil {
		// The value stays Connect's Java object for the logical type
		// (a BigDecimal, a Date), which the renamed schema's converter
		// cannot write.
		return false, dataErrorf("a %s value under the schema name %q: JsonConverter cannot write it", l, ns.Name)
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
