package transform

import (
	"errors"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgoutbox/pgoutbox/schema"
)

// parseLiteral reads a literal as Kafka Connect's Values.parseString does
// (InsertHeader's value.literal): null, true, false, a number (the
// smallest integer type that holds it, else FLOAT32, FLOAT64 or a
// Decimal), or a string. Only the first token of the text (up to one of
// : , { } [ ] ") decides whether it is a number, so "12:30" is the INT8
// 12, as it is in Connect. What Connect would read as an array, a map, a
// date or a time is refused: pgoutbox does not reproduce those parses.
func parseLiteral(s string) (*Schema, any, error) {
	if s == "" {
		return &Schema{Type: String}, "", nil
	}
	toks := literalTokens(s)
	first := javaTrim(toks[0])
	switch {
	case len(toks) == 1 && first == "null":
		return nil, nil, nil
	case len(toks) == 1 && (first == "true" || first == "false"):
		return &Schema{Type: Boolean}, first == "true", nil
	case first == "[" || first == "{":
		return nil, nil, errors.New("Kafka Connect may read it as an array or a map, which pgoutbox does not write as a header literal")
	}
	if first == "" {
		return &Schema{Type: String}, toks[0], nil
	}
	if c := first[0]; c >= '0' && c <= '9' {
		if len(toks) >= 5 && temporal(strings.Join(toks[:5], "")) || temporal(first) {
			return nil, nil, errors.New("Kafka Connect reads it as a date or a time (with Java's lenient parsing), which pgoutbox does not write as a header literal")
		}
	}
	if c := first[0]; c >= '0' && c <= '9' || c == '+' || c == '-' {
		if sch, v, ok := parseNumber(first); ok {
			return sch, v, nil
		}
	}
	return &Schema{Type: String}, s, nil
}

// literalTokens splits s as Values.Parser does: runs of text, and each of
// : , { } [ ] " on its own unless a backslash escapes it.
func literalTokens(s string) []string {
	var out []string
	start := 0
	escaped := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			escaped = !escaped
			continue
		case ':', ',', '{', '}', '[', ']', '"':
			if !escaped {
				if start < i {
					out = append(out, s[start:i])
				}
				out = append(out, s[i:i+1])
				start = i + 1
			}
		}
		escaped = false
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// temporal tells text that Connect tries as a date (yyyy-MM-dd, 10
// characters), a time (HH:mm:ss.SSS'Z', 14) or a timestamp (25) and whose
// shape SimpleDateFormat's lenient parse may accept.
var (
	dateShape      = regexp.MustCompile(`^\d+-\d+-\d+`)
	timeShape      = regexp.MustCompile(`^\d+:\d+:\d+\.\d+Z`)
	timestampShape = regexp.MustCompile(`^\d+-\d+-\d+T\d+:\d+:\d+\.\d+Z`)
)

func temporal(tok string) bool {
	tok = strings.ReplaceAll(tok, `\:`, ":")
	switch len(tok) {
	case 10:
		return dateShape.MatchString(tok)
	case 14:
		return timeShape.MatchString(tok)
	case 25:
		return timestampShape.MatchString(tok)
	}
	return false
}

// javaDecimal is Java's BigDecimal(String) syntax.
var javaDecimal = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$`)

// parseNumber is Values.parseAsNumber.
func parseNumber(tok string) (*Schema, any, bool) {
	if !javaDecimal.MatchString(tok) {
		return nil, nil, false
	}
	mant, exp, _ := strings.Cut(strings.ToLower(tok), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	scale := len(frac)
	if exp != "" {
		e, err := strconv.Atoi(exp)
		if err != nil {
			return nil, nil, false
		}
		scale -= e
	}
	var unscaled big.Int
	unscaled.SetString(strings.TrimPrefix(whole+frac, "+"), 10)
	if sch, v, ok := exactInteger(&unscaled, scale); ok {
		return sch, v, true
	}
	if scale != 0 {
		if f, err := strconv.ParseFloat(tok, 32); err == nil && !math.IsInf(f, 0) {
			return &Schema{Type: Float32}, f, true
		}
		if f, err := strconv.ParseFloat(tok, 64); err == nil && !math.IsInf(f, 0) {
			return &Schema{Type: Float64}, f, true
		}
	}
	v32 := int32(1)
	return &Schema{Type: Bytes, Name: decimalName, Version: &v32, Params: []Param{{"scale", strconv.Itoa(scale)}}},
		schema.DecimalBytes(&unscaled), true
}

// exactInteger is Values.parseAsExactDecimal: a whole number of at most
// 1e19 that fits a long, in the smallest integer type that holds it.
func exactInteger(unscaled *big.Int, scale int) (*Schema, any, bool) {
	var v big.Int
	v.Set(unscaled)
	abs := new(big.Int).Abs(&v)
	pow := func(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }
	if v.Sign() != 0 {
		// abs < 1: not an integer; abs > 1e19: too large.
		if scale > 0 && abs.Cmp(pow(scale)) < 0 {
			return nil, nil, false
		}
	}
	switch {
	case scale > 0:
		var r big.Int
		if v.QuoRem(&v, pow(scale), &r); r.Sign() != 0 {
			return nil, nil, false
		}
	case scale < 0:
		if -scale > 20 {
			return nil, nil, false
		}
		v.Mul(&v, pow(-scale))
	}
	if new(big.Int).Abs(&v).Cmp(pow(19)) > 0 || !v.IsInt64() {
		return nil, nil, false
	}
	n := v.Int64()
	switch {
	case n == int64(int8(n)):
		return &Schema{Type: Int8}, n, true
	case n == int64(int16(n)):
		return &Schema{Type: Int16}, n, true
	case n == int64(int32(n)):
		return &Schema{Type: Int32}, n, true
	}
	return &Schema{Type: Int64}, n, true
}
