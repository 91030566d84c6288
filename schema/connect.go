package schema

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// This file renders column values the way Debezium's Postgres connector
// types them (Kafka Connect schemas, "Data type mappings" in Debezium's
// postgresql.adoc) and the way Kafka's JsonConverter writes them
// (JsonConverter.convertToJson and asJsonSchema, Jackson's escaping).

// More Postgres type OIDs (pg_type.dat).
const (
	oidBool    uint32 = 16
	oidBytea   uint32 = 17
	oidChar    uint32 = 18 // "char", one byte
	oidName    uint32 = 19
	oidInt8    uint32 = 20
	oidInt2    uint32 = 21
	oidInt4    uint32 = 23
	oidFloat4  uint32 = 700
	oidFloat8  uint32 = 701
	oidBpchar  uint32 = 1042
	oidDate    uint32 = 1082
	oidUUID    uint32 = 2950
	oidNumeric uint32 = 1700
	oidTime    uint32 = 1083
	oidTimetz  uint32 = 1266
	oidIntvl   uint32 = 1186
	oidMoney   uint32 = 790

	oidOID       uint32 = 26
	oidCidr      uint32 = 650
	oidMacaddr8  uint32 = 774
	oidMacaddr   uint32 = 829
	oidInet      uint32 = 869
	oidTsvector  uint32 = 3614
	oidInt4Range uint32 = 3904
	oidNumRange  uint32 = 3906
	oidTsRange   uint32 = 3908
	oidTstzRange uint32 = 3910
	oidDateRange uint32 = 3912
	oidInt8Range uint32 = 3926
)

// pgType is a column's type: its OID and modifier (atttypmod, -1 for
// none).
type pgType struct {
	oid    uint32
	mod    int32
	mapper ColumnMapper // the column's, which adds to its schema's parameters
}

func (b *Binding) typ(f int) pgType {
	t := pgType{oid: b.oid[f], mod: b.mod[f]}
	if i := b.idx[f]; i >= 0 && i < len(b.cols) {
		t.mapper = b.cols[i].Mapper
	}
	return t
}

// numericScale is a numeric(p,s) column's precision and scale; ok is false
// for an unconstrained numeric.
func (t pgType) numericScale() (precision, scale int, ok bool) {
	if t.mod < 4 { // VARHDRSZ: typmod is ((p << 16) | s) + 4
		return 0, 0, false
	}
	m := int(t.mod - 4)
	return m >> 16 & 0xffff, m & 0xffff, true
}

// connectType is a Kafka Connect schema type with Debezium's logical name.
type connectType struct {
	typ     string // Connect type as JsonConverter names it: string, int64, ...
	fields  string // a struct's fields, as JSON: [{…},…]
	name    string // logical name, "" for none
	version int    // logical version, 0 for none
	doc     string
	params  string // parameters, as a JSON object, "" for none
}

// variableScaleDecimal is Debezium's type of an unconstrained numeric.
var variableScaleDecimal = connectType{typ: "struct",
	fields: `[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}]`,
	name:   "io.debezium.data.VariableScaleDecimal", version: 1, doc: "Variable scaled decimal"}

// connectTypeOf maps a Postgres type as Debezium's PostgreSQL connector
// types it (PostgresValueConverter.schemaBuilder) under the value options m
// (interval.handling.mode=numeric). ok is false for types Debezium does
// not map either (it drops such columns, include.unknown.datatypes=false).
func connectTypeOf(t pgType, m valueModes) (ct connectType, ok bool) {
	ct, ok = connectTypeOfType(t, m)
	if ok && t.mapper != (ColumnMapper{}) {
		ct.params = t.mapper.addParams(ct.params, t)
	}
	return ct, ok
}

