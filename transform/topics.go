package transform

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/router"
)

// regexRouter is RegexRouter: a topic the regex matches in full is
// replaced by replacement (Matcher.replaceFirst).
type regexRouter struct{ rename *router.Rename }

func newRegexRouter(o *options) transformation {
	regex, _ := o.str("regex", true, "")
	replacement, _ := o.str("replacement", true, "")
	if o.failed {
		return nil
	}
	rn, err := router.NewRename(regex, replacement)
	if err != nil {
		name := "replacement"
		if strings.HasPrefix(err.Error(), "regex") {
			name = "regex"
		}
		o.refuse(name, err.Error()+" (pgoutbox's regular expressions are RE2: no lookaround or backreferences)")
		return nil
	}
	return regexRouter{rename: rn}
}

func (t regexRouter) apply(r *Record) (bool, error) {
	r.Topic, _ = t.rename.Topic(r.Topic)
	return true, nil
}

// timestampRouter is TimestampRouter: topic.format with ${topic} and
// ${timestamp}, the record's timestamp written in timestamp.format
// (java.text.SimpleDateFormat) in UTC.
type timestampRouter struct {
	topicFormat string
	layout      []dateField
}

func newTimestampRouter(o *options) transformation {
	topicFormat, _ := o.str("topic.format", false, "${topic}-${timestamp}")
	format, _ := o.str("timestamp.format", false, "yyyyMMdd")
	layout, err := parseDateFormat(format)
	if err != nil {
		// SimpleDateFormat throws at the first record, which fails
		// Connect's task: nothing would be published.
		o.refuse("timestamp.format", fmt.Sprintf("%q: %v", format, err))
		return nil
	}
	return timestampRouter{topicFormat: topicFormat, layout: layout}
}

func (t timestampRouter) apply(r *Record) (bool, error) {
	ts := formatDate(t.layout, time.UnixMilli(r.Timestamp).UTC())
	topic := strings.ReplaceAll(t.topicFormat, "${topic}", r.Topic)
	r.Topic = strings.ReplaceAll(topic, "${timestamp}", ts)
	return true, nil
}

// dateField is one piece of a SimpleDateFormat pattern: a run of one
// pattern letter (its count), or literal text.
type dateField struct {
	letter byte
	count  int
	lit    string
}

// parseDateFormat reads a SimpleDateFormat pattern: letters of the
// fields below, text in single quotes (” a quote), anything else as it
// is. A letter SimpleDateFormat does not know is an error, as it is
// there; so are the week-based fields (Y, w, W, F), which depend on the
// worker's locale.
func parseDateFormat(p string) ([]dateField, error) {
	var out []dateField
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\'':
			j := i + 1
			var lit strings.Builder
			for {
				if j >= len(p) {
					return nil, fmt.Errorf("unterminated quote")
				}
				if p[j] == '\'' {
					if j+1 < len(p) && p[j+1] == '\'' {
						lit.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				lit.WriteByte(p[j])
				j++
			}
			if i+1 == j { // '' is a quote
				lit.WriteByte('\'')
			}
			out = append(out, dateField{lit: lit.String()})
			i = j + 1
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			if !strings.ContainsRune("GyMLdHmsSEDaHkKhzZXu", rune(c)) {
				if strings.ContainsRune("YwWF", rune(c)) {
					return nil, fmt.Errorf("pattern letter %q (week-based) is not supported by pgoutbox", c)
				}
				return nil, fmt.Errorf("illegal pattern character %q", c)
			}
			j := i
			for j < len(p) && p[j] == c {
				j++
			}
			out = append(out, dateField{letter: c, count: j - i})
			i = j
		default:
			out = append(out, dateField{lit: string(c)})
			i++
		}
	}
	return out, nil
}

var (
	shortMonths = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
	longMonths  = [...]string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	shortDays   = [...]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	longDays    = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
)

// formatDate writes t (UTC) as SimpleDateFormat in an English locale.
func formatDate(layout []dateField, t time.Time) string {
	var b strings.Builder
	num := func(v, count int) {
		s := strconv.Itoa(v)
		for i := len(s); i < count; i++ {
			b.WriteByte('0')
		}
		b.WriteString(s)
	}
	for _, f := range layout {
		switch f.letter {
		case 0:
			b.WriteString(f.lit)
		case 'G':
			b.WriteString("AD")
		case 'y':
			if f.count == 2 {
				num(t.Year()%100, 2)
			} else {
				num(t.Year(), f.count)
			}
		case 'M', 'L':
			switch {
			case f.count >= 4:
				b.WriteString(longMonths[t.Month()-1])
			case f.count == 3:
				b.WriteString(shortMonths[t.Month()-1])
			default:
				num(int(t.Month()), f.count)
			}
		case 'd':
			num(t.Day(), f.count)
		case 'D':
			num(t.YearDay(), f.count)
		case 'E':
			if f.count >= 4 {
				b.WriteString(longDays[t.Weekday()])
			} else {
				b.WriteString(shortDays[t.Weekday()])
			}
		case 'u':
			num((int(t.Weekday())+6)%7+1, f.count)
		case 'a':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'H':
			num(t.Hour(), f.count)
		case 'k':
			num((t.Hour()+23)%24+1, f.count)
		case 'K':
			num(t.Hour()%12, f.count)
		case 'h':
			num((t.Hour()+11)%12+1, f.count)
		case 'm':
			num(t.Minute(), f.count)
		case 's':
			num(t.Second(), f.count)
		case 'S':
			num(t.Nanosecond()/1e6, f.count)
		case 'z':
			if f.count >= 4 {
				b.WriteString("Coordinated Universal Time")
			} else {
				b.WriteString("UTC")
			}
		case 'Z':
			b.WriteString("+0000")
		case 'X':
			b.WriteString("Z")
		}
	}
	return b.String()
}
