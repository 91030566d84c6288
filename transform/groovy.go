package transform

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf16"
)

// This file is a subset of Groovy 4 expressions, the language Debezium's
// scripting transforms (Filter, ContentBasedRouter) run under
// language=jsr223.groovy, evaluated as Groovy evaluates them on the
// variables Debezium binds (Jsr223Engine): value, key, topic and header.
//
// The subset: property access (. and ?.) on structs and headers; the
// literals true, false, null, numbers and strings without interpolation;
// == != < <= > >= with Groovy's number, string and null rules; in and
// !in on a list literal (Java's equals, as List.contains); && || !;
// unary minus; parentheses; the ternary ?: and the Elvis operator. Any
// other construct is refused when the expression is parsed.

// groovyOp is a node's operation.
type groovyOp uint8

const (
	gLit groovyOp = iota
	gVar
	gProp
	gNot
	gNeg
	gAnd
	gOr
	gEq
	gNe
	gLt
	gLe
	gGt
	gGe
	gIn
	gNotIn
	gTernary
	gElvis
	gList
)

// groovyNode is one node of a parsed expression.
type groovyNode struct {
	op   groovyOp
	kids []*groovyNode
	name string // a variable or property name
	safe bool   // ?. rather than .
	lit  gval
}

// groovyVars are the variables Debezium's Jsr223Engine binds.
var groovyVars = []string{"value", "key", "keySchema", "valueSchema", "topic", "header"}

// structOwnProperties are names Groovy resolves on a Struct itself (its
// private fields and Groovy's meta properties) rather than through
// Struct.get: value.source.schema is the struct's Schema, not the field.
var structOwnProperties = map[string]bool{"schema": true, "values": true, "class": true, "metaClass": true, "properties": true}

// groovySyntaxError is an expression outside the subset (or not Groovy).
type groovySyntaxError struct {
	pos int
	msg string
}

func (e *groovySyntaxError) Error() string { return fmt.Sprintf("at offset %d: %s", e.pos, e.msg) }

// parseGroovy parses src, an expression of the subset, and checks it
// statically: a variable Debezium does not bind, a property Groovy would
// not read from a struct's fields, or a construct outside the subset is
// an error.
func parseGroovy(src string) (*groovyNode, error) {
	toks, err := lexGroovy(src)
	if err != nil {
		return nil, err
	}
	p := &groovyParser{toks: toks}
	n, err := p.ternary()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.unexpected(t)
	}
	if _, err := checkOperand(n); err != nil {
		return nil, err
	}
	return n, nil
}

// Tokens.
type groovyTokKind uint8

const (
	tEOF groovyTokKind = iota
	tIdent
	tNum
	tStr
	tOp
)

type groovyTok struct {
	kind groovyTokKind
	text string // the source text; an operator; an identifier
	pos  int
	val  gval // a literal's value
}

