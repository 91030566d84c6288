package transform

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/pgoutbox/pgoutbox/router"
)

// LogicalTableClass is Debezium's ByLogicalTableRouter, which merges the
// change events of several tables (shards, partitions) into one topic.
const LogicalTableClass = "io.debezium.transforms.ByLogicalTableRouter"

// logicalTable is ByLogicalTableRouter (Debezium 3.6.1): a record whose
// topic topic.regex matches in full goes to the topic topic.replacement
// makes; its key's struct is renamed <topic>.Key and, under
// key.enforce.uniqueness, gains a string field key.field.name holding the
// old topic (or what key.field.regex/replacement make of it), so that
// rows of equal keys from different tables stay apart; a change event's
// envelope is renamed <topic>.Envelope and its before and after
// <topic>.Value. Other records keep their value; a null key stays null
// (a table without a primary key).
type logicalTable struct {
	topic      *router.Rename
	keyField   string
	unique     bool
	identifier *router.Rename // nil: the old topic itself
	adjust     nameAdjuster
	// The new schemas, built once per old schema and new topic.
	keys, envelopes sync.Map // logicalKey -> *Schema
}

type logicalKey struct {
	old   *Schema
	topic string
}

func newLogicalTable(o *options) transformation {
	// Debezium reads the options as the user wrote them (Kafka Connect
	// passes the originals), untrimmed; "required" means not blank.
	raw := func(name string, required bool) (string, bool) {
		v, set := o.raw(name)
		if required && javaTrim(v) == "" {
			o.refuse(name, "missing or blank (Debezium requires a value)")
		}
		return v, set
	}
	regex, _ := raw("topic.regex", true)
	replacement, _ := raw("topic.replacement", true)
	t := &logicalTable{unique: o.boolean("key.enforce.uniqueness", true), keyField: "__dbz__physicalTableIdentifier"}
	if v, set := o.raw("key.field.name"); set {
		t.keyField = v
	}
	if t.unique && t.keyField == "" {
		o.refuse("key.field.name", "empty: Kafka Connect cannot create a field without a name, and Debezium's task fails at the first record with a key")
	}
	keyRegex, _ := o.raw("key.field.regex")
	keyReplacement, _ := o.raw("key.field.replacement")
	if javaTrim(keyRegex) != "" && javaTrim(keyReplacement) == "" {
		o.refuse("key.field.replacement", "must be non-empty if "+o.p.name(o.prefix+"key.field.regex")+" is set (Debezium refuses it)")
	}
	mode, _ := o.raw("schema.name.adjustment.mode")
	switch strings.ToLower(javaTrim(mode)) {
	case "", "none":
		if _, set := o.raw("schema.name.adjustment.mode"); set && javaTrim(mode) == "" {
			o.refuse("schema.name.adjustment.mode", fmt.Sprintf("%q: want none, avro or avro_unicode (Debezium refuses it)", mode))
		}
	case "avro":
		t.adjust = &avroAdjuster{}
	case "avro_unicode":
		t.adjust = &avroAdjuster{unicode: true}
	default:
		o.refuse("schema.name.adjustment.mode", fmt.Sprintf("%q: want none, avro or avro_unicode (Debezium refuses it)", mode))
	}
	// The cache's size changes nothing but memory; Debezium parses it
	// with Integer.parseInt, which takes no white space.
	if v, set := o.raw("logical.table.cache.size"); set {
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			o.refuse("logical.table.cache.size", fmt.Sprintf("%q: an integer is expected (Debezium refuses it)", v))
		}
	}
	if o.failed {
		return nil
	}
	// Java compiles the patterns as given; a replacement's bad group
	// reference fails Debezium's task at the first record it renames, so
	// pgoutbox refuses it at start, as it does RegexRouter's.
	var err error
	if t.topic, err = router.NewRename(regex, replacement); err != nil {
		refuseRename(o, err, "topic.regex", "topic.replacement")
		return nil
	}
	if javaTrim(keyRegex) != "" {
		if t.identifier, err = router.NewRename(keyRegex, keyReplacement); err != nil {
			refuseRename(o, err, "key.field.regex", "key.field.replacement")
			return nil
		}
	}
	return t
}

// refuseRename names the option of router.NewRename's error.
func refuseRename(o *options, err error, regex, replacement string) {
	name := replacement
	if strings.HasPrefix(err.Error(), "regex") {
		name = regex
	}
	o.refuse(name, err.Error()+" (pgoutbox's regular expressions are RE2: no lookaround or backreferences)")
}

// onKey: the transform needs a struct key (or none), which the Outbox
// Event Router's is not.
func (t *logicalTable) onKey() bool { return true }

