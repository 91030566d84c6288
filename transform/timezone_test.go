package transform

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// newTZ builds a TimezoneConverter from its options; problems lists the
// refusals.
func newTZ(opts map[string]string) (*timezoneConverter, []string) {
	p := &parser{props: map[string]string{}, used: map[string]bool{}}
	for k, v := range opts {
		p.props["transforms.tz."+k] = v
	}
	tr := newTimezoneConverter(p.options("transforms.tz."))
	if tr == nil {
		return nil, p.problems
	}
	return tr.(*timezoneConverter), nil
}

// The values Debezium 3.6.1's TimezoneConverter gives (run on the same
// inputs): rows on both sides of Europe/Berlin's and America/New_York's
// 2026 changes, before the epoch, and at a fixed offset. ZonedTimestamp
// takes the offset its UTC wall time has in the zone (2026-03-29T01:30Z
// is 03:30+02:00 in Berlin, written 02:30+01:00); the epoch types move
// back by it; source's epochs forward by the instant's offset.
func TestTimezoneConversions(t *testing.T) {
	type row struct {
		zts                         string
		ms, us, ns                  int64 // Timestamp (and Connect's), MicroTimestamp, NanoTimestamp
		srcMS                       int64 // source.ts_ms
		wantZTS                     string
		wantMS, wantUS, wantNS, src int64
	}
	cases := map[string][]row{
		"Europe/Berlin": {
			{"2026-03-29T00:59:59.999999Z", 1774745999999, 1774745999999999, 1774745999999999999, 1774745999999,
				"2026-03-29T01:59:59.999999+01:00", 1774742399999, 1774742399999999, 1774742399999999999, 1774749599999},
			{"2026-03-29T01:30:00Z", 1774747800000, 1774747800000000, 1774747800000000000, 1774747800000,
				"2026-03-29T02:30:00+01:00", 1774744200000, 1774744200000000, 1774744200000000000, 1774755000000},
			{"2026-03-29T02:30:00.123Z", 1774751400123, 1774751400123456, 1774751400123456789, 1774751400123,
				"2026-03-29T03:30:00.123+01:00", 1774747800123, 1774747800123456, 1774747800123456789, 1774758600123},
			{"2026-10-25T00:30:00Z", 1792888200000, 1792888200000000, 1792888200000000000, 1792888200000,
				"2026-10-25T02:30:00+02:00", 1792881000000, 1792881000000000, 1792881000000000000, 1792895400000},
			{"2026-10-25T01:30:00Z", 1792891800000, 1792891800000000, 1792891800000000000, 1792891800000,
				"2026-10-25T03:30:00+02:00", 1792884600000, 1792884600000000, 1792884600000000000, 1792895400000},
			{"2026-10-25T02:30:00Z", 1792895400000, 1792895400000000, 1792895400000000000, 1792895400000,
				"2026-10-25T04:30:00+02:00", 1792888200000, 1792888200000000, 1792888200000000000, 1792899000000},
			{"1969-12-31T23:59:59.5Z", -500, -1, -1, -500,
				"1970-01-01T00:59:59.5+01:00", -3600500, -3600000001, -3600000000001, 3599500},
		},
		"America/New_York": {
			{"2026-10-25T01:30:00Z", 1792891800000, 1792891800000000, 1792891800000000000, 1792891800000,
				"2026-10-24T21:30:00-04:00", 1792906200000, 1792906200000000, 1792906200000000000, 1792877400000},
			{"2026-11-01T06:30:00Z", 1793514600000, 1793514600000000, 1793514600000000000, 1793514600000,
				"2026-11-01T01:30:00-05:00", 1793532600000, 1793532600000000, 1793532600000000000, 1793496600000},
			{"1969-12-31T23:59:59.5Z", -500, -1, -1, -500,
				"1969-12-31T18:59:59.5-05:00", 17999500, 17999999999, 17999999999999, -18000500},
		},
		"+05:30": {
			{"2026-03-29T00:59:59.999999Z", 1774745999999, 1774745999999999, 1774745999999999999, 1774745999999,
				"2026-03-29T06:29:59.999999+05:30", 1774726199999, 1774726199999999, 1774726199999999999, 1774765799999},
		},
	}
	for zone, rows := range cases {
		tz, problems := newTZ(map[string]string{"converted.timezone": zone})
		if problems != nil {
			t.Fatal(problems)
		}
		for _, r := range rows {
			got := []any{}
			for _, in := range []struct {
				logical string
				v       any
			}{
				{"io.debezium.time.ZonedTimestamp", r.zts}, {"io.debezium.time.Timestamp", r.ms}, {timestampName, r.ms},
				{"io.debezium.time.MicroTimestamp", r.us}, {"io.debezium.time.NanoTimestamp", r.ns},
			} {
				v, ok, err := tz.convert("f", in.logical, false, in.v)
				if !ok || err != nil {
					t.Fatalf("%s %s %v: %v %v", zone, in.logical, in.v, ok, err)
				}
				got = append(got, v)
			}
			src, _, _ := tz.convert("ts_ms", "", true, r.srcMS)
			got = append(got, src)
			want := []any{r.wantZTS, r.wantMS, r.wantMS, r.wantUS, r.wantNS, r.src}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s:\n got %v\nwant %v", zone, r.zts, got, want)
			}
		}
	}
}

