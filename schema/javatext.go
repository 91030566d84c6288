package schema

import "math/big"

// What package transform needs to write Kafka Connect data as Kafka's
// converters write it, from the same code that writes the router's records.

// AppendJSONString appends s as a JSON string escaped as Jackson, and so
// JsonConverter, escapes it.
func AppendJSONString(dst []byte, s string) []byte { return appendJavaString(dst, s) }

// AppendJSONFloat appends f as JsonConverter writes a FLOAT64 (bits 64) or
// FLOAT32 (bits 32): Java's Double.toString or Float.toString, NaN and the
// infinities as JSON strings.
func AppendJSONFloat(dst []byte, f float64, bits int) []byte { return appendJavaDouble(dst, f, bits) }

// JavaDecimalString is a Decimal's text as Java's BigDecimal.toString
// writes it (StringConverter, SimpleHeaderConverter).
func JavaDecimalString(unscaled *big.Int, scale int) string {
	d := decimal{scale: scale}
	d.unscaled.Set(unscaled)
	return d.javaString()
}

// DecimalBytes is a Decimal's unscaled value as Kafka Connect holds it:
// Java's BigInteger.toByteArray, big-endian two's complement in the
// fewest bytes that keep the sign.
func DecimalBytes(unscaled *big.Int) []byte {
	var d decimal
	d.unscaled.Set(unscaled)
	return d.bytes()
}
