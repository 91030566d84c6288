package transform

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// timestampConverter is TimestampConverter$Key and $Value: a timestamp,
// the whole part or one field of its struct, converted between a string
// (format, java.text.SimpleDateFormat in UTC), a Unix time (unix.precision)
// and Kafka Connect's Date, Time and Timestamp. What it is now comes from
// its schema: Connect's logical types, else a string, else an INT64 Unix
// time.
type timestampConverter struct {
	key         bool
	field       string
	target      string
	layout      []dateField // format, nil for none
	precision   string
	withDefault bool
	schemas     sync.Map // *Schema -> *Schema, converted
}

// The target types and Unix precisions TimestampConverter takes.
const (
	tsString    = "string"
	tsUnix      = "unix"
	tsDate      = "Date"
	tsTime      = "Time"
	tsTimestamp = "Timestamp"
)

func newTimestampConverter(o *options, key bool) transformation {
	t := &timestampConverter{key: key, withDefault: o.boolean("replace.null.with.default", true)}
	t.field, _ = o.str("field", false, "")
	t.target, _ = o.str("target.type", true, "")
	switch t.target {
	case tsString, tsUnix, tsDate, tsTime, tsTimestamp, "":
	default:
		o.refuse("target.type", fmt.Sprintf("%q: want string, unix, Date, Time or Timestamp", t.target))
	}
	t.precision, _ = o.str("unix.precision", false, "milliseconds")
	switch t.precision {
	case "seconds", "milliseconds", "microseconds", "nanoseconds":
	default:
		o.refuse("unix.precision", fmt.Sprintf("%q: want seconds, milliseconds, microseconds or nanoseconds", t.precision))
	}
	if f, _ := o.str("format", false, ""); strings.TrimSpace(f) != "" {
		layout, err := parseDateFormat(f)
		if err != nil {
			o.refuse("format", fmt.Sprintf("%q: %v", f, err))
		}
		t.layout = layout
	} else if t.target == tsString {
		o.refuse("format", "missing: TimestampConverter requires it for string timestamps (Kafka Connect refuses it)")
	}
	if o.failed {
		return nil
	}
	return t
}

func (t *timestampConverter) onKey() bool { return t.key && t.field != "" }

func (t *timestampConverter) apply(r *Record) (bool, error) {
	s, v := operand(r, t.key)
	if s == nil {
		if v == nil {
			return true, nil
		}
		return false, dataErrorf("TimestampConverter of a value without a schema is not implemented")
	}
	if t.field == "" {
		nv, err := t.convert(s, v)
		if err != nil {
			return false, err
		}
		setOperand(r, t.key, t.typeSchema(s.Optional), nv)
		return true, nil
	}
	st, ok := v.(*Struct)
	if v != nil && !ok {
		return false, dataErrorf("Only Struct objects supported for [converting timestamp formats], found: %s", javaClass(s, v))
	}
	if s.Type != StructT {
		return false, dataErrorf("Cannot list fields on non-struct type")
	}
	ns, err := t.structSchema(s)
	if err != nil {
		return false, err
	}
	if st == nil {
		setOperand(r, t.key, ns, nil)
		return true, nil
	}
	nv, err := t.convertStruct(st, ns)
	if err != nil {
		return false, err
	}
	setOperand(r, t.key, ns, nv)
	return true, nil
}

// structSchema is s with the field's schema the target's, built once.
func (t *timestampConverter) structSchema(s *Schema) (*Schema, error) {
	if c, ok := t.schemas.Load(s); ok {
		return c.(*Schema), nil
	}
	ns := s.withBasics()
	ns.Optional = s.Optional
	for _, f := range s.Fields {
		if f.Name == t.field {
			f = Field{Name: f.Name, Schema: t.typeSchema(f.Schema.Optional)}
		}
		ns.Fields = append(ns.Fields, f)
	}
	if d, ok := s.Default.(*Struct); ok && s.HasDefault {
		nd, err := t.convertStruct(d, ns)
		if err != nil {
			return nil, err
		}
		ns.Default, ns.HasDefault = nd, true
	}
	c, _ := t.schemas.LoadOrStore(s, ns)
	return c.(*Schema), nil
}