// ZonedTime takes the zone's offset now; the other times Debezium leaves.
func TestTimezoneZonedTimeAndOthers(t *testing.T) {
	for _, tc := range []struct {
		zone, now, in, want string
	}{
		{"Europe/Berlin", "2026-11-29T00:00:00Z", "23:30:00Z", "00:30:00+01:00"},
		{"Europe/Berlin", "2026-11-29T00:00:00Z", "00:15:00.5+02:00", "23:15:00.5+01:00"},
		{"Europe/Berlin", "2026-07-01T00:00:00Z", "12:00:00.123456Z", "14:00:00.123456+02:00"},
		{"America/New_York", "2026-11-29T00:00:00Z", "03:04:05Z", "22:04:05-05:00"},
		{"+05:30", "2026-11-29T00:00:00Z", "23:30:00Z", "05:00:00+05:30"},
	} {
		tz, _ := newTZ(map[string]string{"converted.timezone": tc.zone})
		now, _ := time.Parse(time.RFC3339, tc.now)
		tz.now = func() time.Time { return now }
		got, ok, err := tz.convert("t", "io.debezium.time.ZonedTime", false, tc.in)
		if !ok || err != nil || got != tc.want {
			t.Errorf("%s %s: %v %v %v, want %s", tc.zone, tc.in, got, ok, err, tc.want)
		}
	}
	tz, _ := newTZ(map[string]string{"converted.timezone": "Europe/Berlin"})
	for _, logical := range []string{"io.debezium.time.Date", "io.debezium.time.MicroTime", "io.debezium.time.NanoTime", "io.debezium.time.Time",
		dateName, timeName, "io.debezium.time.IsoTimestamp", ""} {
		if v, ok, err := tz.convert("f", logical, false, int64(5)); ok || err != nil {
			t.Errorf("%s converted: %v %v", logical, v, err)
		}
	}
	if _, _, err := tz.convert("f", "io.debezium.time.ZonedTimestamp", false, "infinity"); err == nil {
		t.Error("an unparsable ZonedTimestamp: no error")
	}
}