// connectTypeOfType is connectTypeOf of the type alone.
func connectTypeOfType(t pgType, m valueModes) (ct connectType, ok bool) {
	switch oid := t.oid; oid {
	case oidBool:
		return connectType{typ: "boolean"}, true
	case oidInt2:
		return connectType{typ: "int16"}, true
	case oidInt4:
		return connectType{typ: "int32"}, true
	case oidInt8:
		return connectType{typ: "int64"}, true
	case oidFloat4:
		return connectType{typ: "float"}, true
	case oidFloat8:
		return connectType{typ: "double"}, true
	case oidText, oidVarchar, oidBpchar, oidName, oidInet, oidCidr, oidMacaddr, oidMacaddr8,
		oidInt4Range, oidInt8Range, oidNumRange, oidTsRange, oidTstzRange, oidDateRange:
		// The network types and the ranges as PostgreSQL prints them.
		return connectType{typ: "string"}, true
	case oidXML:
		return connectType{typ: "string", name: "io.debezium.data.Xml", version: 1}, true
	case oidTsvector:
		return connectType{typ: "string", name: "io.debezium.data.Tsvector", version: 1}, true
	case oidOID:
		return connectType{typ: "int64"}, true
	case oidUUID:
		return connectType{typ: "string", name: "io.debezium.data.Uuid", version: 1}, true
	case oidJSON, oidJSONB:
		return connectType{typ: "string", name: "io.debezium.data.Json", version: 1}, true
	case oidTimestamptz:
		return connectType{typ: "string", name: "io.debezium.time.ZonedTimestamp", version: 1}, true
	case oidTimetz:
		return connectType{typ: "string", name: "io.debezium.time.ZonedTime", version: 1}, true
	case oidIntvl:
		if m.interval == intervalString {
			return connectType{typ: "string", name: "io.debezium.time.Interval", version: 1}, true
		}
		return connectType{typ: "int64", name: "io.debezium.time.MicroDuration", version: 1}, true
	case oidTimestamp, oidDate, oidTime:
		return temporalType(t, m), true
	case oidBytea:
		if m.binary != binaryBytes {
			return connectType{typ: "string"}, true
		}
		return connectType{typ: "bytes"}, true
	case oidNumeric, oidMoney:
		return decimalType(t, m), true
	}
	return connectType{}, false
}

// temporalType is a date, time or timestamp column's type
// (TemporalPrecisionMode's builders).
func temporalType(t pgType, m valueModes) connectType {
	millis := t.mod >= 0 && t.mod <= 3 // time(0-3), timestamp(0-3)
	adaptive := m.time == timeAdaptive || m.time == timeAdaptiveMicros
	switch {
	case m.time == timeConnect && t.oid == oidDate:
		return connectType{typ: "int32", name: "org.apache.kafka.connect.data.Date", version: 1}
	case m.time == timeConnect && t.oid == oidTime:
		return connectType{typ: "int32", name: "org.apache.kafka.connect.data.Time", version: 1}
	case m.time == timeConnect:
		return connectType{typ: "int64", name: "org.apache.kafka.connect.data.Timestamp", version: 1}
	case m.time == timeISO:
		return connectType{typ: "string", name: map[uint32]string{oidDate: "io.debezium.time.IsoDate", oidTime: "io.debezium.time.IsoTime",
			oidTimestamp: "io.debezium.time.IsoTimestamp"}[t.oid], version: 1}
	case t.oid == oidDate:
		return connectType{typ: "int32", name: "io.debezium.time.Date", version: 1}
	case t.oid == oidTime && millis && m.time == timeAdaptive:
		return connectType{typ: "int32", name: "io.debezium.time.Time", version: 1}
	case t.oid == oidTime && m.time == timeNanos:
		return connectType{typ: "int64", name: "io.debezium.time.NanoTime", version: 1}
	case t.oid == oidTime:
		return connectType{typ: "int64", name: "io.debezium.time.MicroTime", version: 1}
	case millis && adaptive:
		return connectType{typ: "int64", name: "io.debezium.time.Timestamp", version: 1}
	case m.time == timeNanos:
		return connectType{typ: "int64", name: "io.debezium.time.NanoTimestamp", version: 1}
	}
	return connectType{typ: "int64", name: "io.debezium.time.MicroTimestamp", version: 1}
}

