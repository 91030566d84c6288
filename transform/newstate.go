package transform

import (
	"fmt"
	"strings"
	"sync"
)

// NewStateClass is Debezium's ExtractNewRecordState, which flattens the
// connector's change events to the row.
const NewStateClass = "io.debezium.transforms.ExtractNewRecordState"

// newState is ExtractNewRecordState (Debezium 3.6.1) for the change events
// pgoutbox writes: the value of an insert, a snapshot read or an update
// becomes the row (after), with the envelope's fields add.fields names;
// add.headers names fields to copy into headers; under
// delete.tombstone.handling.mode rewrite a __deleted field says "false".
// A delete and the tombstone after it become what the mode says (see
// apply). A record that is not a change event passes unchanged, as it
// does in Debezium.
type newState struct {
	fields, headers []fieldRef
	routeBy         string
	mode            string // delete.tombstone.handling.mode, lower case
	rewrite         bool   // mode rewrite or rewrite-with-tombstone
	// own holds each after field's schema as the row's struct has it
	// (not optional), by the field's: one per table's shape.
	own sync.Map // *Schema -> *Schema
}

// fieldRef is one entry of add.fields or add.headers: "op", "source.lsn",
// "table:TABLE_NAME" (FieldReference).
type fieldRef struct {
	parent string // the envelope's struct holding the field; "" for the envelope itself
	field  string
	name   string // the new field's or header's name, prefixed
}

func newNewState(o *options) transformation {
	t := &newState{}
	mode, _ := o.str("delete.tombstone.handling.mode", false, "tombstone")
	t.mode = strings.ToLower(mode)
	switch t.mode {
	case "rewrite", "rewrite-with-tombstone":
		t.rewrite = true
	case "drop", "tombstone", "delete-to-tombstone":
	default:
		o.refuse("delete.tombstone.handling.mode", fmt.Sprintf("%q: want drop, tombstone, rewrite, rewrite-with-tombstone or delete-to-tombstone (Debezium refuses it)", mode))
	}
	t.routeBy, _ = o.str("route.by.field", false, "")
	fieldsPrefix, _ := o.str("add.fields.prefix", false, "__")
	headersPrefix, _ := o.str("add.headers.prefix", false, "__")
	var ok bool
	if t.fields, ok = parseFieldRefs(o, "add.fields", fieldsPrefix); !ok {
		return nil
	}
	if t.headers, ok = parseFieldRefs(o, "add.headers", headersPrefix); !ok {
		return nil
	}
	o.boolean("replace.null.with.default", true) // a row's NULLs already are their defaults (schema.Encoder.FillDefaults)
	for _, name := range []string{"drop.fields.header.name", "drop.fields.from.key", "drop.fields.keep.schema.compatible"} {
		if _, set := o.raw(name); set {
			o.refuse(name, "fields dropped by a header's list are not supported: pgoutbox's change events carry no such header")
		}
	}
	if o.failed {
		return nil
	}
	return t
}

// parseFieldRefs reads add.fields or add.headers: a comma-separated list,
// each item trimmed, "[struct.]field[:name]".
func parseFieldRefs(o *options, option, prefix string) ([]fieldRef, bool) {
	v, set := o.raw(option)
	if !set || v == "" {
		return nil, true
	}
	var refs []fieldRef
	for _, item := range strings.Split(v, ",") {
		item = javaTrim(item)
		parts := strings.Split(item, ":")
		if len(parts) > 2 {
			o.refuse(option, fmt.Sprintf("%q: unexpected field name (Debezium fails)", item))
			return nil, false
		}
		path := strings.Split(parts[0], ".")
		r := fieldRef{field: path[0]}
		if len(path) > 1 {
			r.parent, r.field = path[0], path[1]
		} else {
			r.parent = envelopeParent(r.field)
		}
		switch {
		case len(parts) == 2:
			r.name = prefix + parts[1]
		case len(path) > 1:
			r.name = prefix + r.parent + "_" + r.field
		default:
			r.name = prefix + r.field
		}
		refs = append(refs, r)
	}
	return refs, true
}

// envelopeParent is where an unqualified field lives: the transaction
// block's id and orders, the envelope's op and timestamps, else source.
func envelopeParent(field string) string {
	switch field {
	case "id", "total_order", "data_collection_order":
		return "transaction"
	case "op", "ts_ms", "ts_us", "ts_ns":
		return ""
	case "updateDescription":
		return "updateDescription"
	}
	return "source"
}

// lookup returns the field's schema (optional, as Debezium copies it) and
// value in the change event env; ok is false when neither its struct nor
// the envelope has it, which Debezium skips.
func (r fieldRef) lookup(env *Struct) (*Schema, any, bool) {
	if r.parent != "" {
		if p := env.Schema.field(r.parent); p >= 0 && env.Schema.Fields[p].Schema.Type == StructT {
			ps := env.Schema.Fields[p].Schema
			if j := ps.field(r.field); j >= 0 {
				s := basics(ps.Fields[j].Schema)
				ss, _ := env.Values[p].(*Struct)
				if ss == nil {
					return s, nil, true
				}
				return s, ss.Values[j], true
			}
		}
	}
	i := env.Schema.field(r.field)
	if i < 0 {
		return nil, nil, false
	}
	return basics(env.Schema.Fields[i].Schema), env.Values[i], true
}