// Which fields each list converts, as Debezium 3.6.1 converts them (run
// on the same configurations): topic rules first, then source's table,
// then bare names by topic and table; an item without a prefix takes
// the one before it; a prefix in capitals is a bare name.
func TestTimezoneLists(t *testing.T) {
	micro := &Schema{Type: Int64, Optional: true, Name: "io.debezium.time.MicroTimestamp"}
	row := &Schema{Type: StructT, Optional: true, Name: "srv.public.t.Value", Fields: []Field{{"a", micro}, {"b", micro},
		{"d", &Schema{Type: Int32, Optional: true, Name: "io.debezium.time.Date"}}}}
	i64 := &Schema{Type: Int64}
	src := &Schema{Type: StructT, Name: "io.debezium.connector.postgresql.Source", Fields: []Field{{"table", &Schema{Type: String}},
		{"ts_ms", i64}, {"ts_us", i64}, {"ts_ns", i64}}}
	env := &Schema{Type: StructT, Name: "srv.public.t.Envelope", Fields: []Field{{"before", row}, {"after", row}, {"source", src}, {"op", &Schema{Type: String}}}}
	for _, tc := range []struct {
		option, list, topic, table, want string
	}{
		{"", "", "top", "t", "before.a,before.b,after.a,after.b"},
		{"include.list", "source:t", "top", "t", "before.a,before.b,after.a,after.b"},
		{"include.list", "source:t", "top", "u", ""},
		{"include.list", "topic:top", "top", "u", "before.a,before.b,after.a,after.b"},
		{"include.list", "topic:top", "t", "top", ""},
		{"include.list", "source:t:before.b,t:source.ts_ms", "x", "t", "before.b,source.ts_ms"},
		{"include.list", "source:t:after.a,after.b", "top", "t", "after.a"},
		{"include.list", "x:a,t", "x", "t", "before.a,after.a"},
		{"include.list", "x:a,t", "t", "top", "before.a,before.b,after.a,after.b"},
		{"include.list", "SOURCE:t:a", "t", "top", "before.a,after.a"},
		{"include.list", "t:a:b", "top", "t", "before.a,after.a"},
		{"include.list", "source:t:d", "top", "t", ""},
		{"exclude.list", "source:t", "top", "t", ""},
		{"exclude.list", "source:t", "top", "u", "before.a,before.b,after.a,after.b"},
		{"exclude.list", "source:t:before.b,t:source.ts_ms", "top", "t", "before.a,after.a,after.b,source.ts_us,source.ts_ns"},
		{"exclude.list", "source:t:after.a,after.b", "top", "t", "before.a,before.b,after.b"},
		{"exclude.list", "x:a,t", "x", "t", "before.b,after.b"},
		{"exclude.list", "x:a,t", "top", "t", ""},
	} {
		opts := map[string]string{"converted.timezone": "+01:00"}
		if tc.option != "" {
			opts[tc.option] = tc.list
		}
		tz, problems := newTZ(opts)
		if problems != nil {
			t.Fatalf("%s %q: %v", tc.option, tc.list, problems)
		}
		mk := func() *Struct { return &Struct{Schema: row, Values: []any{int64(1e10), int64(1e10), int64(5)}} }
		before, after := mk(), mk()
		source := &Struct{Schema: src, Values: []any{tc.table, int64(0), int64(0), int64(0)}}
		r := &Record{Topic: tc.topic, ValueSchema: env, Value: &Struct{Schema: env, Values: []any{before, after, source, "u"}}}
		if keep, err := tz.apply(r); !keep || err != nil {
			t.Fatalf("%v %v", keep, err)
		}
		e := r.Value.(*Struct)
		var changed []string
		for pi, part := range []string{"before", "after"} {
			for fi, f := range []string{"a", "b"} {
				if e.Values[pi].(*Struct).Values[fi] != int64(1e10) {
					changed = append(changed, part+"."+f)
				}
			}
			if e.Values[pi].(*Struct).Values[2] != int64(5) {
				changed = append(changed, part+".d")
			}
		}
		for fi, f := range []string{"ts_ms", "ts_us", "ts_ns"} {
			if e.Values[2].(*Struct).Values[fi+1] != int64(0) {
				changed = append(changed, "source."+f)
			}
		}
		if got := strings.Join(changed, ","); got != tc.want {
			t.Errorf("%s %q, topic %s, table %s: converted %q, want %q", tc.option, tc.list, tc.topic, tc.table, got, tc.want)
		}
		// The record's own structs are left as they were.
		if before.Values[0] != int64(1e10) || after.Values[0] != int64(1e10) || source.Values[1] != int64(0) {
			t.Errorf("%s %q: the input record changed", tc.option, tc.list)
		}
	}
}

