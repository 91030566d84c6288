package schema

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// This file renders numeric, money, time, timetz and interval columns as
// Debezium's Postgres connector types them by default
// (decimal.handling.mode=precise, time.precision.mode=adaptive,
// interval.handling.mode=numeric): Kafka Connect's Decimal (the unscaled
// value's two's complement bytes, as Java's BigInteger.toByteArray), or
// Debezium's VariableScaleDecimal for an unconstrained numeric; Time or
// MicroTime by the column's precision; ZonedTime in UTC; MicroDuration
// with Debezium's 30.4375-day month. Each was checked against Debezium
// 3.6.1's records (test/compat's types-numeric-time cases).

// decimal is a numeric value as its unscaled integer and scale.
type decimal struct {
	unscaled big.Int
	scale    int
	special  bool // NaN or ±Infinity: no BigDecimal, Debezium writes null
}

// isNullValue tells a value Debezium writes as null: SQL NULL, and a
// numeric's NaN or ±Infinity under decimal.handling.mode=precise.
func isNullValue(t pgType, m valueModes, text []byte) bool {
	if text == nil {
		return true
	}
	if t.oid != oidNumeric || m.decimal != decimalPrecise {
		return false
	}
	switch string(text) {
	case "NaN", "Infinity", "-Infinity":
		return true
	}
	return false
}

