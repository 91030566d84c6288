package transform

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// TimezoneClass is Debezium's TimezoneConverter.
const TimezoneClass = "io.debezium.transforms.TimezoneConverter"

// timezoneConverter is Debezium's TimezoneConverter (3.6.1): the time
// fields of a change event's before and after, and on request source's
// ts_ms, ts_us and ts_ns, rewritten for converted.timezone. A record
// that is not a change event (the Outbox Event Router's) passes
// unchanged, as it does in Debezium.
//
// What Debezium does, which is not always a zone conversion:
//   - ZonedTimestamp: the same instant written with the zone's offset
//     for the string's local date-time read as a wall time in the zone
//     (ZoneRules.getOffset(LocalDateTime)), not the offset at the instant;
//   - ZonedTime: the same time of day at the zone's offset now;
//   - Timestamp, MicroTimestamp, NanoTimestamp, Connect's Timestamp: the
//     UTC wall time taken as the zone's wall time, so the epoch value
//     moves back by the offset;
//   - source's ts_ms, ts_us, ts_ns: moved forward by the offset at that
//     instant.
type timezoneConverter struct {
	zone *time.Location
	// mode is tzAll without lists, else the list's kind; the lists give
	// each match name its fields (none: every field).
	mode                 int
	topics, tables, bare map[string]map[string]bool
	// now is the clock ZonedTime's offset is taken at.
	now func() time.Time
}

const (
	tzAll = iota
	tzInclude
	tzExclude
)

// tzListPattern is LIST_PATTERN, matched against the list as Java's
// List.toString writes it: "[a, b]". \s is Java's, with \x0B.
var tzListPattern = regexp.MustCompile(`^\[(source|topic|[".\w \t\n\x0B\f\r]+):([".\w \t\n\x0B\f\r]+(?::[".\w \t\n\x0B\f\r]+)?(?:,|\]$))+$`)

// tzOffsetPattern is the converted.timezone offset form Debezium takes.
var tzOffsetPattern = regexp.MustCompile(`^([+-])(\d{2}):(\d{2})(?::(\d{2}))?$`)

func newTimezoneConverter(o *options) transformation {
	t := &timezoneConverter{now: time.Now}
	// Debezium reads the options untrimmed (Configuration.getString).
	zone, set := o.raw("converted.timezone")
	if !set || strings.TrimSpace(zone) == "" {
		o.refuse("converted.timezone", "missing or blank (Debezium requires a value)")
	} else if loc, why := timezoneLocation(zone); why != "" {
		o.refuse("converted.timezone", fmt.Sprintf("%q: %s", zone, why))
	} else {
		t.zone = loc
	}
	include := tzList(o, "include.list")
	exclude := tzList(o, "exclude.list")
	const format = `: want rules "source:<table>[:<field>]", "topic:<topic>[:<field>]" or "<name>:<field>", the first with its prefix, each of letters, digits, _, ., " and spaces (Debezium refuses it)`
	switch {
	case len(include) > 0 && len(exclude) > 0:
		o.refuse("exclude.list", "given with "+o.p.name(o.prefix+"include.list")+" (Debezium takes one of them)")
	case len(include) > 0:
		if !tzListPattern.MatchString("[" + strings.Join(include, ", ") + "]") {
			o.refuse("include.list", fmt.Sprintf("%q", strings.Join(include, ","))+format)
		}
		t.mode = tzInclude
		t.collect(include)
	case len(exclude) > 0:
		if !tzListPattern.MatchString("[" + strings.Join(exclude, ", ") + "]") {
			o.refuse("exclude.list", fmt.Sprintf("%q", strings.Join(exclude, ","))+format)
		}
		t.mode = tzExclude
		t.collect(exclude)
	}
	if o.failed {
		return nil
	}
	return t
}

// tzList reads a list as Debezium's Configuration.getList does: split at
// each comma (String.split, which drops trailing empty items), each item
// trimmed; an empty value is one empty item.
func tzList(o *options, name string) []string {
	v, set := o.raw(name)
	if !set {
		return nil
	}
	items := strings.Split(v, ",")
	if len(items) > 1 {
		for len(items) > 0 && items[len(items)-1] == "" {
			items = items[:len(items)-1]
		}
	}
	for i := range items {
		items[i] = javaTrim(items[i])
	}
	return items
}