func (t *logicalTable) apply(r *Record) (bool, error) {
	oldTopic := r.Topic
	newTopic, ok := t.topic.Topic(oldTopic)
	if !ok || newTopic == "" {
		// Debezium leaves a record whose new topic would be empty as it
		// is, with a warning.
		return true, nil
	}
	var keySchema *Schema
	var key any
	if r.Key != nil {
		old, ok := r.Key.(*Struct)
		if !ok {
			return false, dataErrorf("Only Struct objects supported for [Updating schema], found: %s", javaClass(r.KeySchema, r.Key))
		}
		var err error
		if keySchema, err = t.keySchema(old.Schema, newTopic); err != nil {
			return false, err
		}
		ks := &Struct{Schema: keySchema, Values: make([]any, len(keySchema.Fields))}
		copy(ks.Values, old.Values) // the old fields come first, in order, without their defaults
		if t.unique {
			id := oldTopic
			if t.identifier != nil {
				id, _ = t.identifier.Topic(oldTopic) // no match: the old topic
			}
			ks.Values[len(ks.Values)-1] = id
		}
		key = ks
	}
	r.Topic, r.KeySchema, r.Key = newTopic, keySchema, key
	if r.Value == nil || r.ValueSchema == nil || !strings.HasSuffix(r.ValueSchema.Name, ".Envelope") {
		return true, nil // a tombstone, or not a change event
	}
	env, ok := r.Value.(*Struct)
	if !ok {
		return false, dataErrorf("Only Struct objects supported for [Updating schema], found: %s", javaClass(r.ValueSchema, r.Value))
	}
	es, err := t.envelopeSchema(env.Schema, newTopic)
	if err != nil {
		return false, err
	}
	rowSchema := es.Fields[es.field("before")].Schema
	nv := &Struct{Schema: es, Values: make([]any, len(env.Values))}
	for i, f := range env.Schema.Fields {
		v := env.get(i, true)
		if row, isRow := v.(*Struct); isRow && (f.Name == "before" || f.Name == "after") {
			nr := &Struct{Schema: rowSchema, Values: make([]any, len(rowSchema.Fields))}
			for j, rf := range row.Schema.Fields {
				k := rowSchema.field(rf.Name)
				if k < 0 {
					return false, dataErrorf("%s is not a valid field name", rf.Name)
				}
				nr.Values[k] = row.Values[j]
			}
			v = nr
		}
		nv.Values[i] = v
	}
	r.ValueSchema, r.Value = es, nv
	return true, nil
}

// keySchema is the old key's struct schema renamed <topic>.Key, with the
// physical table's field under key.enforce.uniqueness: version, doc,
// parameters, optionality and fields kept, no default.
func (t *logicalTable) keySchema(old *Schema, topic string) (*Schema, error) {
	k := logicalKey{old, topic}
	if s, ok := t.keys.Load(k); ok {
		return s.(*Schema), nil
	}
	name, err := t.name(topic + ".Key")
	if err != nil {
		return nil, err
	}
	s := &Schema{Type: StructT, Name: name, Version: old.Version, Doc: old.Doc, Params: old.Params, Optional: old.Optional,
		Fields: append([]Field(nil), old.Fields...)}
	if t.unique {
		if s.field(t.keyField) >= 0 {
			return nil, dataErrorf("Cannot create field because of field name duplication %s", t.keyField)
		}
		s.Fields = append(s.Fields, Field{Name: t.keyField, Schema: &Schema{Type: String}})
	}
	got, _ := t.keys.LoadOrStore(k, s)
	return got.(*Schema), nil
}

// envelopeSchema is the envelope renamed <topic>.Envelope, its before and
// after fields both of the before field's schema renamed <topic>.Value.
func (t *logicalTable) envelopeSchema(old *Schema, topic string) (*Schema, error) {
	k := logicalKey{old, topic}
	if s, ok := t.envelopes.Load(k); ok {
		return s.(*Schema), nil
	}
	b := old.field("before")
	if b < 0 {
		return nil, dataErrorf("an envelope without a before field (%s)", old.Name)
	}
	before := old.Fields[b].Schema
	rowName, err := t.name(topic + ".Value")
	if err != nil {
		return nil, err
	}
	row := &Schema{Type: StructT, Name: rowName, Version: before.Version, Doc: before.Doc, Params: before.Params,
		Optional: before.Optional, Fields: before.Fields}
	envName, err := t.name(topic + ".Envelope")
	if err != nil {
		return nil, err
	}
	s := &Schema{Type: StructT, Name: envName, Version: old.Version, Doc: old.Doc, Params: old.Params, Optional: old.Optional,
		Fields: make([]Field, len(old.Fields))}
	for i, f := range old.Fields {
		if f.Name == "before" || f.Name == "after" {
			f.Schema = row
		}
		s.Fields[i] = f
	}
	got, _ := t.envelopes.LoadOrStore(k, s)
	return got.(*Schema), nil
}

func (t *logicalTable) name(proposed string) (string, error) {
	if t.adjust == nil {
		return proposed, nil
	}
	return t.adjust.adjust(proposed)
}

// nameAdjuster is schema.name.adjustment.mode's SchemaNameAdjuster.
type nameAdjuster interface {
	adjust(name string) (string, error)
}

// avroAdjuster makes a name a valid Avro full name: each UTF-16 unit but
// [A-Za-z_] first and [A-Za-z0-9_.] after it replaced by "_" (a leading
// digit kept after it), or under avro_unicode by _uXXXX, where "_" itself
// is replaced. Two names that become one fail Debezium's task: a record
// of the second is poison.
type avroAdjuster struct {
	unicode bool
	seen    sync.Map // adjusted name -> the name it was made of
}

func (a *avroAdjuster) adjust(name string) (string, error) {
	units := utf16.Encode([]rune(name))
	var b strings.Builder
	changed := false
	for i, c := range units {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' && !a.unicode
		digit := '0' <= c && c <= '9'
		if letter || i > 0 && (digit || c == '.') {
			b.WriteByte(byte(c))
			continue
		}
		changed = true
		if !a.unicode {
			b.WriteByte('_')
			if i == 0 && digit {
				b.WriteByte(byte(c))
			}
			continue
		}
		hex := strconv.FormatUint(uint64(c), 16)
		if len(hex) <= 2 {
			hex = "00" + hex
		}
		b.WriteString("_u" + hex)
	}
	if !changed {
		return name, nil
	}
	out := b.String()
	if prev, loaded := a.seen.LoadOrStore(out, name); loaded && prev.(string) != name {
		return "", dataErrorf("The Kafka Connect schema name '%s' is not a valid Avro schema name and its replacement '%s' conflicts with another different schema '%s'", name, out, prev)
	}
	return out, nil
}