// decimalType is a numeric or money column's type (numericSchema,
// moneySchema; money.fraction.digits=2).
func decimalType(t pgType, m valueModes) connectType {
	switch m.decimal {
	case decimalString:
		return connectType{typ: "string"}
	case decimalDouble:
		return connectType{typ: "double"}
	}
	if t.oid == oidMoney {
		return connectType{typ: "bytes", name: "org.apache.kafka.connect.data.Decimal", version: 1, params: `{"scale":"2"}`}
	}
	p, s, ok := t.numericScale()
	if !ok {
		return variableScaleDecimal
	}
	return connectType{typ: "bytes", name: "org.apache.kafka.connect.data.Decimal", version: 1,
		params: `{"scale":"` + strconv.Itoa(s) + `","connect.decimal.precision":"` + strconv.Itoa(p) + `"}`}
}

// appendConnectSchema appends a JsonConverter field schema:
// {"type":…,"optional":…[,"name":…,"version":…][,"field":…]}.
func appendConnectSchema(dst []byte, ct connectType, optional bool, field string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, ct.typ...)
	dst = append(dst, '"')
	if ct.fields != "" {
		dst = append(dst, `,"fields":`...)
		dst = append(dst, ct.fields...)
	}
	dst = append(dst, `,"optional":`...)
	dst = strconv.AppendBool(dst, optional)
	if ct.name != "" {
		dst = append(dst, `,"name":`...)
		dst = appendJavaString(dst, ct.name)
	}
	if ct.version != 0 {
		dst = append(dst, `,"version":`...)
		dst = strconv.AppendInt(dst, int64(ct.version), 10)
	}
	if ct.doc != "" {
		dst = append(dst, `,"doc":`...)
		dst = appendJavaString(dst, ct.doc)
	}
	if ct.params != "" {
		dst = append(dst, `,"parameters":`...)
		dst = append(dst, ct.params...)
	}
	if field != "" {
		dst = append(dst, `,"field":`...)
		dst = appendJavaString(dst, field)
	}
	return append(dst, '}')
}

// appendConnectValue appends a column's text value as JsonConverter writes
// Debezium's value for it under the value options m; nil text is null.
// reason is set when the text is not a value of the type (a poison row).
func appendConnectValue(dst []byte, t pgType, m valueModes, text []byte) ([]byte, string) {
	if text == nil {
		return append(dst, "null"...), ""
	}
	switch oid := t.oid; oid {
	case oidBool:
		switch string(text) {
		case "t", "true":
			return append(dst, "true"...), ""
		case "f", "false":
			return append(dst, "false"...), ""
		}
		return dst, "malformed boolean"
	case oidInt2, oidInt4, oidInt8, oidOID:
		if _, err := strconv.ParseInt(string(text), 10, 64); err != nil {
			return dst, "malformed integer"
		}
		return append(dst, text...), ""
	case oidFloat4, oidFloat8:
		bits := 64
		if oid == oidFloat4 {
			bits = 32
		}
		f, err := strconv.ParseFloat(string(text), bits)
		if err != nil && !math.IsInf(f, 0) {
			return dst, "malformed float"
		}
		return appendJavaDouble(dst, f, bits), ""
	case oidTimestamptz:
		ts, reason := parseTimestamp(text)
		if reason != "" {
			return dst, reason
		}
		dst = append(dst, '"')
		digits := 6
		if t.mod >= 0 && t.mod < 6 {
			digits = int(t.mod)
		}
		dst = appendZonedTimestamp(dst, ts, digits)
		return append(dst, '"'), ""
	case oidTimestamp, oidDate, oidTime:
		if m.time == timeISO {
			return appendISOTemporal(dst, t, text)
		}
		n, reason := temporalValue(t, m, text)
		if reason != "" {
			return dst, reason
		}
		return strconv.AppendInt(dst, n, 10), ""
	case oidBytea:
		b, ok := decodeByteaHex(text)
		if !ok {
			return dst, "malformed bytea (hex output expected)"
		}
		dst = append(dst, '"')
		if m.binary == binaryBytes {
			// JsonConverter writes bytes in base64.
			dst = base64.StdEncoding.AppendEncode(dst, b)
		} else {
			dst = appendBinaryString(dst, m, b)
		}
		return append(dst, '"'), ""
	case oidNumeric, oidMoney:
		return appendDecimalValue(dst, t, m, text)
	case oidTimetz:
		s, reason := zonedTime(text)
		if reason != "" {
			return dst, reason
		}
		return appendJavaString(dst, s), ""
	case oidIntvl:
		if m.interval == intervalString {
			iso, reason := isoInterval(text)
			if reason != "" {
				return dst, reason
			}
			return appendJavaString(dst, iso), ""
		}
		us, reason := parseInterval(text)
		if reason != "" {
			return dst, reason
		}
		return strconv.AppendInt(dst, us, 10), ""
	}
	return appendJavaString(dst, text), ""
}

