package transform

import (
	"bytes"
	"math"
	"math/big"
	"slices"
	"strings"
)

// ChangedStateClass is Debezium's ExtractChangedRecordState.
const ChangedStateClass = "io.debezium.transforms.ExtractChangedRecordState"

// changedState is ExtractChangedRecordState (Debezium 3.6.1): a change
// event gets a header naming the after fields whose value differs from
// before's (header.changed.name) and one naming those that do not
// (header.unchanged.name), each an optional array of optional strings
// whose schema is named after the header. Without both before and after
// (an insert, a snapshot read, a delete, an update under REPLICA
// IDENTITY DEFAULT) both lists are empty, and still added. A record that
// is not a change event (a null value, a schema not named ….Envelope:
// the Outbox Event Router's records, ExtractNewRecordState's rows)
// passes unchanged.
type changedState struct {
	changed, unchanged *Schema // nil: that header is not added
}

func newChangedState(o *options) transformation {
	t := &changedState{}
	// Debezium reads both untrimmed and accepts any value; a blank one
	// adds no header.
	if name, ok := o.raw("header.changed.name"); ok && javaTrim(name) != "" {
		t.changed = changedStateSchema(name)
	}
	if name, ok := o.raw("header.unchanged.name"); ok && javaTrim(name) != "" {
		t.unchanged = changedStateSchema(name)
	}
	if o.failed {
		return nil
	}
	return t
}

func changedStateSchema(name string) *Schema {
	return &Schema{Type: Array, Optional: true, Name: name, Items: &Schema{Type: String, Optional: true}}
}

func (t *changedState) apply(r *Record) (bool, error) {
	if r.Value == nil || r.ValueSchema == nil || !strings.HasSuffix(r.ValueSchema.Name, ".Envelope") {
		return true, nil
	}
	env, err := requireStruct(r.ValueSchema, r.Value, "Record value should be struct.")
	if err != nil {
		return false, err
	}
	after, err := envelopePart(env, "after", "After value should be struct.")
	if err != nil {
		return false, err
	}
	before, err := envelopePart(env, "before", "Before value should be struct.")
	if err != nil {
		return false, err
	}
	changed, unchanged := make([]any, 0), make([]any, 0)
	if after != nil && before != nil {
		for i, f := range after.Schema.Fields {
			j := before.Schema.field(f.Name)
			if j < 0 {
				return false, dataErrorf("%s is not a valid field name", f.Name)
			}
			if javaEquals(f.Schema, after.Values[i], before.Values[j], false) {
				unchanged = append(unchanged, f.Name)
			} else {
				changed = append(changed, f.Name)
			}
		}
	}
	if t.changed != nil {
		r.Headers = append(slices.Clip(r.Headers), Header{Key: t.changed.Name, Schema: t.changed, Value: changed})
	}
	if t.unchanged != nil {
		r.Headers = append(slices.Clip(r.Headers), Header{Key: t.unchanged.Name, Schema: t.unchanged, Value: unchanged})
	}
	return true, nil
}

// envelopePart is the envelope's before or after struct, nil for a null;
// a field the envelope lacks, or one that is not a struct, fails as
// Struct.get and requireStruct fail in Debezium.
func envelopePart(env *Struct, name, purpose string) (*Struct, error) {
	i := env.Schema.field(name)
	if i < 0 {
		return nil, dataErrorf("%s is not a valid field name", name)
	}
	v := env.Values[i]
	if v == nil {
		return nil, nil
	}
	return requireStruct(env.Schema.Fields[i].Schema, v, purpose)
}

// javaEquals is Objects.equals on the Java objects Kafka Connect holds a
// change event's values in. inStruct tells a value compared as a
// Struct's field (Arrays.deepEquals), where a byte[] is compared by its
// contents; elsewhere a byte[] (a bit string's) equals only itself, so
// two decoded from the WAL never do. bytea is a ByteBuffer and a
// Decimal a BigDecimal, both compared by value.
func javaEquals(s *Schema, a, b any, inStruct bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		// Double.equals and Float.equals compare bits: NaN equals NaN,
		// 0.0 does not equal -0.0.
		return ok && (math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y))
	case []byte:
		y, ok := b.([]byte)
		switch {
		case !ok:
			return false
		case s.logical() == decimalName:
			// BigDecimal.equals: the unscaled value and the scale, which
			// the field's schema gives both.
			return signedInt(x).Cmp(signedInt(y)) == 0
		case s != nil && s.Name == bitsName && !inStruct:
			return false
		}
		return bytes.Equal(x, y)
	case *Struct:
		y, ok := b.(*Struct)
		if !ok || len(x.Values) != len(y.Values) || x.Schema.Name != y.Schema.Name {
			return false
		}
		for i, f := range x.Schema.Fields {
			if i >= len(y.Schema.Fields) || y.Schema.Fields[i].Name != f.Name || !javaEquals(f.Schema, x.Values[i], y.Values[i], true) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !javaEquals(items(s), x[i], y[i], false) {
				return false
			}
		}
		return true
	case []MapEntry:
		y, ok := b.([]MapEntry)
		if !ok || len(x) != len(y) {
			return false
		}
		var ks, vs *Schema
		if s != nil {
			ks, vs = s.Keys, s.Values
		}
		// Map.equals: each entry found by its key, order aside.
		for _, e := range x {
			found := false
			for _, g := range y {
				if javaEquals(ks, e.Key, g.Key, false) {
					found = javaEquals(vs, e.Value, g.Value, false)
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return a == b
}

// signedInt reads a big-endian two's complement integer.
func signedInt(b []byte) *big.Int {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return n
}
