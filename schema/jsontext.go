package schema

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// CloudEvents String values exclude the control characters U+0000-U+001F and
// U+007F-U+009F, Unicode noncharacters and unpaired surrogates (CloudEvents
// 1.0, "Type System"). ceStringReason returns why s is not such a string, or
// "" when it is; invalid UTF-8 (which includes encoded surrogates) is
// rejected as well.
func ceStringReason[T ~string | ~[]byte](s T) string {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if asciiClass[c] == 2 {
				return "control character " + strconv.QuoteRune(rune(c))
			}
			i++
			continue
		}
		// At most UTFMax bytes: converting them from []byte stays on the stack.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if reason := nonASCIIReason(r, size); reason != "" {
			return reason
		}
		i += size
	}
	return ""
}

// nonASCIIReason checks one decoded non-ASCII rune of a CloudEvents String.
func nonASCIIReason(r rune, size int) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return "invalid UTF-8"
	case r <= 0x9f:
		return "control character " + strconv.QuoteRune(r)
	case isNoncharacter(r):
		return "Unicode noncharacter " + strconv.QuoteRune(r)
	}
	return ""
}

func isNoncharacter(r rune) bool {
	return (r >= 0xfdd0 && r <= 0xfdef) || r&0xfffe == 0xfffe
}

// asciiClass classifies ASCII bytes for appendCEString: 0 copies as is, 1
// needs a backslash ('"' and '\\'), 2 is a control character, which a
// CloudEvents String cannot hold.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range 0x20 {
		t[c] = 2
	}
	t[0x7f] = 2
	t['"'] = 1
	t['\\'] = 1
	return t
}()

// appendCEString appends s as a JSON string, quotes included, after checking
// in the same pass that it is a CloudEvents String (see ceStringReason); on
// failure it returns the reason and dst in an unspecified state. Only '"' and
// '\\' need escaping then: unlike encoding/json it leaves <, >, & and
// U+2028/U+2029 alone, which are valid JSON, and the output is not HTML.
func appendCEString[T ~string | ~[]byte](dst []byte, s T) ([]byte, string) {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch asciiClass[c] {
			case 0:
				i++
				continue
			case 1:
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', c)
				i++
				start = i
				continue
			default:
				return dst, "control character " + strconv.QuoteRune(rune(c))
			}
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if reason := nonASCIIReason(r, size); reason != "" {
			return dst, reason
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), ""
}

// extKind is the CloudEvents type of an extension attribute's value.
type extKind uint8

const (
	extString extKind = iota
	extInteger
	extBoolean
)

// extension is one extension attribute read from the headers JSON object.
// name and str alias the headers text, or a decoded copy when the JSON
// string held escapes.
type extension struct {
	name []byte
	kind extKind
	str  []byte // extString
	i    int32  // extInteger
	b    bool   // extBoolean
}

// appendValue appends the value's canonical string encoding (binary mode)
// or its JSON form (structured mode; strings are quoted there).
func (x *extension) appendValue(dst []byte, asJSON bool) []byte {
	switch x.kind {
	case extInteger:
		return strconv.AppendInt(dst, int64(x.i), 10)
	case extBoolean:
		return strconv.AppendBool(dst, x.b)
	}
	if asJSON {
		dst, _ = appendCEString(dst, x.str) // checked by parseExtensions
		return dst
	}
	return append(dst, x.str...)
}

// reservedAttributes are the names an extension must not take: the
// CloudEvents 1.0 context attributes, data, and the attributes this encoder
// sets itself.
var reservedAttributes = [...]string{
	"specversion", "id", "source", "type", "datacontenttype", "dataschema",
	"subject", "time", "data", "data_base64", "partitionkey", "aggregatetype",
}

// maxExtensionNameLen is the CloudEvents recommendation ("SHOULD NOT exceed
// 20 characters"), enforced.
const maxExtensionNameLen = 20

// ValidateExtensionName checks a CloudEvents extension attribute name as the
// encoder does: 1 to 20 lower-case letters a-z and digits 0-9, not a context
// attribute or one the encoder sets. The error's text says what is wrong.
func ValidateExtensionName(name string) error {
	if reason := extensionNameReason([]byte(name)); reason != "" {
		return errors.New(reason)
	}
	return nil
}

func extensionNameReason(name []byte) string {
	if len(name) == 0 || len(name) > maxExtensionNameLen {
		return "extension name " + strconv.Quote(string(name)) + " must be 1 to 20 characters"
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return "extension name " + strconv.Quote(string(name)) + " must consist of lower-case letters a-z and digits 0-9"
		}
	}
	for _, r := range reservedAttributes {
		if string(name) == r {
			return "extension name " + strconv.Quote(r) + " collides with a context attribute"
		}
	}
	return ""
}