// temporalValue is a date, time or timestamp column's number: days,
// milliseconds, microseconds or nanoseconds, after its type
// (temporalType). Under time.precision.mode=connect it is the
// java.util.Date's milliseconds (a date's at its start, a time's on the
// epoch's day), which Kafka's Date and Time write as days and int32
// milliseconds.
func temporalValue(t pgType, m valueModes, text []byte) (int64, string) {
	millis := t.mod >= 0 && t.mod <= 3
	adaptive := m.time == timeAdaptive || m.time == timeAdaptiveMicros
	if t.oid == oidTime {
		us, reason := parseTimeOfDay(text)
		switch {
		case m.time == timeConnect, millis && m.time == timeAdaptive:
			us /= 1000
		case m.time == timeNanos:
			us *= 1000
		}
		return us, reason
	}
	ts, reason := parseTimestamp(text)
	switch {
	case reason != "":
		return 0, reason
	case t.oid == oidDate:
		return ts.Unix() / 86400, ""
	case millis && adaptive, m.time == timeConnect:
		return ts.UnixMilli(), "" // floored, as Instant.toEpochMilli
	case m.time == timeNanos:
		return epochNanos(ts)
	}
	return ts.UnixMicro(), ""
}

// epochNanos is NanoTimestamp.toEpochNanos: the day's start in
// nanoseconds (Math.multiplyExact), plus the nanoseconds into the day
// (Math.addExact); either overflowing int64 is no value.
func epochNanos(ts time.Time) (int64, string) {
	const dayNanos int64 = 86400e9
	const maxDay = math.MaxInt64 / dayNanos
	sec := ts.Unix()
	day := sec / 86400
	if sec%86400 < 0 {
		day--
	}
	into := (sec-day*86400)*1e9 + int64(ts.Nanosecond())
	if day < -maxDay || day > maxDay || day > 0 && into > math.MaxInt64-day*dayNanos {
		return 0, "timestamp outside the range of nanoseconds since the epoch (about 1677-09-21 to 2262-04-11)"
	}
	return day*dayNanos + into, ""
}

// appendISOTemporal appends a date, time or timestamp as
// time.precision.mode=isostring's JSON string: Java's ISO_OFFSET_DATE,
// ISO_OFFSET_TIME and ISO_OFFSET_DATE_TIME in UTC (IsoDate, IsoTime,
// IsoTimestamp): seconds always, the fraction without its trailing zeros,
// none when zero. A time of 24:00:00 is the next day's 00:00:00.
func appendISOTemporal(dst []byte, t pgType, text []byte) ([]byte, string) {
	if t.oid == oidTime {
		us, reason := parseTimeOfDay(text)
		if reason != "" {
			return dst, reason
		}
		dst = appendISOClock(append(dst, '"'), us%86400e6)
		return append(dst, `Z"`...), ""
	}
	ts, reason := parseTimestamp(text)
	if reason != "" {
		return dst, reason
	}
	ts = ts.UTC()
	dst = ts.AppendFormat(append(dst, '"'), "2006-01-02")
	if t.oid == oidTimestamp {
		dst = appendISOClock(append(dst, 'T'), int64(ts.Hour()*3600+ts.Minute()*60+ts.Second())*1e6+int64(ts.Nanosecond()/1000))
	}
	return append(dst, `Z"`...), ""
}

// appendISOClock appends a time of day, in microseconds, as Java's
// ISO_LOCAL_TIME writes it: HH:mm:ss, then the fraction without its
// trailing zeros, none when zero.
func appendISOClock(dst []byte, us int64) []byte {
	sec := us / 1e6
	for i, v := range [...]int64{sec / 3600, sec / 60 % 60, sec % 60} {
		if i > 0 {
			dst = append(dst, ':')
		}
		dst = append(dst, byte('0'+v/10), byte('0'+v%10))
	}
	if f := us % 1e6; f != 0 {
		fs := strconv.FormatInt(f+1e6, 10)[1:]
		dst = append(dst, '.')
		dst = append(dst, strings.TrimRight(fs, "0")...)
	}
	return dst
}

