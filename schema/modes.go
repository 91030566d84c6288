package schema

import (
	"fmt"
	"strings"
)

// Debezium's value options: how its PostgreSQL connector types temporal,
// numeric and binary columns (RelationalDatabaseConnectorConfig,
// CommonConnectorConfig). Each is read as Debezium reads it: trimmed, in
// any case; the empty string is the default.

// TimePrecision is Debezium's time.precision.mode.
type TimePrecision string

// The time precisions.
const (
	// TimeAdaptive (the default): date is Debezium's Date (days), time
	// Time (ms) up to time(3) and MicroTime (µs) above, timestamp
	// Timestamp (ms) up to timestamp(3) and MicroTimestamp (µs) above.
	TimeAdaptive TimePrecision = "adaptive"
	// TimeAdaptiveMicroseconds is TimeAdaptive with every time column a
	// MicroTime.
	TimeAdaptiveMicroseconds TimePrecision = "adaptive_time_microseconds"
	// TimeConnect: Kafka Connect's own Date (days), Time (ms, int32) and
	// Timestamp (ms), java.util.Date values in Debezium's records.
	TimeConnect TimePrecision = "connect"
	// TimeISOString: ISO-8601 strings in UTC, IsoDate ("2020-01-02Z"),
	// IsoTime ("03:04:05.678Z") and IsoTimestamp.
	TimeISOString TimePrecision = "isostring"
	// TimeMicroseconds: Date, MicroTime and MicroTimestamp at any
	// precision.
	TimeMicroseconds TimePrecision = "microseconds"
	// TimeNanoseconds: Date, NanoTime and NanoTimestamp at any precision;
	// a timestamp outside 1677-09-21 to 2262-04-11 has no value.
	TimeNanoseconds TimePrecision = "nanoseconds"
)

// DecimalHandling is Debezium's decimal.handling.mode, for numeric and
// money columns.
type DecimalHandling string

// The decimal handlings.
const (
	// DecimalPrecise (the default): Kafka Connect's Decimal, or
	// Debezium's VariableScaleDecimal for an unconstrained numeric; NaN
	// and the infinities are null.
	DecimalPrecise DecimalHandling = "precise"
	// DecimalString: the value's plain text (BigDecimal.toPlainString),
	// NaN and the infinities by their name.
	DecimalString DecimalHandling = "string"
	// DecimalDouble: a double.
	DecimalDouble DecimalHandling = "double"
)

// BinaryHandling is Debezium's binary.handling.mode, for bytea columns.
type BinaryHandling string

// The binary handlings.
const (
	// BinaryBytes (the default): bytes.
	BinaryBytes BinaryHandling = "bytes"
	// BinaryBase64: a string, java.util.Base64's encoding with padding.
	BinaryBase64 BinaryHandling = "base64"
	// BinaryBase64URLSafe: a string, the URL-safe alphabet with padding.
	BinaryBase64URLSafe BinaryHandling = "base64-url-safe"
	// BinaryHex: a string of lower-case hex digits.
	BinaryHex BinaryHandling = "hex"
)

// IntervalHandling is Debezium's interval.handling.mode, for interval
// columns.
type IntervalHandling string

// The interval handlings.
const (
	// IntervalNumeric (the default): MicroDuration, microseconds with a
	// month of 30.4375 days.
	IntervalNumeric IntervalHandling = "numeric"
	// IntervalString: Interval, the ISO-8601 text PnYnMnDTnHnMnS with each
	// part as Postgres gives it.
	IntervalString IntervalHandling = "string"
)

// ParseTimePrecision reads a time.precision.mode.
func ParseTimePrecision(s string) (TimePrecision, error) {
	return parseMode(s, TimeAdaptive, TimeAdaptiveMicroseconds, TimeConnect, TimeISOString, TimeMicroseconds, TimeNanoseconds)
}

// ParseDecimalHandling reads a decimal.handling.mode.
func ParseDecimalHandling(s string) (DecimalHandling, error) {
	return parseMode(s, DecimalPrecise, DecimalString, DecimalDouble)
}

// ParseBinaryHandling reads a binary.handling.mode.
func ParseBinaryHandling(s string) (BinaryHandling, error) {
	return parseMode(s, BinaryBytes, BinaryBase64, BinaryBase64URLSafe, BinaryHex)
}

// ParseIntervalHandling reads an interval.handling.mode.
func ParseIntervalHandling(s string) (IntervalHandling, error) {
	return parseMode(s, IntervalNumeric, IntervalString)
}