// parseExtensions reads the headers JSON object into extension attributes,
// appending to exts. Values may be strings, integers that fit in 32 bits, or
// booleans; anything else, a bad name, a duplicate name, or malformed JSON
// gives a reason. It is a small hand-written scanner: only a flat object of
// scalars is acceptable, so nested values are rejected without being
// skipped. It allocates only for strings that hold escapes.
func parseExtensions(exts []extension, h []byte) ([]extension, string) {
	const malformed = "headers is not a valid JSON object"
	p := jsonScanner{b: h}
	p.skipSpace()
	if !p.consume('{') {
		return exts, "headers is not a JSON object"
	}
	p.skipSpace()
	if p.consume('}') {
		p.skipSpace()
		if p.i != len(p.b) {
			return exts, malformed
		}
		return exts, ""
	}
	first := len(exts)
	for {
		p.skipSpace()
		name, ok := p.readString()
		if !ok {
			if p.surrogate {
				return exts, "extension name with an unpaired surrogate"
			}
			return exts, malformed
		}
		if reason := extensionNameReason(name); reason != "" {
			return exts, reason
		}
		p.skipSpace()
		if !p.consume(':') {
			return exts, malformed
		}
		p.skipSpace()
		e := extension{name: name}
		if p.i >= len(p.b) {
			return exts, malformed
		}
		switch c := p.b[p.i]; {
		case c == '"':
			s, ok := p.readString()
			if !ok {
				if p.surrogate {
					return exts, "extension " + string(name) + ": unpaired surrogate"
				}
				return exts, malformed
			}
			if reason := ceStringReason(s); reason != "" {
				return exts, "extension " + string(name) + ": " + reason
			}
			e.kind, e.str = extString, s
		case c == 't' || c == 'f':
			if p.literal("true") {
				e.kind, e.b = extBoolean, true
			} else if p.literal("false") {
				e.kind, e.b = extBoolean, false
			} else {
				return exts, malformed
			}
		case c == '-' || isDigit(c):
			num, integer, ok := p.readNumber()
			if !ok {
				return exts, malformed
			}
			if !integer {
				return exts, "extension " + string(name) + ": number " + string(num) + " is not an integer"
			}
			v, err := strconv.ParseInt(string(num), 10, 32)
			if err != nil {
				return exts, "extension " + string(name) + ": integer " + string(num) + " is out of the 32-bit range"
			}
			e.kind, e.i = extInteger, int32(v)
		case c == 'n':
			if !p.literal("null") {
				return exts, malformed
			}
			return exts, "extension " + string(name) + ": null value"
		case c == '{' || c == '[':
			return exts, "extension " + string(name) + ": objects and arrays are not CloudEvents attribute values"
		default:
			return exts, malformed
		}
		for i := first; i < len(exts); i++ {
			if string(exts[i].name) == string(name) {
				return exts, "extension " + string(name) + " appears twice"
			}
		}
		exts = append(exts, e)
		p.skipSpace()
		if p.consume(',') {
			continue
		}
		if !p.consume('}') {
			return exts, malformed
		}
		p.skipSpace()
		if p.i != len(p.b) {
			return exts, malformed
		}
		return exts, ""
	}
}

type jsonScanner struct {
	b         []byte
	i         int
	surrogate bool // readString failed on an unpaired surrogate escape
}

func (p *jsonScanner) skipSpace() {
	for p.i < len(p.b) && isJSONSpace(p.b[p.i]) {
		p.i++
	}
}

func (p *jsonScanner) consume(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonScanner) literal(lit string) bool {
	if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
		p.i += len(lit)
		return true
	}
	return false
}

// readNumber reads a JSON number and reports whether it is written as an
// integer (no fraction, no exponent).
func (p *jsonScanner) readNumber() (num []byte, integer, ok bool) {
	start := p.i
	p.consume('-')
	switch {
	case p.consume('0'):
	case p.i < len(p.b) && '1' <= p.b[p.i] && p.b[p.i] <= '9':
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	default:
		return nil, false, false
	}
	integer = true
	if p.consume('.') {
		integer = false
		if p.i >= len(p.b) || !isDigit(p.b[p.i]) {
			return nil, false, false
		}
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		integer = false
		p.i++
		if !p.consume('+') {
			p.consume('-')
		}
		if p.i >= len(p.b) || !isDigit(p.b[p.i]) {
			return nil, false, false
		}
		for p.i < len(p.b) && isDigit(p.b[p.i]) {
			p.i++
		}
	}
	return p.b[start:p.i:p.i], integer, true
}

// readString reads a JSON string and returns its decoded value. Raw control
// characters and invalid escapes are malformed JSON. An escaped unpaired
// surrogate is valid JSON but not a CloudEvents String: it fails too, with
// p.surrogate set. Raw invalid UTF-8 is copied and left for ceStringReason
// to reject.
func (p *jsonScanner) readString() ([]byte, bool) {
	if !p.consume('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i:p.i]
			p.i++
			return s, true
		case c == '\\':
			return p.readEscapedString(start)
		case c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

func (p *jsonScanner) readEscapedString(start int) ([]byte, bool) {
	buf := make([]byte, 0, p.i-start+16)
	buf = append(buf, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return buf, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		p.i++ // the backslash
		if p.i >= len(p.b) {
			return nil, false
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, false
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by an escaped low one.
				if r >= 0xdc00 || !p.literal(`\u`) {
					p.surrogate = true
					return nil, false
				}
				r2, ok := p.hex4()
				if !ok {
					return nil, false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					p.surrogate = true
					return nil, false
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

func (p *jsonScanner) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}