// appendBinaryString appends bytes as binary.handling.mode's string
// (JdbcValueConverters.convertBinaryTo*): java.util.Base64's encoders,
// padded, or Debezium's HexConverter, lower case.
func appendBinaryString(dst []byte, m valueModes, b []byte) []byte {
	switch m.binary {
	case binaryBase64URL:
		return base64.URLEncoding.AppendEncode(dst, b)
	case binaryHex:
		return hex.AppendEncode(dst, b)
	}
	return base64.StdEncoding.AppendEncode(dst, b)
}

// appendDecimalValue appends a numeric or money value as JsonConverter
// writes it under decimal.handling.mode: Decimal's bytes in base64 (a
// VariableScaleDecimal's {scale, value}), the plain text as a string, or
// a double. NaN and the infinities have no BigDecimal: null when precise,
// else SpecialValueDecimal's name or Double's.
func appendDecimalValue(dst []byte, t pgType, m valueModes, text []byte) ([]byte, string) {
	d, reason := parseDecimal(t, text)
	switch {
	case reason != "":
		return append(dst, "null"...), reason
	case m.decimal == decimalString:
		return appendJavaString(dst, plainString(t, text)), ""
	case m.decimal == decimalDouble:
		return appendJavaDouble(dst, decimalFloat(t, text), 64), ""
	case d.special:
		return append(dst, "null"...), ""
	}
	if _, _, ok := t.numericScale(); !ok && t.oid == oidNumeric {
		dst = append(dst, `{"scale":`...)
		dst = strconv.AppendInt(dst, int64(d.scale), 10)
		dst = append(dst, `,"value":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, d.bytes())
		return append(dst, `"}`...), ""
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, d.bytes())
	return append(dst, '"'), ""
}

// appendStringValue appends a column's value as StringConverter or
// SimpleHeaderConverter write it: the Connect value's text. Debezium's
// values of strings, integers and booleans print as Postgres prints them,
// except booleans (t/f) and the logical types. A java.util.Date (time
// precision connect) is SimpleHeaderConverter's text of it (Values); a
// StringConverter's, Date.toString in the worker's zone, is refused
// before (Converter.For).
func appendStringValue(dst []byte, t pgType, m valueModes, text []byte) ([]byte, string) {
	switch t.oid {
	case oidNumeric, oidMoney:
		d, reason := parseDecimal(t, text)
		switch {
		case reason != "":
			return dst, reason
		case m.decimal == decimalString:
			return append(dst, plainString(t, text)...), ""
		case m.decimal == decimalDouble:
			v := appendJavaDouble(nil, decimalFloat(t, text), 64)
			return append(dst, bytes.Trim(v, `"`)...), "" // Double.toString: NaN unquoted
		case d.special:
			return dst, "" // Kafka Connect's text of a null header: none
		}
		if _, _, ok := t.numericScale(); ok || t.oid == oidMoney {
			return append(dst, d.javaString()...), ""
		}
		// A VariableScaleDecimal is a struct: its JSON text.
		return appendConnectValue(dst, t, m, text)
	case oidDate, oidTime, oidTimestamp:
		if m.time == timeConnect {
			ms, reason := temporalValue(t, m, text)
			if t.oid == oidDate {
				ms *= 86400000
			}
			return AppendValuesDate(dst, ms), reason
		}
	case oidBytea:
		if m.binary != binaryBytes {
			b, ok := decodeByteaHex(text)
			if !ok {
				return dst, "malformed bytea (hex output expected)"
			}
			return appendBinaryString(dst, m, b), ""
		}
	}
	switch t.oid {
	case oidBool, oidFloat4, oidFloat8, oidTimestamptz, oidTimestamp, oidDate, oidBytea, oidTime, oidTimetz, oidIntvl:
		v, reason := appendConnectValue(nil, t, m, text)
		if reason != "" {
			return dst, reason
		}
		if len(v) > 0 && v[0] == '"' {
			s, err := strconv.Unquote(string(v))
			if err == nil {
				return append(dst, s...), ""
			}
		}
		return append(dst, v...), ""
	}
	return append(dst, text...), ""
}

// AppendValuesDate writes a java.util.Date of ms milliseconds as Kafka
// Connect's Values.convertToString does (dateFormatFor): HH:mm:ss.SSS'Z'
// below one day after the epoch (every earlier instant too), yyyy-MM-dd at
// a day's start, else yyyy-MM-dd'T'HH:mm:ss.SSS'Z'. Its SimpleDateFormat
// takes the JVM's zone, with a literal Z: this is a worker in UTC.
func AppendValuesDate(dst []byte, ms int64) []byte {
	const day = 86400000
	t := time.UnixMilli(ms).UTC()
	switch {
	case ms < day:
		return t.AppendFormat(dst, "15:04:05.000Z")
	case ms%day == 0:
		return t.AppendFormat(dst, "2006-01-02")
	}
	return t.AppendFormat(dst, "2006-01-02T15:04:05.000Z")
}

// appendZonedTimestamp writes t as Debezium's ZonedTimestamp for a
// timestamptz column of a precision of digits (6 by default): ISO-8601 in
// UTC with exactly that many fractional digits and "Z".
func appendZonedTimestamp(dst []byte, t time.Time, digits int) []byte {
	layout := "2006-01-02T15:04:05"
	if digits > 0 {
		layout += "." + "000000"[:digits]
	}
	return t.UTC().AppendFormat(dst, layout+"Z07:00")
}

func decodeByteaHex(text []byte) ([]byte, bool) {
	if len(text) < 2 || text[0] != '\\' || text[1] != 'x' || len(text)%2 != 0 {
		return nil, false
	}
	out := make([]byte, (len(text)-2)/2)
	for i := range out {
		v, err := strconv.ParseUint(string(text[2+2*i:4+2*i]), 16, 8)
		if err != nil {
			return nil, false
		}
		out[i] = byte(v)
	}
	return out, true
}

// appendJavaString appends s as a JSON string escaped as Jackson does:
// '"' and '\\' with a backslash, \b \t \n \f \r in short form, the other
// control characters below U+0020 as \u00XX with upper-case hex, and a
// character beyond U+FFFF (an emoji) as its UTF-16 surrogates, \uD83C\uDF89
// (Jackson's UTF-8 generator does not combine them by default,
// COMBINE_UNICODE_SURROGATES_IN_UTF8); everything else, other non-ASCII
// included, as is.
func appendJavaString[T ~string | ~[]byte](dst []byte, s T) []byte {
	const hex = "0123456789ABCDEF"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0xF0 {
			continue
		}
		if c >= 0xF0 {
			// The lead byte of a 4-byte UTF-8 sequence.
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+4, len(s))]))
			if r == utf8.RuneError || size != 4 {
				continue
			}
			dst = append(dst, s[start:i]...)
			hi, lo := utf16.EncodeRune(r)
			for _, u := range [2]rune{hi, lo} {
				dst = append(dst, '\\', 'u', hex[u>>12&0xf], hex[u>>8&0xf], hex[u>>4&0xf], hex[u&0xf])
			}
			i += size - 1
			start = i + 1
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJavaDouble appends f as Java's Double.toString (Float.toString for
// bits 32) writes it, which is how Jackson writes doubles: the shortest
// digits that round-trip, at least one digit after the point, and
// computerized scientific notation outside [1e-3, 1e7). NaN and the
// infinities are written as JSON strings, as Jackson does by default
// (WRITE_NAN_AS_STRINGS).
func appendJavaDouble(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	abs := math.Abs(f)
	if abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return append(dst, s...)
	}
	s := strconv.FormatFloat(f, 'e', -1, bits) // d.ddde±xx
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	dst = append(dst, mant...)
	dst = append(dst, 'E')
	return strconv.AppendInt(dst, int64(e), 10)
}

// MapsType tells whether a change event carries a column of the type oid;
// it leaves out one of any other type (an enum, an array, a domain, an
// extension's), as Debezium leaves out the types it does not know.
func MapsType(oid uint32) bool {
	_, ok := connectTypeOfType(pgType{oid: oid, mod: -1}, valueModes{})
	return ok
}