func (t *timestampConverter) convertStruct(st *Struct, ns *Schema) (*Struct, error) {
	nv := &Struct{Schema: ns, Values: make([]any, len(st.Values))}
	for i, f := range st.Schema.Fields {
		x := st.get(i, t.withDefault)
		if f.Name == t.field {
			var err error
			if x, err = t.convert(f.Schema, x); err != nil {
				return nil, err
			}
		}
		nv.Values[i] = x
	}
	return nv, nil
}

// typeSchema is the target type's schema.
func (t *timestampConverter) typeSchema(optional bool) *Schema {
	v1 := int32(1)
	switch t.target {
	case tsString:
		return &Schema{Type: String, Optional: optional}
	case tsUnix:
		return &Schema{Type: Int64, Optional: optional}
	case tsDate:
		return &Schema{Type: Int32, Name: dateName, Version: &v1, Optional: optional}
	case tsTime:
		return &Schema{Type: Int32, Name: timeName, Version: &v1, Optional: optional}
	}
	return &Schema{Type: Int64, Name: timestampName, Version: &v1, Optional: optional}
}

const dayMillis = 24 * 60 * 60 * 1000

// convert is convertTimestamp: x, of schema s, to the target type through
// its milliseconds since the epoch.
func (t *timestampConverter) convert(s *Schema, x any) (any, error) {
	if x == nil {
		return nil, nil
	}
	var ms int64
	switch {
	case s.Name == timestampName || s.Name == timeName:
		ms, _ = x.(int64)
	case s.Name == dateName:
		days, _ := x.(int64)
		ms = days * dayMillis
	case s.Type == String:
		str, _ := x.(string)
		if t.layout == nil {
			return nil, dataErrorf("Could not parse timestamp: TimestampConverter has no format for a string timestamp")
		}
		p, err := parseDate(t.layout, str)
		if err != nil {
			return nil, dataErrorf("Could not parse timestamp: value (%s) does not match pattern: %v", str, err)
		}
		ms = p.UnixMilli()
	case s.Type == Int64:
		n, _ := x.(int64)
		switch t.precision {
		case "seconds":
			ms = n * 1000
		case "microseconds":
			ms = n / 1000
		case "nanoseconds":
			ms = n / 1e6
		default:
			ms = n
		}
	default:
		return nil, dataErrorf("Schema %s does not correspond to a known timestamp type format", describe(s, x))
	}
	switch t.target {
	case tsString:
		return formatDate(t.layout, time.UnixMilli(ms).UTC()), nil
	case tsUnix:
		switch t.precision {
		case "seconds":
			return ms / 1000, nil
		case "microseconds":
			return ms * 1000, nil
		case "nanoseconds":
			return ms * 1e6, nil
		}
		return ms, nil
	case tsDate:
		return floorDiv(ms, dayMillis), nil
	case tsTime:
		return ms - floorDiv(ms, dayMillis)*dayMillis, nil
	}
	return ms, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// parseDate reads s as a lenient SimpleDateFormat in UTC does: fields in
// the pattern's order, a numeric field taking as many digits as it finds
// (as many as its letters when another numeric field follows at once),
// values beyond their range carried over (month 13 is next January), text
// after the pattern's end ignored. Names of zones are not read.
func parseDate(layout []dateField, s string) (time.Time, error) {
	year, month, day, hour, minute, sec, milli := 1970, 1, 1, 0, 0, 0, 0
	pm, hour12 := -1, false
	offset := 0
	pos := 0
	for i, f := range layout {
		if f.letter == 0 {
			if !strings.HasPrefix(s[pos:], f.lit) {
				return time.Time{}, fmt.Errorf("%q expected at %d", f.lit, pos)
			}
			pos += len(f.lit)
			continue
		}
		numeric := !(f.letter == 'M' || f.letter == 'L') || f.count <= 2
		switch f.letter {
		case 'G', 'E', 'a', 'z':
			numeric = false
		}
		if numeric && f.letter != 'Z' && f.letter != 'X' {
			width := len(s) - pos
			if i+1 < len(layout) && layout[i+1].letter != 0 && isNumericField(layout[i+1]) {
				width = min(width, f.count)
			}
			j := pos
			if j < len(s) && (s[j] == '-' || s[j] == '+') && f.letter != 'y' {
				j++
			}
			for j < pos+width && j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n, err := strconv.Atoi(s[pos:j])
			if err != nil {
				return time.Time{}, fmt.Errorf("a number expected at %d", pos)
			}
			digits := j - pos
			pos = j
			switch f.letter {
			case 'y', 'u':
				if f.letter == 'u' {
					continue // the day of the week does not set the date
				}
				year = n
				if f.count <= 2 && digits == 2 {
					year = twoDigitYear(n)
				}
			case 'M', 'L':
				month = n
			case 'd':
				day = n
			case 'D':
				month, day = 1, n
			case 'H':
				hour = n
			case 'k':
				hour = n % 24
			case 'K':
				hour, hour12 = n, true
			case 'h':
				hour, hour12 = n%12, true
			case 'm':
				minute = n
			case 's':
				sec = n
			case 'S':
				milli = n
			}
			continue
		}
		switch f.letter {
		case 'M', 'L':
			n, k := matchName(s[pos:], longMonths[:], shortMonths[:])
			if n < 0 {
				return time.Time{}, fmt.Errorf("a month expected at %d", pos)
			}
			month, pos = n+1, pos+k
		case 'E':
			n, k := matchName(s[pos:], longDays[:], shortDays[:])
			if n < 0 {
				return time.Time{}, fmt.Errorf("a day of the week expected at %d", pos)
			}
			pos += k
		case 'a':
			n, k := matchName(s[pos:], []string{"AM", "PM"}, nil)
			if n < 0 {
				return time.Time{}, fmt.Errorf("AM or PM expected at %d", pos)
			}
			pm, pos = n, pos+k
		case 'G':
			n, k := matchName(s[pos:], []string{"AD", "BC"}, nil)
			if n != 0 {
				return time.Time{}, fmt.Errorf("AD expected at %d", pos)
			}
			pos += k
		case 'Z', 'X':
			off, k, err := parseOffset(s[pos:], f.letter == 'X')
			if err != nil {
				return time.Time{}, fmt.Errorf("%v at %d", err, pos)
			}
			offset, pos = off, pos+k
		default:
			return time.Time{}, fmt.Errorf("pattern letter %q is not read by pgoutbox", f.letter)
		}
	}
	if pm == 1 && (hour12 || hour < 12) {
		hour += 12
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC).Add(time.Duration(milli) * time.Millisecond)
	return t.Add(-time.Duration(offset) * time.Second), nil
}

// isNumericField tells a field a number is read for.
func isNumericField(f dateField) bool {
	switch f.letter {
	case 'G', 'E', 'a', 'z', 'Z', 'X':
		return false
	case 'M', 'L':
		return f.count <= 2
	}
	return true
}

// twoDigitYear places a two-digit year within 80 years before and 20
// after now, as SimpleDateFormat does.
func twoDigitYear(n int) int {
	now := time.Now().UTC().Year()
	start := now - 80
	y := start/100*100 + n
	if y < start {
		y += 100
	}
	return y
}

// matchName is the index of the first name (longest list first) s
// starts with, in any case, and its length; -1 for none.
func matchName(s string, long, short []string) (int, int) {
	for _, list := range [][]string{long, short} {
		for i, n := range list {
			if len(s) >= len(n) && strings.EqualFold(s[:len(n)], n) {
				return i, len(n)
			}
		}
	}
	return -1, 0
}

// parseOffset reads a zone offset: Z (with iso, X), or ±hh, ±hhmm,
// ±hh:mm; seconds east of UTC and the length read.
func parseOffset(s string, iso bool) (int, int, error) {
	if iso && strings.HasPrefix(s, "Z") {
		return 0, 1, nil
	}
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') {
		return 0, 0, fmt.Errorf("a zone offset expected")
	}
	h, err := strconv.Atoi(s[1:3])
	if err != nil {
		return 0, 0, fmt.Errorf("a zone offset expected")
	}
	k, m := 3, 0
	rest := s[3:]
	if strings.HasPrefix(rest, ":") {
		rest, k = rest[1:], k+1
	}
	if len(rest) >= 2 {
		if mm, err := strconv.Atoi(rest[:2]); err == nil {
			m, k = mm, k+2
		}
	}
	off := h*3600 + m*60
	if s[0] == '-' {
		off = -off
	}
	return off, k, nil
}
