package debezium

import (
	"errors"
	"fmt"
	"strings"
)

// jaasEntry is the login module of a sasl.jaas.config value: its class
// and its options.
type jaasEntry struct {
	class   string
	options map[string]string
}

// parseJAAS reads a sasl.jaas.config value, as Kafka's JaasConfig does:
// "<class> <flag> key=value ... ;" with values bare or double-quoted (a
// backslash escapes the next character). Kafka takes one login module;
// so does this. Its errors never show a value: they may be secrets.
func parseJAAS(s string) (jaasEntry, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return jaasEntry{}, err
	}
	if len(toks) < 3 || !toks[len(toks)-1].is(";") || toks[0].sym || toks[1].sym {
		return jaasEntry{}, errors.New("want: <LoginModule class> required key=\"value\" ... ;")
	}
	e := jaasEntry{class: toks[0].text, options: map[string]string{}}
	switch strings.ToLower(toks[1].text) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return jaasEntry{}, fmt.Errorf("login module %s: the control flag must be required, requisite, sufficient or optional", e.class)
	}
	rest := toks[2 : len(toks)-1]
	for len(rest) > 0 {
		if len(rest) < 3 || rest[0].sym || !rest[1].is("=") || rest[2].sym {
			return jaasEntry{}, fmt.Errorf("login module %s: want key=value options", e.class)
		}
		e.options[rest[0].text] = rest[2].text
		rest = rest[3:]
	}
	return e, nil
}

// jaasToken is a word, a quoted string (unquoted) or a symbol, "=" or ";".
type jaasToken struct {
	text string
	sym  bool
}

func (t jaasToken) is(sym string) bool { return t.sym && t.text == sym }

// jaasTokens splits s into tokens.
func jaasTokens(s string) ([]jaasToken, error) {
	var toks []jaasToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=' || c == ';':
			toks = append(toks, jaasToken{string(c), true})
			i++
		case c == '"':
			var b strings.Builder
			i++
			closed := false
			for i < len(s) {
				if s[i] == '\\' && i+1 < len(s) {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				if s[i] == '"' {
					closed = true
					i++
					break
				}
				b.WriteByte(s[i])
				i++
			}
			if !closed {
				return nil, errors.New("a quoted value is not closed")
			}
			toks = append(toks, jaasToken{text: b.String()})
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n\r=;\"", rune(s[j])) {
				j++
			}
			toks = append(toks, jaasToken{text: s[i:j]})
			i = j
		}
	}
	return toks, nil
}
