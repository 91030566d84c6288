package schema

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// ParseProperties reads java.util.Properties text (a Debezium Server
// configuration, or a trace context column as Debezium reads it):
// key=value, key: value or key value; # and ! comments; a trailing
// backslash continues a line.
func ParseProperties(data []byte) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var cont string
	for sc.Scan() {
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if cont == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, "\\") && !strings.HasSuffix(line, "\\\\") {
			cont += line[:len(line)-1]
			continue
		}
		line, cont = cont+line, ""
		i := strings.IndexAny(line, "=: \t")
		if i < 0 {
			props[line] = ""
			continue
		}
		k := line[:i]
		v := strings.TrimLeft(line[i:], " \t")
		if v != "" && (v[0] == '=' || v[0] == ':') {
			v = strings.TrimLeft(v[1:], " \t")
		}
		props[unescapeProperty(k)] = unescapeProperty(v)
	}
	return props, sc.Err()
}

// unescapeProperty applies java.util.Properties escapes: \t \n \r \f,
// \uXXXX, and a backslash before any other character stands for it.
func unescapeProperty(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+4 < len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+5], 16, 32); err == nil {
					b.WriteRune(rune(r))
					i += 4
					continue
				}
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