// collect files each rule under the prefix in force: an item without
// one takes the previous item's ("source:a,b" names two tables), and a
// prefix in other case than source or topic files it with the bare
// names, as Debezium does.
func (t *timezoneConverter) collect(items []string) {
	t.topics, t.tables, t.bare = map[string]map[string]bool{}, map[string]map[string]bool{}, map[string]map[string]bool{}
	prefix := ""
	for _, item := range items {
		parts := strings.Split(item, ":")
		var p, name, field string
		switch {
		case len(parts) == 1:
			name = parts[0]
		case len(parts) <= 3 && (strings.EqualFold(parts[0], "source") || strings.EqualFold(parts[0], "topic")):
			p, name = parts[0], parts[1]
			if len(parts) == 3 {
				field = parts[2]
			}
		case len(parts) <= 3:
			name, field = parts[0], parts[1]
		}
		if p != "" {
			prefix = p
		}
		m := t.bare
		switch prefix {
		case "topic":
			m = t.topics
		case "source":
			m = t.tables
		}
		if m[name] == nil {
			m[name] = map[string]bool{}
		}
		if field != "" {
			m[name][field] = true
		}
	}
}

// timezoneLocation resolves converted.timezone as Debezium accepts it (an
// offset ±hh:mm[:ss], or a name in ZoneId.getAvailableZoneIds or
// TimeZone.getAvailableIDs) and as ZoneId.of then reads it at the first
// record; why says what is refused.
func timezoneLocation(zone string) (*time.Location, string) {
	if m := tzOffsetPattern.FindStringSubmatch(zone); m != nil {
		h, _ := strconv.Atoi(m[2])
		mi, _ := strconv.Atoi(m[3])
		s, _ := strconv.Atoi(m[4] + "0")
		s /= 10
		total := h*3600 + mi*60 + s
		if h > 18 || mi > 59 || s > 59 || total > 18*3600 {
			return nil, "an offset beyond ±18:00 or a minute or second beyond 59: Debezium accepts it, and its task fails at the first time it converts (ZoneOffset.of)"
		}
		if m[1] == "-" {
			total = -total
		}
		return time.FixedZone(zone, total), ""
	}
	switch zone {
	case "ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST", "CTT", "EAT", "ECT", "EST", "HST", "IET",
		"IST", "JST", "MIT", "MST", "NET", "NST", "PLT", "PNT", "PRT", "PST", "SST", "VST":
		return nil, "a java.util.TimeZone abbreviation: Debezium accepts it, and its task fails at the first time it converts (ZoneId.of: Unknown time-zone ID); give a region such as America/New_York"
	case "Local", "localtime", "posixrules", "Factory", "GMT+0", "GMT-0", "ROC":
		return nil, "not a time zone Java knows (Debezium refuses it)"
	}
	if strings.HasPrefix(zone, "posix/") || strings.HasPrefix(zone, "right/") || !tzZoneName.MatchString(zone) {
		return nil, "not a time zone Java knows (Debezium refuses it)"
	}
	if strings.HasPrefix(zone, "SystemV/") {
		return nil, "the SystemV zones are Java's own, not in pgoutbox's time zone database; give the region (EST5EDT, America/New_York)"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, "not a time zone pgoutbox's time zone database knows (Debezium refuses a name Java does not know)"
	}
	return loc, ""
}

