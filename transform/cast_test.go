package transform

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/pgoutbox/pgoutbox/schema"
)

// castValue casts as Java does: narrowing keeps the low bits, a double
// is rounded toward zero and saturated, strings parse as Java's parse
// methods, toString writes Java's text.
func TestCastValue(t *testing.T) {
	dec := &Schema{Type: Bytes, Name: decimalName, Params: []Param{{Key: "scale", Value: "2"}}}
	v1 := int32(1)
	for _, tc := range []struct {
		s    *Schema
		in   any
		typ  Type
		want any
		err  string
	}{
		{&Schema{Type: Int64}, int64(70000), Int16, int64(4464), ""},
		{&Schema{Type: Int64}, int64(-129), Int8, int64(127), ""},
		{&Schema{Type: Float64}, 1e10, Int32, int64(math.MaxInt32), ""},
		{&Schema{Type: Float64}, math.NaN(), Int64, int64(0), ""},
		{&Schema{Type: Float64}, -2.7, Int8, int64(-2), ""},
		{&Schema{Type: Float64}, 0.5, Boolean, false, ""},
		{&Schema{Type: Float64}, 1e10, String, "1.0E10", ""},
		{&Schema{Type: Float32}, 1.5, String, "1.5", ""},
		{dec, []byte{0xfc, 0xe1}, Int32, int64(-7), ""}, // -7.99
		{dec, []byte{0x04, 0xe2}, Float64, 12.5, ""},
		{dec, []byte{0x04, 0xe2}, String, "12.50", ""},
		{&Schema{Type: Boolean}, true, Int8, int64(1), ""},
		{&Schema{Type: String}, "+42", Int64, int64(42), ""},
		{&Schema{Type: String}, "+-42", Int64, nil, "out of range"},
		{&Schema{Type: String}, "128", Int8, nil, "out of range"},
		{&Schema{Type: String}, " 1.5f", Float64, 1.5, ""},
		{&Schema{Type: String}, "TRUE", Boolean, true, ""},
		{&Schema{Type: String}, "yes", Boolean, false, ""},
		{&Schema{Type: Bytes}, []byte("hi"), String, "aGk=", ""},
		{&Schema{Type: Bytes}, []byte("hi"), Int32, nil, "Unexpected type"},
		{&Schema{Type: Int64, Name: timestampName, Version: &v1}, int64(1767323045678), String, "2026-01-02T03:04:05.678Z", ""},
		{&Schema{Type: Int64, Name: timestampName, Version: &v1}, int64(1767323045678), Int64, int64(1767323045678), ""},
		{&Schema{Type: StructT}, &Struct{}, String, nil, "does not support casting from STRUCT"},
	} {
		got, err := castValue(tc.s, tc.in, tc.typ)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %v to %s: %v, %v; want an error with %q", tc.s.Type, tc.in, tc.typ, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v %v to %s: %v (%T), %v; want %v (%T)", tc.s.Type, tc.in, tc.typ, got, got, err, tc.want, tc.want)
		}
	}
}

// Kafka's number converters write their type as its serializer does, and
// fail on another.
func TestEncodeNumber(t *testing.T) {
	v1 := int32(1)
	for _, tc := range []struct {
		conv string
		s    *Schema
		v    any
		want string // hex; "" for null
		err  bool
	}{
		{"long", &Schema{Type: Int64}, int64(-7), "fffffffffffffff9", false},
		{"integer", &Schema{Type: Int32}, int64(1042), "00000412", false},
		{"short", &Schema{Type: Int16}, int64(-2), "fffe", false},
		{"double", &Schema{Type: Float64}, 1.5, "3ff8000000000000", false},
		{"float", &Schema{Type: Float32}, 1.5, "3fc00000", false},
		{"boolean", &Schema{Type: Boolean}, true, "01", false},
		{"long", &Schema{Type: Int64, Optional: true}, nil, "", false},
		{"long", &Schema{Type: Int32}, int64(1), "", true},
		{"long", &Schema{Type: Int64, Name: timestampName, Version: &v1}, int64(1), "", true},
		{"integer", &Schema{Type: String}, "1", "", true},
	} {
		b, err := encodePart(schema.Converter(tc.conv), false, tc.s, tc.v)
		if (err != nil) != tc.err || fmt.Sprintf("%x", b) != tc.want {
			t.Errorf("%s of %v (%s): %x, %v; want %s, error %v", tc.conv, tc.v, tc.s.Type, b, err, tc.want, tc.err)
		}
	}
}