// groovyOps are the operators of the subset, longest first.
var groovyOps = []string{"!in", "?.", "?:", "==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "?", ":", ".", "(", ")", "[", "]", ",", "-"}

// groovyRefused names constructs outside the subset by their leading
// characters, for a clearer refusal.
var groovyRefused = []struct{ prefix, what string }{
	{"<=>", "the spaceship operator <=>"}, {"===", "identity ==="}, {"!==", "identity !=="},
	{"=~", "regular expressions (=~)"}, {"==~", "regular expressions (==~)"}, {"?[", "safe indexing ?["},
	{"*.", "the spread operator *."}, {".@", "direct field access .@"}, {".&", "method pointers .&"},
	{"..", "ranges"}, {"::", "method references"}, {"->", "closures"}, {"//", "comments"}, {"/*", "comments"},
	{"+", "arithmetic (+)"}, {"*", "arithmetic (*)"}, {"/", "arithmetic or slashy strings (/)"}, {"%", "arithmetic (%)"},
	{"=", "assignment (=)"}, {";", "more than one statement (;)"}, {"{", "closures or blocks ({)"},
	{"&", "bitwise operators (&)"}, {"|", "bitwise operators (|)"}, {"^", "bitwise operators (^)"}, {"~", "bitwise operators (~)"},
	{"@", "annotations (@)"}, {"\n", "a line break (Groovy may end the statement there)"}, {"\r", "a line break (Groovy may end the statement there)"},
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }

func lexGroovy(src string) ([]groovyTok, error) {
	var toks []groovyTok
	i := 0
	for {
		for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\f') {
			i++
		}
		if i == len(src) {
			return append(toks, groovyTok{kind: tEOF, pos: i}), nil
		}
		c := src[i]
		switch {
		case c == '\'' || c == '"':
			t, n, err := lexGroovyString(src, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i = n
			continue
		case '0' <= c && c <= '9':
			t, n, err := lexGroovyNumber(src, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i = n
			continue
		case isIdentStart(c):
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			if j < len(src) && src[j] >= 0x80 {
				return nil, &groovySyntaxError{i, "a non-ASCII identifier is outside pgoutbox's Groovy subset"}
			}
			toks = append(toks, groovyTok{kind: tIdent, text: src[i:j], pos: i})
			i = j
			continue
		case c >= 0x80:
			return nil, &groovySyntaxError{i, "a non-ASCII character outside a string is outside pgoutbox's Groovy subset"}
		}
		if c == '.' && i+1 < len(src) && '0' <= src[i+1] && src[i+1] <= '9' {
			return nil, &groovySyntaxError{i, "a number without digits before its point is outside pgoutbox's Groovy subset"}
		}
		op := ""
		for _, o := range groovyOps {
			if strings.HasPrefix(src[i:], o) {
				op = o
				break
			}
		}
		// The longest operator wins, as in Groovy's lexer: <=> is not <=.
		for _, r := range groovyRefused {
			if len(r.prefix) > len(op) && strings.HasPrefix(src[i:], r.prefix) {
				return nil, &groovySyntaxError{i, r.what + " is outside pgoutbox's Groovy subset"}
			}
		}
		// !in is one token only before a character that cannot go on an
		// identifier: !inStock is ! inStock.
		if op == "!in" && i+3 < len(src) && isIdentPart(src[i+3]) {
			op = "!"
		}
		if op == "" {
			return nil, &groovySyntaxError{i, fmt.Sprintf("%q is outside pgoutbox's Groovy subset", src[i:i+1])}
		}
		toks = append(toks, groovyTok{kind: tOp, text: op, pos: i})
		i += len(op)
	}
}

// lexGroovyString reads a quoted string without interpolation.
func lexGroovyString(src string, start int) (groovyTok, int, error) {
	q := src[start]
	if strings.HasPrefix(src[start:], strings.Repeat(string(q), 3)) {
		return groovyTok{}, 0, &groovySyntaxError{start, "triple-quoted strings are outside pgoutbox's Groovy subset"}
	}
	var b strings.Builder
	i := start + 1
	for {
		if i >= len(src) || src[i] == '\n' || src[i] == '\r' {
			return groovyTok{}, 0, &groovySyntaxError{start, "an unterminated string"}
		}
		c := src[i]
		switch {
		case c == q:
			return groovyTok{kind: tStr, text: src[start : i+1], pos: start, val: gval{k: gStrK, s: b.String()}}, i + 1, nil
		case c == '$' && q == '"':
			return groovyTok{}, 0, &groovySyntaxError{i, "GString interpolation ($ in a double-quoted string) is outside pgoutbox's Groovy subset: Debezium's ContentBasedRouter refuses a GString result too"}
		case c == '\\':
			if i+1 >= len(src) {
				return groovyTok{}, 0, &groovySyntaxError{i, "an unterminated string"}
			}
			e := src[i+1]
			repl, ok := map[byte]string{'b': "\b", 't': "\t", 'n': "\n", 'f': "\f", 'r': "\r", '"': "\"", '\'': "'", '\\': "\\", '$': "$"}[e]
			switch {
			case ok:
				b.WriteString(repl)
				i += 2
			case e == 'u':
				if i+6 > len(src) {
					return groovyTok{}, 0, &groovySyntaxError{i, "a malformed \\u escape"}
				}
				n, err := strconv.ParseUint(src[i+2:i+6], 16, 16)
				if err != nil {
					return groovyTok{}, 0, &groovySyntaxError{i, "a malformed \\u escape"}
				}
				if 0xD800 <= n && n <= 0xDFFF {
					return groovyTok{}, 0, &groovySyntaxError{i, "a \\u escape of a surrogate is outside pgoutbox's Groovy subset"}
				}
				b.WriteRune(rune(n))
				i += 6
			default:
				return groovyTok{}, 0, &groovySyntaxError{i, fmt.Sprintf("the escape \\%c is outside pgoutbox's Groovy subset", e)}
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
}

// lexGroovyNumber reads a decimal literal: an Integer, Long or
// BigInteger by its size, a BigDecimal with a point or an exponent, or
// the type its suffix (L, G, F, D) names.
func lexGroovyNumber(src string, start int) (groovyTok, int, error) {
	i := start
	digits := func() {
		for i < len(src) && '0' <= src[i] && src[i] <= '9' {
			i++
		}
	}
	digits()
	intPart := src[start:i]
	if len(intPart) > 1 && intPart[0] == '0' || i < len(src) && (src[i] == 'x' || src[i] == 'X' || src[i] == 'b' || src[i] == 'B') {
		return groovyTok{}, 0, &groovySyntaxError{start, "octal, hexadecimal and binary numbers are outside pgoutbox's Groovy subset"}
	}
	if i < len(src) && src[i] == '_' {
		return groovyTok{}, 0, &groovySyntaxError{start, "underscores in numbers are outside pgoutbox's Groovy subset"}
	}
	decimal := false
	if i+1 < len(src) && src[i] == '.' && '0' <= src[i+1] && src[i+1] <= '9' {
		decimal = true
		i++
		digits()
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		decimal = true
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		d := i
		digits()
		if d == i {
			return groovyTok{}, 0, &groovySyntaxError{start, "a malformed exponent"}
		}
	}
	text := src[start:i]
	var suffix byte
	if i < len(src) && strings.IndexByte("lLgGfFdDiI", src[i]) >= 0 {
		suffix = src[i] | 0x20
		i++
	}
	if i < len(src) && (isIdentPart(src[i]) || src[i] == '.' && i+1 < len(src) && !isIdentStart(src[i+1])) {
		return groovyTok{}, 0, &groovySyntaxError{start, fmt.Sprintf("the number %q is outside pgoutbox's Groovy subset", src[start:i+1])}
	}
	tok := groovyTok{kind: tNum, text: src[start:i], pos: start}
	var n gnum
	var err error
	switch {
	case suffix == 'f' || suffix == 'd':
		bits := 64
		cls := nDouble
		if suffix == 'f' {
			bits, cls = 32, nFloat
		}
		f, perr := strconv.ParseFloat(text, bits)
		if perr != nil {
			err = perr
		}
		n = gnum{cls: cls, f: f}
	case suffix == 'i':
		return groovyTok{}, 0, &groovySyntaxError{start, "the suffix I is outside pgoutbox's Groovy subset"}
	case decimal:
		if suffix == 'l' {
			return groovyTok{}, 0, &groovySyntaxError{start, fmt.Sprintf("%q is not a Groovy number", tok.text)}
		}
		n, err = parseBigDecimal(text)
	default:
		v, ok := new(big.Int).SetString(text, 10)
		if !ok {
			err = fmt.Errorf("malformed")
			break
		}
		switch {
		case suffix == 'g':
			n = gnum{cls: nBigInt, big: v}
		case suffix == 'l':
			if !v.IsInt64() {
				err = fmt.Errorf("out of range for a Long")
			}
			n = gnum{cls: nLong, i: v.Int64()}
		case v.IsInt64() && v.Int64() <= math.MaxInt32:
			n = gnum{cls: nInt, i: v.Int64()}
		case v.IsInt64():
			n = gnum{cls: nLong, i: v.Int64()}
		default:
			n = gnum{cls: nBigInt, big: v}
		}
	}
	if err != nil {
		return groovyTok{}, 0, &groovySyntaxError{start, fmt.Sprintf("the number %q: %v", tok.text, err)}
	}
	tok.val = gval{k: gNumK, n: n}
	return tok, i, nil
}

// parseBigDecimal reads digits[.digits][e[+-]digits] as Java's
// BigDecimal(String): its unscaled value and scale.
func parseBigDecimal(text string) (gnum, error) {
	mant, exp, _ := strings.Cut(strings.ToLower(text), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	unscaled, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		return gnum{}, fmt.Errorf("malformed")
	}
	scale := int64(len(frac))
	if exp != "" {
		e, err := strconv.ParseInt(exp, 10, 32)
		if err != nil {
			return gnum{}, fmt.Errorf("exponent out of range")
		}
		scale -= e
	}
	if scale < math.MinInt32 || scale > math.MaxInt32 {
		return gnum{}, fmt.Errorf("exponent out of range")
	}
	return gnum{cls: nBigDec, big: unscaled, scale: int32(scale)}, nil
}

// groovyParser is a recursive descent parser, loosest binding first:
// ternary and Elvis (right to left), ||, &&, == and !=, < <= > >= in
// !in (all left to right), ! and unary minus, property access.
type groovyParser struct {
	toks []groovyTok
	i    int
}

func (p *groovyParser) peek() groovyTok { return p.toks[p.i] }

func (p *groovyParser) next() groovyTok {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *groovyParser) isOp(ops ...string) (string, bool) {
	t := p.peek()
	if t.kind == tOp {
		for _, o := range ops {
			if t.text == o {
				return o, true
			}
		}
	}
	if t.kind == tIdent && t.text == "in" {
		for _, o := range ops {
			if o == "in" {
				return o, true
			}
		}
	}
	return "", false
}

func (p *groovyParser) unexpected(t groovyTok) error {
	if t.kind == tEOF {
		return &groovySyntaxError{t.pos, "the expression ends early"}
	}
	what := fmt.Sprintf("%q", t.text)
	switch {
	case t.kind == tIdent && (t.text == "and" || t.text == "or"):
		what += " (Groovy's boolean operators are && and ||)"
	case t.kind == tIdent:
		what += " (keywords and juxtaposed names, such as command chains, are outside pgoutbox's Groovy subset)"
	}
	return &groovySyntaxError{t.pos, "unexpected " + what}
}

func (p *groovyParser) expect(op string) error {
	if _, ok := p.isOp(op); !ok {
		return p.unexpected(p.peek())
	}
	p.next()
	return nil
}

func (p *groovyParser) ternary() (*groovyNode, error) {
	cond, err := p.binary(0)
	if err != nil {
		return nil, err
	}
	if _, ok := p.isOp("?:"); ok {
		p.next()
		r, err := p.ternary()
		if err != nil {
			return nil, err
		}
		return &groovyNode{op: gElvis, kids: []*groovyNode{cond, r}}, nil
	}
	if _, ok := p.isOp("?"); !ok {
		return cond, nil
	}
	p.next()
	a, err := p.ternary()
	if err != nil {
		return nil, err
	}
	if err := p.expect(":"); err != nil {
		return nil, err
	}
	b, err := p.ternary()
	if err != nil {
		return nil, err
	}
	return &groovyNode{op: gTernary, kids: []*groovyNode{cond, a, b}}, nil
}

// groovyLevels are the binary operators by binding, loosest first.
var groovyLevels = []map[string]groovyOp{
	{"||": gOr},
	{"&&": gAnd},
	{"==": gEq, "!=": gNe},
	{"<": gLt, "<=": gLe, ">": gGt, ">=": gGe, "in": gIn, "!in": gNotIn},
}

func (p *groovyParser) binary(level int) (*groovyNode, error) {
	if level == len(groovyLevels) {
		return p.unary()
	}
	l, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op, ok := groovyLevels[level][t.text]
		if !ok || t.kind != tOp && !(t.kind == tIdent && t.text == "in") {
			return l, nil
		}
		p.next()
		r, err := p.binary(level + 1)
		if err != nil {
			return nil, err
		}
		if (op == gIn || op == gNotIn) && r.op != gList {
			return nil, &groovySyntaxError{t.pos, t.text + " on anything but a list literal [...] is outside pgoutbox's Groovy subset"}
		}
		l = &groovyNode{op: op, kids: []*groovyNode{l, r}}
	}
}

func (p *groovyParser) unary() (*groovyNode, error) {
	if op, ok := p.isOp("!", "-"); ok {
		p.next()
		if t := p.peek(); op == "-" && t.kind == tNum {
			// Groovy reads a minus before a number as a negative
			// literal: -2147483648 is an Integer.
			p.next()
			return &groovyNode{op: gLit, lit: gval{k: gNumK, n: negativeLiteral(t)}}, nil
		}
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		if op == "!" {
			return &groovyNode{op: gNot, kids: []*groovyNode{n}}, nil
		}
		return &groovyNode{op: gNeg, kids: []*groovyNode{n}}, nil
	}
	return p.postfix()
}

func (p *groovyParser) postfix() (*groovyNode, error) {
	n, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		op, ok := p.isOp(".", "?.", "(", "[")
		if !ok {
			return n, nil
		}
		t := p.next()
		if op == "(" || op == "[" {
			what := "calls ()"
			if op == "[" {
				what = "indexing []"
			}
			return nil, &groovySyntaxError{t.pos, what + " are outside pgoutbox's Groovy subset"}
		}
		name := p.next()
		if name.kind != tIdent {
			return nil, &groovySyntaxError{name.pos, "a property name is expected after " + op + " (quoted or dynamic names are outside pgoutbox's Groovy subset)"}
		}
		if _, call := p.isOp("("); call {
			return nil, &groovySyntaxError{name.pos, "method calls (" + name.text + "()) are outside pgoutbox's Groovy subset"}
		}
		n = &groovyNode{op: gProp, kids: []*groovyNode{n}, name: name.text, safe: op == "?."}
	}
}

func (p *groovyParser) primary() (*groovyNode, error) {
	t := p.next()
	switch t.kind {
	case tNum, tStr:
		return &groovyNode{op: gLit, lit: t.val}, nil
	case tIdent:
		switch t.text {
		case "true", "false":
			return &groovyNode{op: gLit, lit: gval{k: gBoolK, b: t.text == "true"}}, nil
		case "null":
			return &groovyNode{op: gLit}, nil
		}
		if _, call := p.isOp("("); call {
			return nil, &groovySyntaxError{t.pos, "method calls (" + t.text + "()) are outside pgoutbox's Groovy subset"}
		}
		return &groovyNode{op: gVar, name: t.text}, nil
	case tOp:
		switch t.text {
		case "(":
			n, err := p.ternary()
			if err != nil {
				return nil, err
			}
			return n, p.expect(")")
		case "[":
			l := &groovyNode{op: gList}
			if _, ok := p.isOp("]"); ok {
				p.next()
				return l, nil
			}
			for {
				n, err := p.ternary()
				if err != nil {
					return nil, err
				}
				l.kids = append(l.kids, n)
				if _, ok := p.isOp(","); !ok {
					break
				}
				p.next()
				if _, ok := p.isOp("]"); ok { // Groovy allows a trailing comma
					break
				}
			}
			return l, p.expect("]")
		}
	}
	return nil, p.unexpected(t)
}

// negativeLiteral is the number of t with a minus: without a suffix an
// integer's class is the negative value's (Integer, Long or BigInteger).
func negativeLiteral(t groovyTok) gnum {
	n := t.val.n.negate()
	if last := t.text[len(t.text)-1]; last < '0' || last > '9' || n.cls == nBigDec {
		return n
	}
	v := new(big.Int).Neg(t.val.n.rat().Num())
	switch {
	case v.IsInt64() && v.Int64() >= math.MinInt32:
		return gnum{cls: nInt, i: v.Int64()}
	case v.IsInt64():
		return gnum{cls: nLong, i: v.Int64()}
	}
	return gnum{cls: nBigInt, big: v}
}

// groovyShape is what a node is, as far as it can be known before a
// record: the static check refuses property access Groovy would not
// resolve to a struct's field or a header.
type groovyShape uint8

const (
	shData    groovyShape = iota // a struct or any value of a record
	shHeaders                    // the header variable, a Map
	shHeader                     // header.<name>, a RecordHeader or null
	shScalar                     // a literal, topic, or an operator's result
	shList
)

// groovyType is a bit set of what a node may evaluate to.
type groovyType uint8

const (
	tyBool groovyType = 1 << iota
	tyStr
	tyNum
	tyNull
	tyAny // a record's data
)

func checkGroovy(n *groovyNode) (groovyShape, error) {
	switch n.op {
	case gLit:
		return shScalar, nil
	case gVar:
		switch n.name {
		case "value", "key":
			return shData, nil
		case "topic":
			return shScalar, nil
		case "header":
			return shHeaders, nil
		case "keySchema", "valueSchema":
			return 0, &groovySyntaxError{0, n.name + " (a Connect Schema) is outside pgoutbox's Groovy subset"}
		}
		return 0, &groovySyntaxError{0, fmt.Sprintf("%q is not one of the variables Debezium binds (%s)", n.name, strings.Join(groovyVars, ", "))}
	case gProp:
		base, err := checkGroovy(n.kids[0])
		if err != nil {
			return 0, err
		}
		switch base {
		case shHeaders:
			return shHeader, nil
		case shHeader:
			if n.name != "value" {
				return 0, &groovySyntaxError{0, fmt.Sprintf("property %q of a header: pgoutbox's Groovy subset reads a header's value only", n.name)}
			}
			return shData, nil
		case shData:
			if structOwnProperties[n.name] {
				return 0, &groovySyntaxError{0, fmt.Sprintf("property %q: on a Struct Groovy reads the Struct's own %s, not the field; outside pgoutbox's Groovy subset", n.name, n.name)}
			}
			return shData, nil
		}
		return 0, &groovySyntaxError{0, fmt.Sprintf("property %q of a string, number, boolean or null (topic or a literal) is outside pgoutbox's Groovy subset", n.name)}
	case gList:
		for _, k := range n.kids {
			if _, err := checkOperand(k); err != nil {
				return 0, err
			}
		}
		return shList, nil
	}
	for i, k := range n.kids {
		if (n.op == gIn || n.op == gNotIn) && i == 1 {
			if _, err := checkGroovy(k); err != nil {
				return 0, err
			}
			continue
		}
		if _, err := checkOperand(k); err != nil {
			return 0, err
		}
	}
	if n.op == gTernary || n.op == gElvis {
		return shData, nil // its result is one of its operands
	}
	return shScalar, nil
}

// checkOperand checks a node used as a value: the header map itself is
// not one of the subset.
func checkOperand(n *groovyNode) (groovyShape, error) {
	s, err := checkGroovy(n)
	switch {
	case err != nil:
	case s == shHeaders:
		err = &groovySyntaxError{0, "the header map itself (other than header.<name>) is outside pgoutbox's Groovy subset"}
	case s == shList:
		err = &groovySyntaxError{0, "a list other than on the right of in is outside pgoutbox's Groovy subset"}
	}
	return s, err
}

// resultTypes is what n may evaluate to.
func resultTypes(n *groovyNode) groovyType {
	switch n.op {
	case gLit:
		switch n.lit.k {
		case gBoolK:
			return tyBool
		case gStrK:
			return tyStr
		case gNumK:
			return tyNum
		}
		return tyNull
	case gVar:
		if n.name == "topic" {
			return tyStr
		}
		return tyAny
	case gProp:
		return tyAny
	case gNeg:
		return tyNum
	case gTernary:
		return resultTypes(n.kids[1]) | resultTypes(n.kids[2])
	case gElvis:
		return resultTypes(n.kids[0])&^tyNull | resultTypes(n.kids[1])
	}
	return tyBool
}

// constant tells a node without variables, whose value is the same for
// every record.
func (n *groovyNode) constant() bool {
	if n.op == gVar {
		return false
	}
	for _, k := range n.kids {
		if !k.constant() {
			return false
		}
	}
	return true
}

// Values.

type gkind uint8

const (
	gNullK gkind = iota
	gBoolK
	gStrK
	gNumK
	gStructK
	gDateK    // java.util.Date: Connect's Date, Time and Timestamp
	gHeaderK  // Debezium's RecordHeader
	gHeadersK // the header variable, a Map of RecordHeader
	gOtherK   // bytes, arrays, maps
)

// gval is a Groovy value: a Java object as Connect and Debezium hand it
// to the script.
type gval struct {
	k  gkind
	b  bool
	s  string
	n  gnum
	st *Struct
	ms int64   // a date's milliseconds
	h  *Header // a header
	hs []Header
	o  any // another value, with its schema
	os *Schema
}

// numClass is a number's Java class.
type numClass uint8

const (
	nByte numClass = iota
	nShort
	nInt
	nLong
	nBigInt
	nBigDec
	nFloat
	nDouble
)

var numClassNames = [...]string{"java.lang.Byte", "java.lang.Short", "java.lang.Integer", "java.lang.Long", "java.math.BigInteger", "java.math.BigDecimal", "java.lang.Float", "java.lang.Double"}

// gnum is a Java number.
type gnum struct {
	cls   numClass
	i     int64    // Byte, Short, Integer, Long
	big   *big.Int // BigInteger; BigDecimal's unscaled value
	scale int32    // BigDecimal's scale
	f     float64  // Float (a float32's value), Double
}

func (n gnum) floating() bool { return n.cls == nFloat || n.cls == nDouble }

// rat is an exact number's value.
func (n gnum) rat() *big.Rat {
	switch n.cls {
	case nBigInt:
		return new(big.Rat).SetInt(n.big)
	case nBigDec:
		r := new(big.Rat).SetInt(n.big)
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(groovyAbs32(n.scale))), nil)
		if n.scale >= 0 {
			return r.Quo(r, new(big.Rat).SetInt(p))
		}
		return r.Mul(r, new(big.Rat).SetInt(p))
	}
	return new(big.Rat).SetInt64(n.i)
}

func groovyAbs32(x int32) int64 {
	if x < 0 {
		return -int64(x)
	}
	return int64(x)
}

// double is Number.doubleValue.
func (n gnum) double() float64 {
	switch n.cls {
	case nFloat, nDouble:
		return n.f
	case nByte, nShort, nInt, nLong:
		return float64(n.i)
	}
	f, _ := n.rat().Float64()
	return f
}

// compare is Groovy's NumberMath.compareTo: in doubles when either is a
// Float or a Double, exactly otherwise.
func (n gnum) compare(m gnum) int {
	if n.floating() || m.floating() {
		a, b := n.double(), m.double()
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	return n.rat().Cmp(m.rat())
}

// equals is Java's equals: the same class and value (a BigDecimal's scale
// too).
func (n gnum) equals(m gnum) bool {
	if n.cls != m.cls {
		return false
	}
	switch n.cls {
	case nBigInt:
		return n.big.Cmp(m.big) == 0
	case nBigDec:
		return n.scale == m.scale && n.big.Cmp(m.big) == 0
	case nFloat:
		return math.Float32bits(float32(n.f)) == math.Float32bits(float32(m.f)) || n.f != n.f && m.f != m.f
	case nDouble:
		return math.Float64bits(n.f) == math.Float64bits(m.f) || n.f != n.f && m.f != m.f
	}
	return n.i == m.i
}

func (n gnum) String() string {
	switch n.cls {
	case nBigInt:
		return n.big.String()
	case nBigDec:
		return n.rat().FloatString(int(max(n.scale, 0)))
	case nFloat:
		return strconv.FormatFloat(n.f, 'g', -1, 32)
	case nDouble:
		return strconv.FormatFloat(n.f, 'g', -1, 64)
	}
	return strconv.FormatInt(n.i, 10)
}

// negate is Groovy's unary minus: the same class, wrapping as Java does.
func (n gnum) negate() gnum {
	switch n.cls {
	case nByte:
		n.i = int64(-int8(n.i))
	case nShort:
		n.i = int64(-int16(n.i))
	case nInt:
		n.i = int64(-int32(n.i))
	case nLong:
		n.i = -n.i
	case nBigInt, nBigDec:
		n.big = new(big.Int).Neg(n.big)
	default:
		n.f = -n.f
	}
	return n
}

// javaClass names v's class, for errors.
func (v gval) javaClass() string {
	switch v.k {
	case gNullK:
		return "null"
	case gBoolK:
		return "java.lang.Boolean"
	case gStrK:
		return "java.lang.String"
	case gNumK:
		return numClassNames[v.n.cls]
	case gStructK:
		return "org.apache.kafka.connect.data.Struct"
	case gDateK:
		return "java.util.Date"
	case gHeaderK:
		return "io.debezium.transforms.scripting.RecordHeader"
	case gHeadersK:
		return "java.util.HashMap"
	}
	return javaClass(v.os, v.o)
}

func (v gval) String() string {
	switch v.k {
	case gNullK:
		return "null"
	case gBoolK:
		return strconv.FormatBool(v.b)
	case gStrK:
		return v.s
	case gNumK:
		return v.n.String()
	case gDateK:
		return strconv.FormatInt(v.ms, 10) + " ms"
	}
	return v.javaClass()
}

// groovyFromConnect is v of schema s as Connect hands it to a script.
func groovyFromConnect(s *Schema, v any) gval {
	switch x := v.(type) {
	case nil:
		return gval{}
	case *Struct:
		return gval{k: gStructK, st: x}
	case string:
		return gval{k: gStrK, s: x}
	case bool:
		return gval{k: gBoolK, b: x}
	case int64:
		switch s.logical() {
		case dateName:
			return gval{k: gDateK, ms: x * 86400000}
		case timeName, timestampName:
			return gval{k: gDateK, ms: x}
		}
		cls := nLong
		if s != nil {
			switch s.Type {
			case Int8:
				cls = nByte
			case Int16:
				cls = nShort
			case Int32:
				cls = nInt
			}
		}
		return gval{k: gNumK, n: gnum{cls: cls, i: x}}
	case float64:
		if s != nil && s.Type == Float32 {
			return gval{k: gNumK, n: gnum{cls: nFloat, f: float64(float32(x))}}
		}
		return gval{k: gNumK, n: gnum{cls: nDouble, f: x}}
	case []byte:
		if s.logical() == decimalName {
			sc, _ := s.param("scale")
			scale, _ := strconv.ParseInt(sc, 10, 32)
			return gval{k: gNumK, n: gnum{cls: nBigDec, big: groovyBigInteger(x), scale: int32(scale)}}
		}
	}
	return gval{k: gOtherK, o: v, os: s}
}

// groovyBigInteger is BigInteger(byte[]): a big-endian two's complement.
func groovyBigInteger(b []byte) *big.Int {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return n
}

// truth is Groovy truth: null, false, an empty string, collection or map
// and a number whose doubleValue is 0 are false.
func (v gval) truth() (bool, error) {
	switch v.k {
	case gNullK:
		return false, nil
	case gBoolK:
		return v.b, nil
	case gStrK:
		return v.s != "", nil
	case gNumK:
		return v.n.double() != 0, nil
	case gHeadersK:
		return len(v.hs) > 0, nil
	case gOtherK:
		switch x := v.o.(type) {
		case []any:
			return len(x) > 0, nil
		case []MapEntry:
			return len(x) > 0, nil
		}
		return false, dataErrorf("the truth of a %s is outside pgoutbox's Groovy subset", v.javaClass())
	}
	return true, nil
}

// singleChar is a String of one UTF-16 unit, which Groovy compares with
// a number as a Character.
func (v gval) singleChar() (gnum, bool) {
	if v.k != gStrK {
		return gnum{}, false
	}
	r := []rune(v.s)
	if len(r) != 1 || r[0] > 0xFFFF {
		return gnum{}, false
	}
	return gnum{cls: nInt, i: int64(r[0])}, true
}

// groovyCompareUTF16 is String.compareTo: by UTF-16 code units.
func groovyCompareUTF16(a, b string) int {
	x, y := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(x) && i < len(y); i++ {
		if x[i] != y[i] {
			return int(x[i]) - int(y[i])
		}
	}
	return len(x) - len(y)
}

// groovyCompare is Groovy's compareTo for < <= > >=: null before
// anything, numbers by value, a one-character string as its character
// against a number, strings by UTF-16 units, booleans and dates by their
// order; anything else cannot be compared (IllegalArgumentException).
func groovyCompare(a, b gval) (int, error) {
	switch {
	case a.k == gNullK && b.k == gNullK:
		return 0, nil
	case a.k == gNullK:
		return -1, nil
	case b.k == gNullK:
		return 1, nil
	case a.k == gNumK && b.k == gNumK:
		return a.n.compare(b.n), nil
	case a.k == gNumK:
		if c, ok := b.singleChar(); ok {
			return a.n.compare(c), nil
		}
	case b.k == gNumK:
		if c, ok := a.singleChar(); ok {
			return c.compare(b.n), nil
		}
	case a.k == gStrK && b.k == gStrK:
		return groovyCompareUTF16(a.s, b.s), nil
	case a.k == gBoolK && b.k == gBoolK:
		switch {
		case a.b == b.b:
			return 0, nil
		case b.b:
			return -1, nil
		}
		return 1, nil
	case a.k == gDateK && b.k == gDateK:
		switch {
		case a.ms < b.ms:
			return -1, nil
		case a.ms > b.ms:
			return 1, nil
		}
		return 0, nil
	}
	return 0, dataErrorf("Cannot compare %s with value '%s' and %s with value '%s'", a.javaClass(), a, b.javaClass(), b)
}

// groovyEquals is Groovy's ==: compareTo's order for numbers (and a
// one-character string against a number), equals otherwise; values of
// different kinds are unequal.
func groovyEquals(a, b gval) (bool, error) {
	if a.k == gNumK || b.k == gNumK {
		if a.k == gNumK && b.k == gNumK {
			return a.n.compare(b.n) == 0, nil
		}
		if c, ok := a.singleChar(); ok {
			return c.compare(b.n) == 0, nil
		}
		if c, ok := b.singleChar(); ok {
			return a.n.compare(c) == 0, nil
		}
	}
	return groovyJavaEquals(a, b)
}

// groovyJavaEquals is Objects.equals, as List.contains uses it for in.
func groovyJavaEquals(a, b gval) (bool, error) {
	switch {
	case a.k == gNullK || b.k == gNullK:
		return a.k == b.k, nil
	case a.k == gOtherK || b.k == gOtherK || a.k == gHeaderK || b.k == gHeaderK:
		return false, dataErrorf("comparing a %s with a %s is outside pgoutbox's Groovy subset", a.javaClass(), b.javaClass())
	case a.k != b.k:
		return false, nil
	}
	switch a.k {
	case gBoolK:
		return a.b == b.b, nil
	case gStrK:
		return a.s == b.s, nil
	case gNumK:
		return a.n.equals(b.n), nil
	case gDateK:
		return a.ms == b.ms, nil
	case gStructK:
		return groovyStructEquals(a.st, b.st), nil
	}
	return false, nil
}

// groovyStructEquals is Struct.equals: equal schemas and equal values, each as
// it is (not its default).
func groovyStructEquals(a, b *Struct) bool {
	if a == b {
		return true
	}
	if !groovySchemaEquals(a.Schema, b.Schema) || len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		if !groovyConnectEquals(a.Values[i], b.Values[i]) {
			return false
		}
	}
	return true
}

func groovySchemaEquals(a, b *Schema) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	if a.Type != b.Type || a.Optional != b.Optional || a.Name != b.Name || !groovyPtrEq(a.Version, b.Version) || !groovyPtrEq(a.Doc, b.Doc) ||
		a.HasDefault != b.HasDefault || !groovyConnectEquals(a.Default, b.Default) || len(a.Params) != len(b.Params) || len(a.Fields) != len(b.Fields) ||
		!groovySchemaEquals(a.Items, b.Items) || !groovySchemaEquals(a.Keys, b.Keys) || !groovySchemaEquals(a.Values, b.Values) {
		return false
	}
	for i := range a.Params {
		if a.Params[i] != b.Params[i] {
			return false
		}
	}
	for i := range a.Fields {
		if a.Fields[i].Name != b.Fields[i].Name || !groovySchemaEquals(a.Fields[i].Schema, b.Fields[i].Schema) {
			return false
		}
	}
	return true
}