// What Debezium refuses when its task starts, and what it accepts only to
// fail at the first time it converts, pgoutbox refuses at start.
func TestTimezoneOptions(t *testing.T) {
	for _, tc := range []struct {
		opts    map[string]string
		refused string // the option named; "" accepted
	}{
		{map[string]string{"converted.timezone": "Europe/Berlin"}, ""},
		{map[string]string{"converted.timezone": "+05:30"}, ""},
		{map[string]string{"converted.timezone": "-03:00:30"}, ""},
		{map[string]string{"converted.timezone": "UTC"}, ""},
		{map[string]string{}, "converted.timezone"},
		{map[string]string{"converted.timezone": ""}, "converted.timezone"},
		{map[string]string{"converted.timezone": " Europe/Berlin "}, "converted.timezone"},
		{map[string]string{"converted.timezone": "Z"}, "converted.timezone"},
		{map[string]string{"converted.timezone": "GMT+0"}, "converted.timezone"},
		{map[string]string{"converted.timezone": "Local"}, "converted.timezone"},
		{map[string]string{"converted.timezone": "posix/Europe/Berlin"}, "converted.timezone"},
		{map[string]string{"converted.timezone": "Mars/Olympus"}, "converted.timezone"},
		{map[string]string{"converted.timezone": "+19:00"}, "converted.timezone"}, // Debezium: fails at the first record
		{map[string]string{"converted.timezone": "PST"}, "converted.timezone"},    // likewise
		{map[string]string{"converted.timezone": "EST"}, "converted.timezone"},    // likewise
		{map[string]string{"converted.timezone": "SystemV/EST5"}, "converted.timezone"},
		{map[string]string{"converted.timezone": "UTC", "include.list": "source:t1:f1,t2:f2"}, ""},
		{map[string]string{"converted.timezone": "UTC", "include.list": "source:t1,t2,t3"}, ""},
		{map[string]string{"converted.timezone": "UTC", "include.list": "topic:x.y.z:after.f"}, ""},
		{map[string]string{"converted.timezone": "UTC", "exclude.list": "source:t,"}, ""},
		{map[string]string{"converted.timezone": "UTC", "exclude.list": "source:t,,u"}, ""},
		{map[string]string{"converted.timezone": "UTC", "include.list": ""}, "include.list"},
		{map[string]string{"converted.timezone": "UTC", "include.list": " "}, "include.list"},
		{map[string]string{"converted.timezone": "UTC", "include.list": "t1"}, "include.list"},
		{map[string]string{"converted.timezone": "UTC", "include.list": "topic:a-b"}, "include.list"},
		{map[string]string{"converted.timezone": "UTC", "include.list": "source:t1:f1,source:t2:f2"}, "include.list"},
		{map[string]string{"converted.timezone": "UTC", "include.list": "source:a:b:c"}, "include.list"},
		{map[string]string{"converted.timezone": "UTC", "exclude.list": ",source:t"}, "exclude.list"},
		{map[string]string{"converted.timezone": "UTC", "include.list": "source:t", "exclude.list": "source:u"}, "exclude.list"},
	} {
		_, problems := newTZ(tc.opts)
		got := ""
		if len(problems) > 0 {
			got = strings.TrimPrefix(strings.SplitN(problems[0], ":", 2)[0], "transforms.tz.")
		}
		if got != tc.refused {
			t.Errorf("%v: refused %q (%v), want %q", tc.opts, got, problems, tc.refused)
		}
	}
}

// A NULL whose field has a default is converted from the default, which
// takes its place, as Struct.get and put do in Debezium.
func TestTimezoneDefault(t *testing.T) {
	tz, _ := newTZ(map[string]string{"converted.timezone": "Europe/Berlin"})
	us := &Schema{Type: Int64, Optional: true, Name: "io.debezium.time.MicroTimestamp", Default: int64(1774751400000000), HasDefault: true}
	row := &Schema{Type: StructT, Optional: true, Name: "x.Value", Fields: []Field{{"us", us}}}
	src := &Schema{Type: StructT, Fields: []Field{{"table", &Schema{Type: String}}}}
	env := &Schema{Type: StructT, Name: "x.Envelope", Fields: []Field{{"before", row}, {"after", row}, {"source", src}}}
	r := &Record{Topic: "x", ValueSchema: env, Value: &Struct{Schema: env, Values: []any{nil, &Struct{Schema: row, Values: []any{nil}},
		&Struct{Schema: src, Values: []any{"t"}}}}}
	if _, err := tz.apply(r); err != nil {
		t.Fatal(err)
	}
	if got := r.Value.(*Struct).Values[1].(*Struct).Values[0]; got != int64(1774747800000000) {
		t.Errorf("got %v, want 1774747800000000", got)
	}
}

// A record that is not a change event (the Outbox Event Router's, a
// tombstone) passes as it is.
func TestTimezoneNotEnvelope(t *testing.T) {
	tz, _ := newTZ(map[string]string{"converted.timezone": "Europe/Berlin"})
	ts := &Schema{Type: Int64, Name: timestampName}
	s := &Schema{Type: StructT, Name: "com.example.Order", Fields: []Field{{"at", ts}}}
	v := &Struct{Schema: s, Values: []any{int64(1774747800000)}}
	for _, r := range []*Record{
		{Topic: "outbox.event.Order", ValueSchema: s, Value: v},
		{Topic: "outbox.event.Order", ValueSchema: &Schema{Type: String, Optional: true}, Value: `{"n":1}`},
		{Topic: "outbox.event.Order"},
	} {
		before := fmt.Sprint(r.Value)
		if keep, err := tz.apply(r); !keep || err != nil || fmt.Sprint(r.Value) != before {
			t.Errorf("%v: %v %v %v", before, keep, err, r.Value)
		}
	}
}
