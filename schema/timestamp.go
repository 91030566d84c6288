package schema

import "time"

// parseTimestamp reads Postgres's text output of timestamptz and timestamp in
// the ISO DateStyle, and the same shape from text columns:
//
//	YYYY-MM-DD[( |T)HH:MM:SS[.fffffffff][Z|±HH[[:]MM[[:]SS]]]]
//
// 'T' and 'Z' may be lower case (RFC 3339 allows it). A value without a zone
// is taken as UTC (timestamp without time zone); a date alone is midnight. It
// returns a reason instead of an error so that the caller builds a RowError
// with the column's name; reason is "" on success. It does not allocate.
func parseTimestamp(b []byte) (time.Time, string) {
	switch string(b) { // no allocation: the conversion is only compared
	case "infinity", "-infinity":
		return time.Time{}, "infinite timestamp " + string(b)
	}
	const bad = "malformed timestamp (ISO DateStyle expected)"
	if len(b) >= 3 && string(b[len(b)-3:]) == " BC" {
		return time.Time{}, "timestamp before year 1 (BC) is out of range for RFC 3339"
	}
	i := 0
	year, n := digits(b, 0, 5)
	if n < 4 {
		return time.Time{}, bad
	}
	i += n
	if year < 1 || n > 4 { // Postgres prints years past 9999 with more digits
		return time.Time{}, "timestamp year out of range 0001-9999 for RFC 3339"
	}
	month, ok := twoAfter(b, &i, '-')
	if !ok {
		return time.Time{}, bad
	}
	day, ok := twoAfter(b, &i, '-')
	if !ok {
		return time.Time{}, bad
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(month, year) {
		return time.Time{}, "invalid date in timestamp"
	}
	var hour, minute, sec, nsec, offset int
	if i < len(b) {
		if b[i] != ' ' && b[i] != 'T' && b[i] != 't' {
			return time.Time{}, bad
		}
		i++
		if hour, n = digits(b, i, 2); n != 2 {
			return time.Time{}, bad
		}
		i += 2
		if minute, ok = twoAfter(b, &i, ':'); !ok {
			return time.Time{}, bad
		}
		if sec, ok = twoAfter(b, &i, ':'); !ok {
			return time.Time{}, bad
		}
		if i < len(b) && b[i] == '.' {
			i++
			frac, n := digits(b, i, 9)
			if n == 0 || (i+n < len(b) && isDigit(b[i+n])) {
				return time.Time{}, bad
			}
			i += n
			for k := n; k < 9; k++ {
				frac *= 10
			}
			nsec = frac
		}
		if hour > 23 || minute > 59 || sec > 59 {
			// Postgres prints neither 24:00:00 nor leap seconds.
			return time.Time{}, "invalid time of day in timestamp"
		}
		if i < len(b) {
			switch c := b[i]; c {
			case 'Z', 'z':
				i++
			case '+', '-':
				i++
				oh, n := digits(b, i, 2)
				if n != 2 {
					return time.Time{}, bad
				}
				i += 2
				var om, os int
				if i < len(b) {
					colon := b[i] == ':'
					if colon {
						i++
					}
					if om, n = digits(b, i, 2); n != 2 {
						return time.Time{}, bad
					}
					i += 2
					if i < len(b) {
						if colon != (b[i] == ':') {
							return time.Time{}, bad
						}
						if colon {
							i++
						}
						if os, n = digits(b, i, 2); n != 2 {
							return time.Time{}, bad
						}
						i += 2
					}
				}
				if oh > 23 || om > 59 || os > 59 {
					return time.Time{}, "invalid zone offset in timestamp"
				}
				offset = oh*3600 + om*60 + os
				if c == '-' {
					offset = -offset
				}
			default:
				return time.Time{}, bad
			}
		}
		if i != len(b) {
			return time.Time{}, bad
		}
	}
	secs := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	if secs < minRFC3339Unix || secs > maxRFC3339Unix {
		// In range locally, but the offset moves it out in UTC.
		return time.Time{}, "timestamp year out of range 0001-9999 for RFC 3339"
	}
	return time.Unix(secs, int64(nsec)).UTC(), ""
}

// The instants RFC 3339 can write in UTC: 0001-01-01T00:00:00Z to
// 9999-12-31T23:59:59.999999999Z.
var (
	minRFC3339Unix = daysSinceEpoch(1, 1, 1) * 86400
	maxRFC3339Unix = daysSinceEpoch(10000, 1, 1)*86400 - 1
)

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digits reads up to max decimal digits from b[i:] and returns their value and
// how many were read.
func digits(b []byte, i, max int) (v, n int) {
	for n < max && i+n < len(b) && isDigit(b[i+n]) {
		v = v*10 + int(b[i+n]-'0')
		n++
	}
	return v, n
}

// twoAfter reads sep followed by exactly two digits at b[*i:] and advances *i.
func twoAfter(b []byte, i *int, sep byte) (int, bool) {
	if *i >= len(b) || b[*i] != sep {
		return 0, false
	}
	v, n := digits(b, *i+1, 2)
	if n != 2 || (*i+3 < len(b) && isDigit(b[*i+3])) {
		return 0, false
	}
	*i += 3
	return v, true
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(month, year int) int {
	switch month {
	case 2:
		if isLeap(year) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch returns the days from 1970-01-01 to the given proleptic
// Gregorian date (Howard Hinnant's days_from_civil).
func daysSinceEpoch(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400 // y >= 0 here, so truncation is floor
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