func groovyPtrEq[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }

// groovyConnectEquals compares two values of the same schema.
func groovyConnectEquals(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case *Struct:
		y, ok := b.(*Struct)
		return ok && groovyStructEquals(x, y)
	case []byte:
		y, ok := b.([]byte)
		return ok && string(x) == string(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !groovyConnectEquals(x[i], y[i]) {
				return false
			}
		}
		return true
	case []MapEntry:
		y, ok := b.([]MapEntry)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !groovyConnectEquals(x[i].Key, y[i].Key) || !groovyConnectEquals(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && (x == y && math.Signbit(x) == math.Signbit(y) || x != x && y != y)
	}
	return a == b
}

// groovyEnv is a record's variables.
type groovyEnv struct{ r *Record }

func (e groovyEnv) variable(name string) gval {
	switch name {
	case "value":
		return groovyFromConnect(e.r.ValueSchema, e.r.Value)
	case "key":
		return groovyFromConnect(e.r.KeySchema, e.r.Key)
	case "topic":
		return gval{k: gStrK, s: e.r.Topic}
	case "header":
		return gval{k: gHeadersK, hs: e.r.Headers}
	}
	panic("transform: unchecked Groovy variable " + name)
}

// eval evaluates n on the record of env; an error is one Groovy throws
// at this record, a *DataError.
func (n *groovyNode) eval(env groovyEnv) (gval, error) {
	switch n.op {
	case gLit:
		return n.lit, nil
	case gVar:
		return env.variable(n.name), nil
	case gProp:
		base, err := n.kids[0].eval(env)
		if err != nil {
			return gval{}, err
		}
		return groovyProperty(base, n.name, n.safe)
	case gNot:
		v, err := n.kids[0].eval(env)
		if err != nil {
			return gval{}, err
		}
		t, err := v.truth()
		return gval{k: gBoolK, b: !t}, err
	case gNeg:
		v, err := n.kids[0].eval(env)
		if err != nil {
			return gval{}, err
		}
		if v.k != gNumK {
			return gval{}, dataErrorf("No signature of method: %s.negative()", v.javaClass())
		}
		return gval{k: gNumK, n: v.n.negate()}, nil
	case gAnd, gOr:
		v, err := n.kids[0].eval(env)
		if err != nil {
			return gval{}, err
		}
		t, err := v.truth()
		if err != nil || t == (n.op == gOr) {
			return gval{k: gBoolK, b: t}, err
		}
		v, err = n.kids[1].eval(env)
		if err != nil {
			return gval{}, err
		}
		t, err = v.truth()
		return gval{k: gBoolK, b: t}, err
	case gTernary:
		c, err := n.kids[0].eval(env)
		if err != nil {
			return gval{}, err
		}
		t, err := c.truth()
		if err != nil {
			return gval{}, err
		}
		if t {
			return n.kids[1].eval(env)
		}
		return n.kids[2].eval(env)
	case gElvis:
		c, err := n.kids[0].eval(env)
		if err != nil {
			return gval{}, err
		}
		t, err := c.truth()
		if err != nil || t {
			return c, err
		}
		return n.kids[1].eval(env)
	case gIn, gNotIn:
		v, err := n.kids[0].eval(env)
		if err != nil {
			return gval{}, err
		}
		items := make([]gval, len(n.kids[1].kids))
		for i, k := range n.kids[1].kids {
			if items[i], err = k.eval(env); err != nil {
				return gval{}, err
			}
		}
		found := false
		for _, it := range items {
			eq, err := groovyJavaEquals(v, it)
			if err != nil {
				return gval{}, err
			}
			if eq {
				found = true
				break
			}
		}
		return gval{k: gBoolK, b: found == (n.op == gIn)}, nil
	}
	a, err := n.kids[0].eval(env)
	if err != nil {
		return gval{}, err
	}
	b, err := n.kids[1].eval(env)
	if err != nil {
		return gval{}, err
	}
	var r bool
	switch n.op {
	case gEq, gNe:
		r, err = groovyEquals(a, b)
		r = r == (n.op == gEq)
	default:
		var c int
		c, err = groovyCompare(a, b)
		switch n.op {
		case gLt:
			r = c < 0
		case gLe:
			r = c <= 0
		case gGt:
			r = c > 0
		case gGe:
			r = c >= 0
		}
	}
	return gval{k: gBoolK, b: r}, err
}

// property is base.name: a struct's field (Struct.get, its default in
// place of a null), a header by its name (the last of that name, as
// Debezium's map keeps it), a header's value.
func groovyProperty(base gval, name string, safe bool) (gval, error) {
	switch base.k {
	case gNullK:
		if safe {
			return gval{}, nil
		}
		return gval{}, dataErrorf("Cannot get property '%s' on null object", name)
	case gStructK:
		i := base.st.Schema.field(name)
		if i < 0 {
			return gval{}, dataErrorf("%s is not a valid field name", name)
		}
		return groovyFromConnect(base.st.Schema.Fields[i].Schema, base.st.get(i, true)), nil
	case gHeadersK:
		for i := len(base.hs) - 1; i >= 0; i-- {
			if base.hs[i].Key == name {
				return gval{k: gHeaderK, h: &base.hs[i]}, nil
			}
		}
		return gval{}, nil
	case gHeaderK:
		if name == "value" {
			return groovyFromConnect(base.h.Schema, base.h.Value), nil
		}
	}
	return gval{}, dataErrorf("property '%s' of a %s is outside pgoutbox's Groovy subset", name, base.javaClass())
}