// parseDecimal reads a numeric's or a money's text. A numeric(p,s) keeps
// the column's scale, an unconstrained numeric the scale of its text
// without the fraction's trailing zeros, a money two digits
// (money.fraction.digits=2) from Postgres's text in the C locale's form
// ("-$1,234.56").
func parseDecimal(t pgType, text []byte) (decimal, string) {
	var d decimal
	s := string(text)
	switch s {
	case "NaN", "Infinity", "-Infinity":
		d.special = true
		return d, ""
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	want := -1
	if t.oid == oidMoney {
		s = strings.ReplaceAll(strings.TrimPrefix(s, "$"), ",", "")
		want = 2
	} else if _, sc, ok := t.numericScale(); ok {
		want = sc
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || !digitsOnly(whole) || !digitsOnly(frac) {
		return d, "malformed numeric"
	}
	if want >= 0 {
		if len(frac) > want {
			return d, "numeric has more digits than its scale"
		}
		frac += strings.Repeat("0", want-len(frac))
	} else {
		// Debezium's VariableScaleDecimal drops the fraction's trailing
		// zeros (1.500 has scale 1, 0.000 scale 0), never the integer's.
		frac = strings.TrimRight(frac, "0")
	}
	d.scale = len(frac)
	d.unscaled.SetString(whole+frac, 10)
	if neg {
		d.unscaled.Neg(&d.unscaled)
	}
	return d, ""
}

// decimalText is a numeric's or a money's text as BigDecimal reads it
// (PostgresMoney.parse): Postgres's text, a money's without its currency
// sign and group separators ("-$1,234.56" is -1234.56). The text is
// checked by parseDecimal first.
func decimalText(t pgType, text []byte) string {
	s := string(text)
	if t.oid != oidMoney {
		return s
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.ReplaceAll(strings.TrimPrefix(strings.TrimPrefix(s, "-"), "$"), ",", "")
	if neg {
		return "-" + s
	}
	return s
}

// plainString is the value as decimal.handling.mode=string has it:
// BigDecimal.toPlainString of Postgres's text, which is that text (a
// numeric(p,s) is printed with its scale, and never with an exponent); NaN
// and the infinities by SpecialValueDecimal's names.
func plainString(t pgType, text []byte) string {
	switch s := decimalText(t, text); s {
	case "NaN":
		return "NAN"
	case "Infinity":
		return "POSITIVE_INFINITY"
	case "-Infinity":
		return "NEGATIVE_INFINITY"
	default:
		return s
	}
}

// decimalFloat is the value as decimal.handling.mode=double has it,
// BigDecimal.doubleValue (correctly rounded, as ParseFloat; ±Infinity
// beyond a double's range), or SpecialValueDecimal.toDouble.
func decimalFloat(t pgType, text []byte) float64 {
	f, _ := strconv.ParseFloat(decimalText(t, text), 64) // NaN and Infinity spelt as ParseFloat reads them
	return f
}

func digitsOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// bytes is the unscaled value as Java's BigInteger.toByteArray gives it:
// big-endian two's complement in the fewest bytes that keep the sign.
func (d *decimal) bytes() []byte {
	x := &d.unscaled
	if x.Sign() >= 0 {
		b := x.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -x-1 has the bits of x's complement; its length, plus the sign bit.
	var c big.Int
	c.Neg(x).Sub(&c, big.NewInt(1))
	n := c.BitLen()/8 + 1
	b := c.FillBytes(make([]byte, n))
	for i := range b {
		b[i] = ^b[i]
	}
	return b
}

// javaString is the value as Java's BigDecimal.toString writes it (what
// StringConverter and SimpleHeaderConverter write for a Decimal): plain,
// or in scientific notation when the exponent is below -6.
func (d *decimal) javaString() string {
	coeff := d.unscaled.String()
	neg := strings.HasPrefix(coeff, "-")
	coeff = strings.TrimPrefix(coeff, "-")
	adjusted := -d.scale + len(coeff) - 1
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case d.scale == 0:
		b.WriteString(coeff)
	case d.scale > 0 && adjusted >= -6:
		if pad := d.scale - len(coeff) + 1; pad > 0 {
			coeff = strings.Repeat("0", pad) + coeff
		}
		b.WriteString(coeff[:len(coeff)-d.scale])
		b.WriteByte('.')
		b.WriteString(coeff[len(coeff)-d.scale:])
	default:
		b.WriteString(coeff[:1])
		if len(coeff) > 1 {
			b.WriteByte('.')
			b.WriteString(coeff[1:])
		}
		b.WriteByte('E')
		if adjusted > 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(adjusted))
	}
	return b.String()
}

// parseClock reads HH:MM:SS[.ffffff] (hours may exceed 23) as
// microseconds.
func parseClock(s string) (int64, bool) {
	hh, rest, ok1 := strings.Cut(s, ":")
	mm, ss, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || len(mm) != 2 || len(ss) < 2 {
		return 0, false
	}
	sec, frac, _ := strings.Cut(ss, ".")
	if len(frac) > 6 || !digitsOnly(frac) {
		return 0, false
	}
	h, err1 := strconv.ParseInt(hh, 10, 64)
	m, err2 := strconv.ParseInt(mm, 10, 64)
	sc, err3 := strconv.ParseInt(sec, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || h < 0 || m > 59 || sc > 60 {
		return 0, false
	}
	us := int64(0)
	if frac != "" {
		us, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return ((h*60+m)*60+sc)*1e6 + us, true
}

// parseTimeOfDay reads a time column's text as microseconds after
// midnight (24:00:00 is a day's).
func parseTimeOfDay(text []byte) (int64, string) {
	us, ok := parseClock(string(text))
	if !ok || us > 86400e6 {
		return 0, "malformed time"
	}
	return us, ""
}

// zonedTime is a timetz as Debezium's ZonedTime: the time in UTC, as
// Java's ISO_OFFSET_TIME writes it (seconds always, the fraction without
// its trailing zeros, none when zero).
func zonedTime(text []byte) (string, string) {
	s := string(text)
	i := strings.LastIndexAny(s, "+-")
	if i < 0 {
		return "", "malformed timetz"
	}
	us, ok := parseClock(s[:i])
	if !ok {
		return "", "malformed timetz"
	}
	off := s[i+1:]
	parts := strings.Split(off, ":")
	var offSec int64
	for j, unit := range []int64{3600, 60, 1} {
		if j >= len(parts) {
			break
		}
		n, err := strconv.ParseInt(parts[j], 10, 64)
		if err != nil || len(parts) > 3 {
			return "", "malformed timetz"
		}
		offSec += n * unit
	}
	if s[i] == '+' {
		offSec = -offSec
	}
	const day = 86400e6
	us = ((us+offSec*1e6)%day + day) % day
	return string(append(appendISOClock(nil, us), 'Z')), ""
}

// parseInterval reads an interval in Postgres's default output style
// ("1 year 2 mons 3 days 04:05:06.7", "-1 days", "-00:00:01") as
// Debezium's MicroDuration: a month is 30.4375 days.
func parseInterval(text []byte) (int64, string) {
	const bad = "malformed interval (IntervalStyle postgres expected)"
	f := strings.Fields(string(text))
	var us int64
	for i := 0; i < len(f); i++ {
		if strings.Contains(f[i], ":") {
			neg := strings.HasPrefix(f[i], "-")
			c, ok := parseClock(strings.TrimLeft(f[i], "+-"))
			if !ok {
				return 0, bad
			}
			if neg {
				c = -c
			}
			us += c
			continue
		}
		if i+1 >= len(f) {
			return 0, bad
		}
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, bad
		}
		i++
		switch strings.TrimSuffix(f[i], "s") {
		case "year":
			us += n * 12 * 2629800e6 // 30.4375 days a month
		case "mon":
			us += n * 2629800e6
		case "day":
			us += n * 86400e6
		default:
			return 0, bad
		}
	}
	return us, ""
}

// isoInterval reads an interval in Postgres's default output style as
// Debezium's Interval (interval.handling.mode=string): PnYnMnDTnHnMnS with
// each part as the JDBC driver's PGInterval holds it (its seconds a double
// of whole seconds and rounded microseconds), the seconds cut to 9
// decimals without trailing zeros (Interval.toIsoString).
func isoInterval(text []byte) (string, string) {
	const bad = "malformed interval (IntervalStyle postgres expected)"
	var parts [5]int32 // years, months, days, hours, minutes
	seconds := 0.0
	f := strings.Fields(strings.ReplaceAll(string(text), "+", " "))
	value := ""
	for i, tok := range f {
		if i%2 == 0 {
			colon := strings.IndexByte(tok, ':')
			if colon < 0 {
				value = tok
				continue
			}
			neg := tok[0] == '-'
			if neg {
				tok, colon = tok[1:], colon-1
			}
			h, err1 := strconv.ParseInt(tok[:colon], 10, 32)
			rest := tok[colon+1:]
			if len(rest) < 2 || err1 != nil {
				return "", bad
			}
			m, err2 := strconv.ParseInt(rest[:2], 10, 32)
			s := 0.0
			var err3 error
			if c := strings.IndexByte(rest, ':'); c >= 0 {
				s, err3 = strconv.ParseFloat(rest[c+1:], 64)
			}
			if err2 != nil || err3 != nil {
				return "", bad
			}
			if neg {
				h, m, s = -h, -m, -s
			}
			parts[3], parts[4], seconds = int32(h), int32(m), s
			value = ""
			continue
		}
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			return "", bad
		}
		switch {
		case strings.HasPrefix(tok, "year"):
			parts[0] = int32(n)
		case strings.HasPrefix(tok, "mon"):
			parts[1] = int32(n)
		case strings.HasPrefix(tok, "day"):
			parts[2] = int32(n)
		default:
			return "", bad
		}
	}
	// PGInterval.setSeconds and getSeconds: Math.round is floor(x+0.5).
	total := int64(math.Floor(seconds*1e6 + 0.5))
	seconds = float64(total/1e6) + float64(total%1e6)/1e6

	b := make([]byte, 0, 48)
	b = append(b, 'P')
	for i, unit := range "YMDHM" {
		if i == 3 {
			b = append(b, 'T')
		}
		b = strconv.AppendInt(b, int64(parts[i]), 10)
		b = append(b, byte(unit))
	}
	b = appendCutSeconds(b, seconds)
	return string(append(b, 'S')), ""
}

// appendCutSeconds writes s as BigDecimal.valueOf(s) with a scale of at
// most 9 (rounding down), stripTrailingZeros().toPlainString().
func appendCutSeconds(b []byte, s float64) []byte {
	t := strconv.FormatFloat(s, 'f', -1, 64)
	if i := strings.IndexByte(t, '.'); i >= 0 {
		if len(t)-i-1 > 9 {
			t = t[:i+10]
		}
		t = strings.TrimRight(strings.TrimRight(t, "0"), ".")
	}
	if strings.Trim(t, "-0") == "" {
		t = "0"
	}
	return append(b, t...)
}
