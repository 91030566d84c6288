package transform

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/schema"
)

// updateEvent is changeEvent made an update: before holds the old
// values, nil for a null before (REPLICA IDENTITY DEFAULT).
func updateEvent(before []any, note any) Record {
	r := changeEvent(note)
	env := r.Value.(*Struct)
	vals := slices.Clone(env.Values)
	if before != nil {
		vals[0] = &Struct{Schema: r.ValueSchema.Fields[0].Schema, Values: before}
	}
	vals[4] = "u"
	r.Value = &Struct{Schema: env.Schema, Values: vals}
	return r
}

func newChanged(t *testing.T, props map[string]string) *changedState {
	t.Helper()
	p := &parser{props: props, used: map[string]bool{}}
	tr := newChangedState(p.options("transforms.c."))
	if tr == nil || len(p.problems) > 0 {
		t.Fatal(p.problems)
	}
	return tr.(*changedState)
}

// headerText is each header as SimpleHeaderConverter writes it.
func headerText(t *testing.T, r Record) []string {
	t.Helper()
	msg, err := r.Message(Converters{Key: schema.ConvString, Value: schema.ConvJSON, Header: schema.ConvString})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, h := range msg.Headers {
		out = append(out, h.Key+"="+string(h.Value))
	}
	return out
}