// basics is SchemaUtil.copySchemaBasics(s).optional(): type, name,
// version, doc and parameters, without a default, optional; a struct's
// fields kept.
func basics(s *Schema) *Schema {
	c := &Schema{Type: s.Type, Optional: true, Name: s.Name, Version: s.Version, Doc: s.Doc, Params: s.Params,
		Fields: s.Fields, Items: s.Items, Keys: s.Keys, Values: s.Values}
	return c
}

func (t *newState) apply(r *Record) (bool, error) {
	if r.Value == nil && r.ValueSchema == nil {
		// A tombstone (handleTombstoneRecord): an op header says d.
		for _, h := range t.headers {
			if h.parent == "" && h.field == "op" {
				r.Headers = append(r.Headers, Header{Key: h.name, Schema: &Schema{Type: String}, Value: "d"})
			}
		}
		return t.mode == "rewrite-with-tombstone", nil
	}
	env, ok := r.Value.(*Struct)
	if !ok || r.ValueSchema == nil || !isChangeEvent(r.ValueSchema) {
		return true, nil
	}
	for _, h := range t.headers {
		if s, v, ok := h.lookup(env); ok {
			r.Headers = append(r.Headers, Header{Key: h.name, Schema: s, Value: v})
		}
	}
	a := r.ValueSchema.field("after")
	after, _ := env.Values[a].(*Struct)
	if after != nil {
		s, v := t.row(r.ValueSchema.Fields[a].Schema, after, "false")
		s, v = t.routed(r, s, v, v)
		r.ValueSchema, r.Value = t.added(env, s, v)
		return true, nil
	}
	b := r.ValueSchema.field("before")
	before, _ := env.Values[b].(*Struct)
	if before == nil {
		return false, nil // neither row: a truncate's, which handleTruncateRecord drops
	}
	// A delete (handleDeleteRecord).
	switch t.mode {
	case "drop":
		return false, nil
	case "tombstone":
		// ExtractField$Value of after: a null value, with after's schema.
		r.ValueSchema, r.Value = r.ValueSchema.Fields[a].Schema, nil
		t.routed(r, nil, nil, before)
	case "delete-to-tombstone":
		r.ValueSchema, r.Value = nil, nil
		t.routed(r, nil, nil, before)
	default: // rewrite, rewrite-with-tombstone: the old row, __deleted "true"
		s, v := t.row(r.ValueSchema.Fields[b].Schema, before, "true")
		t.routed(r, s, v, before)
		r.ValueSchema, r.Value = t.added(env, s, v)
	}
	return true, nil
}

// row is the row's struct v of the envelope's field schema f, as the
// record's value: its own schema, with __deleted = deleted under rewrite.
func (t *newState) row(f *Schema, v *Struct, deleted string) (*Schema, *Struct) {
	s := f
	if s.Optional {
		// Debezium builds the row's struct with the table's Value schema,
		// which the envelope's after field holds as an optional copy; the
		// record it makes of the row has the struct's own.
		s = t.ownSchema(s)
		v = &Struct{Schema: s, Values: v.Values}
	}
	if t.rewrite {
		// InsertField$Value with static.field __deleted.
		ns := s.withBasics()
		ns.Fields = append(append([]Field(nil), s.Fields...), Field{Name: "__deleted", Schema: &Schema{Type: String, Optional: true}})
		s, v = ns, &Struct{Schema: ns, Values: append(append([]any(nil), v.Values...), deleted)}
	}
	return s, v
}

// routed sets r's topic to the row's route.by.field, read from from (the
// row, or a delete's before), when it is a non-blank string; it returns
// s and v as they are.
func (t *newState) routed(r *Record, s *Schema, v, from *Struct) (*Schema, *Struct) {
	if t.routeBy != "" {
		if i := from.Schema.field(t.routeBy); i >= 0 {
			if topic, ok := from.Values[i].(string); ok && strings.TrimSpace(topic) != "" {
				r.Topic = topic
			}
		}
	}
	return s, v
}

// added is the row s, v with the envelope's fields add.fields names.
func (t *newState) added(env *Struct, s *Schema, v *Struct) (*Schema, *Struct) {
	if len(t.fields) == 0 {
		return s, v
	}
	ns := s.withBasics()
	ns.Fields = append([]Field(nil), s.Fields...)
	nv := &Struct{Schema: ns, Values: append([]any(nil), v.Values...)}
	for _, f := range t.fields {
		if fs, fv, ok := f.lookup(env); ok {
			ns.Fields = append(ns.Fields, Field{Name: f.name, Schema: fs})
			nv.Values = append(nv.Values, fv)
		}
	}
	return ns, nv
}

// ownSchema is the after field's schema f as the row's struct has it:
// the same, not optional.
func (t *newState) ownSchema(f *Schema) *Schema {
	if s, ok := t.own.Load(f); ok {
		return s.(*Schema)
	}
	c := *f
	c.Optional = false
	s, _ := t.own.LoadOrStore(f, &c)
	return s.(*Schema)
}

// isChangeEvent tells a change event's envelope: a struct named
// ….Envelope (SmtManager.isValidEnvelope, which checks the name only) with
// the op, before, after and source its readers here take from it.
func isChangeEvent(s *Schema) bool {
	if s.Type != StructT || !strings.HasSuffix(s.Name, ".Envelope") {
		return false
	}
	for _, f := range []string{"op", "before", "after", "source"} {
		if s.field(f) < 0 {
			return false
		}
	}
	return true
}
