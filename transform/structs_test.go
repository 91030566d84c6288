package transform

import (
	"errors"
	"strings"
	"testing"
)

// ExtractField, HoistField, ValueToKey and MaskField on the router's
// record (a struct value of envelope placements, a string key), as Kafka
// Connect 4.3 applies them: the key and value lines afterwards, or the
// error.
func TestStructTransforms(t *testing.T) {
	const valueSchema = `{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},{"type":"string","optional":false,"field":"eventType"},{"type":"string","optional":true,"default":"none","field":"tenant"}],"optional":false,"name":"shop.public.outbox.Order.Value"}`
	for _, tc := range []struct {
		name       string
		props      map[string]string
		key, value string // "" for unchanged
		err        string
	}{
		{"ExtractField$Value", map[string]string{"transforms": "x", "transforms.x.type": kt + "ExtractField$Value", "transforms.x.field": "eventType"},
			"", `{"schema":{"type":"string","optional":false},"payload":"OrderCreated"}`, ""},
		{"ExtractField$Value of a null field, with its default", map[string]string{"transforms": "x", "transforms.x.type": kt + "ExtractField$Value", "transforms.x.field": "tenant"},
			"", `{"schema":{"type":"string","optional":true,"default":"none"},"payload":"none"}`, ""},
		{"ExtractField$Value of a field it lacks", map[string]string{"transforms": "x", "transforms.x.type": kt + "ExtractField$Value", "transforms.x.field": "nope"},
			"", "", "Unknown field: nope"},
		{"ExtractField$Value V2 through a string", map[string]string{"transforms": "x", "transforms.x.type": kt + "ExtractField$Value",
			"transforms.x.field": "eventType.a", "transforms.x.field.syntax.version": "V2"}, "", "", "Cannot look up fields on non-struct type"},
		{"HoistField$Value", map[string]string{"transforms": "x", "transforms.x.type": kt + "HoistField$Value", "transforms.x.field": "event"},
			"", `{"schema":{"type":"struct","fields":[` + strings.TrimSuffix(valueSchema, "}") + `,"field":"event"}],"optional":false},"payload":{"event":{"payload":"{\"n\":1}","eventType":"OrderCreated","tenant":"none"}}}`, ""},
		{"ValueToKey", map[string]string{"transforms": "x", "transforms.x.type": kt + "ValueToKey", "transforms.x.fields": "eventType,tenant"},
			`{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"eventType"},{"type":"string","optional":true,"default":"none","field":"tenant"}],"optional":false},"payload":{"eventType":"OrderCreated","tenant":"none"}}`, "", ""},
		{"ValueToKey of a field it lacks", map[string]string{"transforms": "x", "transforms.x.type": kt + "ValueToKey", "transforms.x.fields": "nope"},
			"", "", "Field does not exist: nope"},
		{"MaskField$Value", map[string]string{"transforms": "x", "transforms.x.type": kt + "MaskField$Value", "transforms.x.fields": "eventType,tenant"},
			"", `{"schema":` + valueSchema + `,"payload":{"payload":"{\"n\":1}","eventType":"","tenant":""}}`, ""},
		{"MaskField$Value with a replacement", map[string]string{"transforms": "x", "transforms.x.type": kt + "MaskField$Value", "transforms.x.fields": "payload", "transforms.x.replacement": "***"},
			"", `{"schema":` + valueSchema + `,"payload":{"payload":"***","eventType":"OrderCreated","tenant":"none"}}`, ""},
		{"Flatten$Value", map[string]string{"transforms": "h,f", "transforms.h.type": kt + "HoistField$Value", "transforms.h.field": "e",
			"transforms.f.type": kt + "Flatten$Value", "transforms.f.delimiter": "_"},
			"", `{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"e_payload"},{"type":"string","optional":false,"field":"e_eventType"},{"type":"string","optional":true,"default":"none","field":"e_tenant"}],"optional":false},"payload":{"e_payload":"{\"n\":1}","e_eventType":"OrderCreated","e_tenant":"none"}}`, ""},
		{"MaskField$Key of the router's string key after HoistField$Key", map[string]string{"transforms": "h,m", "transforms.h.type": kt + "HoistField$Key", "transforms.h.field": "id",
			"transforms.m.type": kt + "MaskField$Key", "transforms.m.fields": "id"},
			`{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":false},"payload":{"id":""}}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRecord()
			before := dump(t, r)
			keep, err := chainOf(t, tc.props).Apply(&r)
			if tc.err != "" {
				var de *DataError
				if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want a DataError with %q", err, tc.err)
				}
				return
			}
			if err != nil || !keep {
				t.Fatalf("keep %v, err %v", keep, err)
			}
			got := dump(t, r)
			want := before
			for _, part := range []struct{ name, line string }{{"key", tc.key}, {"value", tc.value}} {
				if part.line == "" {
					continue
				}
				i := strings.Index(want, part.name+"=")
				j := i + strings.IndexByte(want[i:], '\n')
				want = want[:i] + part.name + "=" + part.line + want[j:]
			}
			if got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// MaskField of a Decimal writes the mask at the field's scale, as
// Kafka Connect takes it only there; bytes cannot be masked.
func TestMaskFieldTypes(t *testing.T) {
	dec := &Schema{Type: Bytes, Name: decimalName, Params: []Param{{Key: "scale", Value: "2"}}}
	dec0 := &Schema{Type: Bytes, Name: decimalName, Params: []Param{{Key: "scale", Value: "0"}}}
	rep := "-9.50"
	for _, tc := range []struct {
		name string
		m    maskField
		s    *Schema
		x    any
		want any
		err  string
	}{
		{"a decimal of scale 0", maskField{}, dec0, []byte{5}, []byte{0}, ""},
		{"a decimal of scale 2", maskField{}, dec, []byte{5}, nil, "Schema has scale 2, value has scale 0"},
		{"a decimal's replacement", maskField{replacement: &rep}, dec, []byte{5}, []byte{0xfc, 0x4a}, ""},
		{"an int8's replacement out of range", maskField{replacement: new(string)}, &Schema{Type: Int8}, int64(1), nil, "Unable to convert"},
		{"a timestamp", maskField{}, &Schema{Type: Int64, Name: timestampName}, int64(5), int64(0), ""},
		{"a float", maskField{}, &Schema{Type: Float64}, 1.5, float64(0), ""},
		{"bytes", maskField{}, &Schema{Type: Bytes}, []byte{1}, nil, "Cannot mask value of type"},
		{"a timestamp's replacement", maskField{replacement: &rep}, &Schema{Type: Int64, Name: timestampName}, int64(5), nil, "with custom replacement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.m.mask(tc.s, tc.x)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, ok := tc.want.([]byte); ok {
				if g, _ := got.([]byte); string(g) != string(b) {
					t.Fatalf("%x, want %x", got, b)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("%v (%T), want %v (%T)", got, got, tc.want, tc.want)
			}
		})
	}
}