// ExtractChangedRecordState as Debezium 3.6.1 applies it
// (ExtractChangedRecordStateTest): the after fields that differ from
// before's, and those that do not, in after's order; both headers empty
// without a before or an after, and added still.
func TestChangedState(t *testing.T) {
	both := map[string]string{"transforms.c.header.changed.name": "Changed", "transforms.c.header.unchanged.name": "Unchanged"}
	for _, c := range []struct {
		name  string
		props map[string]string
		r     Record
		want  []string
	}{
		{"insert", both, changeEvent("x"), []string{"Changed=[]", "Unchanged=[]"}},
		{"update", both, updateEvent([]any{"k-1", "old"}, "new"), []string{`Changed=["note"]`, `Unchanged=["id"]`}},
		{"update to null", both, updateEvent([]any{"k-1", "old"}, nil), []string{`Changed=["note"]`, `Unchanged=["id"]`}},
		{"update, nothing changed", both, updateEvent([]any{"k-1", "same"}, "same"), []string{"Changed=[]", `Unchanged=["id","note"]`}},
		{"update without before", both, updateEvent(nil, "new"), []string{"Changed=[]", "Unchanged=[]"}},
		{"changed only", map[string]string{"transforms.c.header.changed.name": "Changed"}, updateEvent([]any{"k-0", "old"}, "new"), []string{`Changed=["id","note"]`}},
		{"unchanged only", map[string]string{"transforms.c.header.unchanged.name": "Unchanged"}, updateEvent([]any{"k-0", "old"}, "new"), []string{"Unchanged=[]"}},
		{"none", map[string]string{}, updateEvent([]any{"k-0", "old"}, "new"), nil},
		{"blank names", map[string]string{"transforms.c.header.changed.name": " ", "transforms.c.header.unchanged.name": ""}, changeEvent("x"), nil},
		{"untrimmed name", map[string]string{"transforms.c.header.changed.name": " Changed "}, changeEvent("x"), []string{" Changed =[]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			r.Headers = []Header{{Key: "first", Schema: &Schema{Type: String}, Value: "kept"}}
			if keep, err := newChanged(t, c.props).apply(&r); !keep || err != nil {
				t.Fatal(keep, err)
			}
			if got := headerText(t, r); !slices.Equal(got, append([]string{"first=kept"}, c.want...)) {
				t.Errorf("headers %q, want first=kept then %q", got, c.want)
			}
		})
	}

	// The header's schema is an optional array of optional strings named
	// after the header, as JsonConverter with schemas shows it.
	r := changeEvent("x")
	if _, err := newChanged(t, both).apply(&r); err != nil {
		t.Fatal(err)
	}
	msg, err := r.Message(Converters{Key: schema.ConvString, Value: schema.ConvJSON, Header: schema.ConvJSONSchemas})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"schema":{"type":"array","items":{"type":"string","optional":true},"optional":true,"name":"Changed"},"payload":[]}`; string(msg.Headers[0].Value) != want {
		t.Errorf("header %s, want %s", msg.Headers[0].Value, want)
	}
}

// Records that are not change events pass unchanged, as Debezium passes
// them (isValidEnvelope: the value's schema name); an envelope that is
// not one fails as Debezium's task fails.
func TestChangedStateNotChangeEvents(t *testing.T) {
	tr := newChanged(t, map[string]string{"transforms.c.header.changed.name": "Changed"})
	router := testRecord()
	tomb := changeEvent("x")
	tomb.Value = nil
	row := changeEvent("x")
	if _, err := newNewState((&parser{props: map[string]string{}, used: map[string]bool{}}).options("transforms.u.")).apply(&row); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Record{"router": router, "tombstone": tomb, "unwrapped": row} {
		n := len(r.Headers)
		if keep, err := tr.apply(&r); !keep || err != nil || len(r.Headers) != n {
			t.Errorf("%s: %v %v, headers %+v", name, keep, err, r.Headers)
		}
	}

	noAfter := changeEvent("x")
	s := *noAfter.ValueSchema
	s.Fields = slices.DeleteFunc(slices.Clone(s.Fields), func(f Field) bool { return f.Name == "after" })
	noAfter.ValueSchema = &s
	noAfter.Value = &Struct{Schema: &s, Values: []any{nil, nil, nil, "c", int64(9)}}
	notStruct := changeEvent("x")
	notStruct.Value = "text"
	for name, c := range map[string]struct {
		r    Record
		want string
	}{
		"no after":   {noAfter, "after is not a valid field name"},
		"not struct": {notStruct, "Only Struct objects supported for [Record value should be struct.], found: java.lang.String"},
	} {
		r := c.r
		_, err := tr.apply(&r)
		if _, ok := err.(*DataError); !ok || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a DataError with %q", name, err, c.want)
		}
	}
}

// Objects.equals on the Java objects the connector's values are.
func TestChangedStateEquals(t *testing.T) {
	dec := &Schema{Type: Bytes, Name: decimalName, Params: []Param{{"scale", "2"}}}
	bits := &Schema{Type: Bytes, Name: bitsName}
	vsd := &Schema{Type: StructT, Name: "io.debezium.data.VariableScaleDecimal", Fields: []Field{
		{"scale", &Schema{Type: Int32}}, {"value", &Schema{Type: Bytes}}}}
	bitsInStruct := &Schema{Type: StructT, Name: "s", Fields: []Field{{"b", bits}}}
	hstore := &Schema{Type: Map, Keys: &Schema{Type: String}, Values: &Schema{Type: String, Optional: true}}
	for _, c := range []struct {
		name string
		s    *Schema
		a, b any
		want bool
	}{
		{"text", &Schema{Type: String}, "a", "a", true},
		{"ints", &Schema{Type: Int64}, int64(1), int64(2), false},
		{"null and value", &Schema{Type: String}, nil, "a", false},
		{"nulls", &Schema{Type: String}, nil, nil, true},
		{"NaN", &Schema{Type: Float64}, math.NaN(), math.NaN(), true},
		{"signed zeros", &Schema{Type: Float64}, 0.0, math.Copysign(0, -1), false},
		{"bytea", &Schema{Type: Bytes}, []byte{1, 2}, []byte{1, 2}, true},
		{"decimal", dec, []byte{0xff}, []byte{0xff}, true},
		{"decimal sign", dec, []byte{0xff}, []byte{0x00, 0xff}, false},
		{"bit string", bits, []byte{1}, []byte{1}, false},
		{"bit string in a struct", bitsInStruct, &Struct{bitsInStruct, []any{[]byte{1}}}, &Struct{bitsInStruct, []any{[]byte{1}}}, true},
		{"variable scale", vsd, &Struct{vsd, []any{int64(2), []byte{5}}}, &Struct{vsd, []any{int64(2), []byte{5}}}, true},
		{"variable scale, other scale", vsd, &Struct{vsd, []any{int64(2), []byte{5}}}, &Struct{vsd, []any{int64(3), []byte{5}}}, false},
		{"array", &Schema{Type: Array, Items: &Schema{Type: String}}, []any{"a", "b"}, []any{"a", "b"}, true},
		{"array order", &Schema{Type: Array, Items: &Schema{Type: String}}, []any{"a", "b"}, []any{"b", "a"}, false},
		{"map order", hstore, []MapEntry{{"a", "1"}, {"b", nil}}, []MapEntry{{"b", nil}, {"a", "1"}}, true},
		{"map value", hstore, []MapEntry{{"a", "1"}}, []MapEntry{{"a", "2"}}, false},
	} {
		if got := javaEquals(c.s, c.a, c.b, false); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A configuration naming the class runs it, and its headers survive
// ExtractNewRecordState after it.
func TestChangedStateConfigured(t *testing.T) {
	ch, ignored, err := Parse(Config{Props: map[string]string{
		"transforms":                             "changes,unwrap",
		"transforms.changes.type":                ChangedStateClass,
		"transforms.changes.header.changed.name": "Changed",
		"transforms.unwrap.type":                 NewStateClass,
	}})
	if err != nil || len(ignored) > 0 {
		t.Fatal(err, ignored)
	}
	r := changeEvent("x")
	if keep, err := ch.Apply(&r); !keep || err != nil {
		t.Fatal(keep, err)
	}
	if got := headerText(t, r); !slices.Equal(got, []string{"Changed=[]"}) || r.ValueSchema.Name != "shop.public.outbox.Value" {
		t.Errorf("headers %q, value %s: the header survives the unwrap", got, r.ValueSchema.Name)
	}
}