// tzZoneName is ZoneRegion's syntax for a region ID.
var tzZoneName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9~/._+-]+$`)

func (t *timezoneConverter) apply(r *Record) (bool, error) {
	env, ok := r.Value.(*Struct)
	if !ok || r.ValueSchema == nil || !strings.HasSuffix(r.ValueSchema.Name, ".Envelope") {
		return true, nil
	}
	table, hasTable, err := tzEnvelopeTable(env)
	if err != nil {
		return false, err
	}
	mode, fields := tzAll, map[string]bool(nil)
	if t.mode != tzAll {
		var matched bool
		fields, matched = t.match(table, hasTable, r.Topic)
		switch {
		case t.mode == tzInclude && !matched:
			return true, nil
		case t.mode == tzInclude && len(fields) > 0:
			mode = tzInclude
		case t.mode == tzExclude && matched && len(fields) == 0:
			return true, nil
		case t.mode == tzExclude && matched:
			mode = tzExclude
		}
	}
	// A field named "before.x", "after.x" or "source.x" is that struct's
	// x; any other both before's and after's.
	var before, after, source map[string]bool
	if len(fields) > 0 {
		before, after, source = map[string]bool{}, map[string]bool{}, map[string]bool{}
		for f := range fields {
			switch {
			case strings.HasPrefix(f, "source."):
				source[f[len("source."):]] = true
			case strings.HasPrefix(f, "before."):
				before[f[len("before."):]] = true
			case strings.HasPrefix(f, "after."):
				after[f[len("after."):]] = true
			default:
				before[f], after[f] = true, true
			}
		}
	}
	out := &Struct{Schema: env.Schema, Values: append([]any(nil), env.Values...)}
	changed := false
	for _, part := range []struct {
		name string
		sel  map[string]bool
	}{{"before", before}, {"after", after}, {"source", source}} {
		i := env.Schema.field(part.name)
		if i < 0 {
			continue
		}
		st, _ := env.Values[i].(*Struct)
		if st == nil || part.name == "source" && len(part.sel) == 0 {
			continue
		}
		nst, err := t.convertStruct(st, part.name == "source", mode, part.sel)
		if err != nil {
			return false, err
		}
		if nst != st {
			out.Values[i], changed = nst, true
		}
	}
	if changed {
		r.Value = out
	}
	return true, nil
}

// tzEnvelopeTable is source.table; ok is false for an envelope without
// one. Debezium fails on a null source (NullPointerException).
func tzEnvelopeTable(env *Struct) (table string, ok bool, err error) {
	i := env.Schema.field("source")
	if i < 0 {
		return "", false, nil
	}
	src, _ := env.Values[i].(*Struct)
	if src == nil {
		return "", false, dataErrorf("TimezoneConverter: a change event without source (Debezium's NullPointerException)")
	}
	if j := src.Schema.field("table"); j >= 0 {
		table, ok = src.Values[j].(string)
	}
	return table, ok, nil
}

// match finds the rule for the record: the topic's, else the table's,
// else a bare name's, the topic's first.
func (t *timezoneConverter) match(table string, hasTable bool, topic string) (map[string]bool, bool) {
	if f, ok := t.topics[topic]; ok {
		return f, true
	}
	if f, ok := t.tables[table]; ok && hasTable {
		return f, true
	}
	if f, ok := t.bare[topic]; ok {
		return f, true
	}
	f, ok := t.bare[table]
	return f, ok && hasTable
}

// convertStruct converts st's time fields the mode selects; st itself
// when none changes.
func (t *timezoneConverter) convertStruct(st *Struct, source bool, mode int, sel map[string]bool) (*Struct, error) {
	var out *Struct
	for i, f := range st.Schema.Fields {
		switch mode {
		case tzInclude:
			if !sel[f.Name] {
				continue
			}
		case tzExclude:
			if sel[f.Name] {
				continue
			}
		}
		// Struct.get: a null field's default, converted and put in its
		// place.
		v := st.get(i, true)
		if v == nil {
			continue
		}
		epoch := source && f.Schema.Name == "" && (f.Name == "ts_ms" || f.Name == "ts_us" || f.Name == "ts_ns")
		nv, ok, err := t.convert(f.Name, f.Schema.Name, epoch, v)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if out == nil {
			out = &Struct{Schema: st.Schema, Values: append([]any(nil), st.Values...)}
		}
		out.Values[i] = nv
	}
	if out == nil {
		return st, nil
	}
	return out, nil
}

// convert converts one value; ok is false for a field that is not a
// time Debezium converts (its Date, Time, MicroTime, NanoTime, Connect's
// Date and Time are left alone).
func (t *timezoneConverter) convert(field, logical string, epoch bool, v any) (any, bool, error) {
	if epoch {
		n, ok := v.(int64)
		if !ok {
			return nil, false, dataErrorf("Epoch field value should be a java.lang.Long")
		}
		switch field {
		case "ts_ms":
			return n + int64(t.instantOffset(floorDiv(n, 1e3)))*1e3, true, nil
		case "ts_us":
			return n + int64(t.instantOffset(floorDiv(n, 1e6)))*1e6, true, nil
		}
		return n + int64(t.instantOffset(floorDiv(n, 1e9)))*1e9, true, nil
	}
	var unit int64
	switch logical {
	case "io.debezium.time.ZonedTimestamp":
		s, _ := v.(string)
		out, err := t.zonedTimestamp(s)
		return out, err == nil, err
	case "io.debezium.time.ZonedTime":
		s, _ := v.(string)
		out, err := t.zonedTime(s)
		return out, err == nil, err
	case "io.debezium.time.Timestamp", timestampName:
		unit = 1e3
	case "io.debezium.time.MicroTimestamp":
		unit = 1e6
	case "io.debezium.time.NanoTimestamp":
		unit = 1e9
	default:
		return nil, false, nil
	}
	n, ok := v.(int64)
	if !ok {
		return nil, false, dataErrorf("TimezoneConverter: %s value %v is not a long", logical, v)
	}
	return n - int64(t.wallOffset(floorDiv(n, unit)))*unit, true, nil
}

// instantOffset is the zone's offset in seconds at the Unix second s.
func (t *timezoneConverter) instantOffset(s int64) int {
	_, off := time.Unix(s, 0).In(t.zone).Zone()
	return off
}

// wallOffset is ZoneRules.getOffset(LocalDateTime) for the wall time w
// (seconds as if UTC): the one valid offset, or in a gap or an overlap
// the offset before the transition. Each transition within a day of w
// is taken in order: the first whose later wall time (its instant plus
// the larger of its two offsets) is past w gives its offset before.
func (t *timezoneConverter) wallOffset(w int64) int {
	const window = 19 * 3600 // beyond any offset
	at := time.Unix(w-window, 0).In(t.zone)
	for {
		_, before := at.Zone()
		_, end := at.ZoneBounds()
		if end.IsZero() || end.Unix() > w+window {
			return before
		}
		_, after := end.In(t.zone).Zone()
		if w < end.Unix()+int64(max(before, after)) {
			return before
		}
		at = end.In(t.zone)
	}
}

// zonedTimestamp rewrites an ISO_OFFSET_DATE_TIME string at the offset
// its local date-time has as a wall time in the zone.
func (t *timezoneConverter) zonedTimestamp(s string) (string, error) {
	wall, nanos, off, ok := tzParseDateTime(s)
	if !ok {
		return "", dataErrorf("Text '%s' could not be parsed (TimezoneConverter: an io.debezium.time.ZonedTimestamp)", s)
	}
	to := t.wallOffset(wall)
	local := time.Unix(wall-int64(off)+int64(to), int64(nanos)).UTC()
	return string(tzAppendOffset(tzAppendTime(tzAppendDate(nil, local), local), to)), nil
}

// zonedTime rewrites an ISO_OFFSET_TIME string at the zone's offset now.
func (t *timezoneConverter) zonedTime(s string) (string, error) {
	secs, nanos, rest, ok := tzParseTime(s)
	off := 0
	if ok {
		off, ok = tzParseOffset(rest)
	}
	if !ok {
		return "", dataErrorf("Text '%s' could not be parsed (TimezoneConverter: an io.debezium.time.ZonedTime)", s)
	}
	to := t.instantOffset(t.now().Unix())
	day := ((secs-int64(off)+int64(to))%86400 + 86400) % 86400
	local := time.Unix(day, int64(nanos)).UTC()
	return string(tzAppendOffset(tzAppendTime(nil, local), to)), nil
}

// tzParseDateTime reads ISO_OFFSET_DATE_TIME: the local date-time
// as seconds as if UTC, its nanoseconds and its offset.
func tzParseDateTime(s string) (wall int64, nanos, off int, ok bool) {
	year, rest, ok := tzParseYear(s)
	if !ok || len(rest) < 7 || rest[0] != '-' || rest[3] != '-' || (rest[6] != 'T' && rest[6] != 't') {
		return 0, 0, 0, false
	}
	mo, ok1 := tzDigits(rest[1:3])
	d, ok2 := tzDigits(rest[4:6])
	if !ok1 || !ok2 || mo < 1 || mo > 12 || d < 1 || d > 31 {
		return 0, 0, 0, false
	}
	secs, nanos, rest, ok := tzParseTime(rest[7:])
	if !ok {
		return 0, 0, 0, false
	}
	date := time.Date(year, time.Month(mo), d, 0, 0, 0, 0, time.UTC)
	if date.Day() != d {
		return 0, 0, 0, false // the 31st of a shorter month
	}
	if off, ok = tzParseOffset(rest); !ok {
		return 0, 0, 0, false
	}
	return date.Unix() + secs, nanos, off, true
}

// tzParseYear reads ISO_LOCAL_DATE's year: four digits, or a sign and
// four to ten.
func tzParseYear(s string) (int, string, bool) {
	sign, i := 1, 0
	if s != "" && (s[0] == '+' || s[0] == '-') {
		if s[0] == '-' {
			sign = -1
		}
		i = 1
	}
	j := i
	for j < len(s) && j-i < 10 && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n := j - i
	if n < 4 || i == 0 && n > 4 {
		return 0, "", false
	}
	y, err := strconv.Atoi(s[i:j])
	if err != nil || y > 999999999 {
		return 0, "", false
	}
	return sign * y, s[j:], true
}

// tzParseTime reads ISO_LOCAL_TIME: HH:mm[:ss[.fraction]], as seconds
// of the day and nanoseconds, with what follows.
func tzParseTime(s string) (secs int64, nanos int, rest string, ok bool) {
	if len(s) < 5 || s[2] != ':' {
		return 0, 0, "", false
	}
	h, ok1 := tzDigits(s[0:2])
	mi, ok2 := tzDigits(s[3:5])
	if !ok1 || !ok2 || h > 23 || mi > 59 {
		return 0, 0, "", false
	}
	sec := 0
	rest = s[5:]
	if len(rest) >= 3 && rest[0] == ':' {
		var ok3 bool
		if sec, ok3 = tzDigits(rest[1:3]); !ok3 || sec > 59 {
			return 0, 0, "", false
		}
		rest = rest[3:]
		if rest != "" && rest[0] == '.' {
			j := 1
			for j < len(rest) && j <= 9 && rest[j] >= '0' && rest[j] <= '9' {
				j++
			}
			frac := rest[1:j] + "000000000"[:10-j]
			nanos, _ = strconv.Atoi(frac)
			rest = rest[j:]
		}
	}
	return int64(h*3600 + mi*60 + sec), nanos, rest, true
}

// tzParseOffset reads a lenient offset ID: Z, ±HH, ±HH:MM, ±HHMM,
// ±HH:MM:SS, ±HHMMSS; it must end the text.
func tzParseOffset(s string) (int, bool) {
	if s == "Z" || s == "z" {
		return 0, true
	}
	if len(s) < 3 || s[0] != '+' && s[0] != '-' {
		return 0, false
	}
	body := strings.ReplaceAll(s[1:], ":", "")
	if len(body) != 2 && len(body) != 4 && len(body) != 6 {
		return 0, false
	}
	parts := [3]int{}
	for k := 0; k*2 < len(body); k++ {
		n, ok := tzDigits(body[2*k : 2*k+2])
		if !ok {
			return 0, false
		}
		parts[k] = n
	}
	if parts[0] > 18 || parts[1] > 59 || parts[2] > 59 {
		return 0, false
	}
	off := parts[0]*3600 + parts[1]*60 + parts[2]
	if s[0] == '-' {
		off = -off
	}
	return off, true
}

func tzDigits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, s != ""
}

// tzAppendDate writes ISO_LOCAL_DATE and its T: a four-digit year, a
// sign before one beyond 9999 or before zero.
func tzAppendDate(dst []byte, t time.Time) []byte {
	y := t.Year()
	switch {
	case y > 9999:
		dst = append(dst, '+')
	case y < 0:
		dst = append(dst, '-')
		y = -y
	}
	dst = fmt.Appendf(dst, "%04d-%02d-%02dT", y, int(t.Month()), t.Day())
	return dst
}

// tzAppendTime writes ISO_LOCAL_TIME: seconds always, the fraction
// without its trailing zeros, none for a whole second.
func tzAppendTime(dst []byte, t time.Time) []byte {
	dst = fmt.Appendf(dst, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
	if ns := t.Nanosecond(); ns != 0 {
		dst = append(dst, strings.TrimRight(fmt.Sprintf(".%09d", ns), "0")...)
	}
	return dst
}

// tzAppendOffset writes an offset ID: Z, or ±HH:MM with :SS when the
// offset has seconds.
func tzAppendOffset(dst []byte, off int) []byte {
	if off == 0 {
		return append(dst, 'Z')
	}
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	dst = fmt.Appendf(append(dst, sign), "%02d:%02d", off/3600, off/60%60)
	if off%60 != 0 {
		dst = fmt.Appendf(dst, ":%02d", off%60)
	}
	return dst
}
