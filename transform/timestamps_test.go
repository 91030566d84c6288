package transform

import (
	"testing"
	"time"
)

// parseDate reads as a lenient SimpleDateFormat in UTC: abutting numeric
// fields by their widths, more digits than letters, values carried over,
// text after the pattern ignored, zone offsets.
func TestParseDate(t *testing.T) {
	for _, tc := range []struct {
		pattern, in string
		want        string // RFC 3339 with milliseconds; "" for an error
	}{
		{"yyyy-MM-dd'T'HH:mm:ss'Z'", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.000Z"},
		{"yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'", "2026-01-02T03:04:05.123456Z", "2026-01-02T03:06:08.456Z"},
		{"yyyyMMddHHmmss", "20260102030405", "2026-01-02T03:04:05.000Z"},
		{"yyyy-MM-dd", "2026-13-32 and more", "2027-02-01T00:00:00.000Z"},
		{"dd MMM yyyy hh:mm a", "02 feb 2026 01:30 PM", "2026-02-02T13:30:00.000Z"},
		{"EEE, d MMMM yyyy HH:mm Z", "Mon, 2 February 2026 10:00 +0130", "2026-02-02T08:30:00.000Z"},
		{"yyyy-MM-dd'T'HH:mmX", "2026-02-02T10:00-05:00", "2026-02-02T15:00:00.000Z"},
		{"yyyy-MM-dd", "2026/01/02", ""},
		{"yyyy-MM-dd", "x", ""},
	} {
		layout, err := parseDateFormat(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseDate(layout, tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s %q: %v, want an error", tc.pattern, tc.in, got)
			}
			continue
		}
		if err != nil || got.Format("2006-01-02T15:04:05.000Z07:00") != tc.want {
			t.Errorf("%s %q: %v %v, want %s", tc.pattern, tc.in, got.Format(time.RFC3339Nano), err, tc.want)
		}
	}
}

// The whole part converted, its schema the target's with its
// optionality; each source type through its milliseconds.
func TestTimestampConverter(t *testing.T) {
	v1 := int32(1)
	ts := &Schema{Type: Int64, Name: timestampName, Version: &v1, Optional: true}
	for _, tc := range []struct {
		props map[string]string
		s     *Schema
		in    any
		want  any
	}{
		{map[string]string{"target.type": "Date"}, ts, int64(1767323045123), int64(20455)},
		{map[string]string{"target.type": "Time"}, ts, int64(1767323045123), int64(3*3600e3 + 4*60e3 + 5123)},
		{map[string]string{"target.type": "unix", "unix.precision": "microseconds"}, ts, int64(1767323045123), int64(1767323045123000)},
		{map[string]string{"target.type": "string", "format": "yyyy-MM-dd HH:mm"}, ts, int64(1767323045123), "2026-01-02 03:04"},
		{map[string]string{"target.type": "Timestamp", "unix.precision": "nanoseconds"}, &Schema{Type: Int64}, int64(1767323045123456789), int64(1767323045123)},
		{map[string]string{"target.type": "Timestamp"}, &Schema{Type: Int32, Name: dateName, Version: &v1}, int64(20455), int64(20455 * dayMillis)},
		{map[string]string{"target.type": "Date"}, ts, int64(-1), int64(-1)},
	} {
		props := map[string]string{"transforms": "c", "transforms.c.type": kt + "TimestampConverter$Value"}
		for k, v := range tc.props {
			props["transforms.c."+k] = v
		}
		r := Record{Topic: "t", ValueSchema: tc.s, Value: tc.in}
		if _, err := chainOf(t, props).Apply(&r); err != nil {
			t.Fatalf("%v: %v", tc.props, err)
		}
		if r.Value != tc.want || r.ValueSchema.Optional != tc.s.Optional {
			t.Errorf("%v of %v: %v (%T, optional %v), want %v", tc.props, tc.in, r.Value, r.Value, r.ValueSchema.Optional, tc.want)
		}
	}
}