// parseMode finds s among values, trimmed and in any case; "" is the
// first, the default.
func parseMode[T ~string](s string, values ...T) (T, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return values[0], nil
	}
	for _, v := range values {
		if string(v) == s {
			return v, nil
		}
	}
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = string(v)
	}
	return "", fmt.Errorf("schema: unknown mode %q (want %s)", s, strings.Join(names, ", "))
}

// valueModes are the value options in the form the per-event path
// compares: the zero value is Debezium's defaults.
type valueModes struct {
	time     timeMode
	decimal  decimalMode
	binary   binaryMode
	interval intervalMode
}

type (
	timeMode    uint8
	decimalMode uint8
	binaryMode  uint8
	// intervalMode is interval.handling.mode: numeric (0) or string.
	intervalMode uint8
)

const intervalString intervalMode = 1

const (
	timeAdaptive timeMode = iota
	timeAdaptiveMicros
	timeConnect
	timeISO
	timeMicros
	timeNanos
)

const (
	decimalPrecise decimalMode = iota
	decimalString
	decimalDouble
)

const (
	binaryBytes binaryMode = iota
	binaryBase64
	binaryBase64URL
	binaryHex
)

// modes checks and compacts the configuration's value options.
func (c DebeziumConfig) modes() (valueModes, error) {
	var m valueModes
	t, err := ParseTimePrecision(string(c.TimePrecision))
	if err != nil {
		return m, fmt.Errorf("time precision: %w", err)
	}
	d, err := ParseDecimalHandling(string(c.DecimalHandling))
	if err != nil {
		return m, fmt.Errorf("decimal handling: %w", err)
	}
	b, err := ParseBinaryHandling(string(c.BinaryHandling))
	if err != nil {
		return m, fmt.Errorf("binary handling: %w", err)
	}
	iv, err := ParseIntervalHandling(string(c.IntervalHandling))
	if err != nil {
		return m, fmt.Errorf("interval handling: %w", err)
	}
	if iv == IntervalString {
		m.interval = intervalString
	}
	m.time = map[TimePrecision]timeMode{TimeAdaptive: timeAdaptive, TimeAdaptiveMicroseconds: timeAdaptiveMicros, TimeConnect: timeConnect,
		TimeISOString: timeISO, TimeMicroseconds: timeMicros, TimeNanoseconds: timeNanos}[t]
	m.decimal = map[DecimalHandling]decimalMode{DecimalPrecise: decimalPrecise, DecimalString: decimalString, DecimalDouble: decimalDouble}[d]
	m.binary = map[BinaryHandling]binaryMode{BinaryBytes: binaryBytes, BinaryBase64: binaryBase64, BinaryBase64URLSafe: binaryBase64URL, BinaryHex: binaryHex}[b]
	return m, nil
}

// javaKind is what a converter tells apart in a column's value as
// Debezium's record holds it.
type javaKind uint8

const (
	javaOther javaKind = iota
	// javaBytes is a ByteBuffer: bytea under binary.handling.mode=bytes.
	javaBytes
	// javaDate is a java.util.Date: date, time and timestamp under
	// time.precision.mode=connect.
	javaDate
	// javaString is a String: a column of Connect type string.
	javaString
)

// kindFor is the Java kind of a value of type t as conv tells kinds
// apart: a text converter also tells a String (a column of Connect type
// string) from the rest; the others need not, and are spared the lookup
// on every value.
func (m valueModes) kindFor(conv Converter, t pgType) javaKind {
	k := m.kind(t)
	if k == javaOther && conv.base() == ConvText {
		if ct, ok := connectTypeOfType(t, m); ok && ct.typ == "string" {
			return javaString
		}
	}
	return k
}

// kind is the Java kind of a value of type t.
func (m valueModes) kind(t pgType) javaKind {
	switch t.oid {
	case oidBytea:
		if m.binary == binaryBytes {
			return javaBytes
		}
	case oidDate, oidTime, oidTimestamp:
		if m.time == timeConnect {
			return javaDate
		}
	}
	return javaOther
}

// valueOf is a column's text as Debezium's converter takes it: nil (a
// NULL) where the converter gives up on a value of a nullable column
// (JdbcValueConverters.convertValue: a timestamp outside an int64 of
// nanoseconds under time.precision.mode=nanoseconds). A NOT NULL column's
// such value stays, and is a poison row, where Debezium's task fails.
func (m valueModes) valueOf(t pgType, text []byte, optional bool) []byte {
	if m.time != timeNanos || t.oid != oidTimestamp || !optional || text == nil {
		return text
	}
	if _, reason := temporalValue(t, m, text); reason != "" {
		return nil
	}
	return text
}
