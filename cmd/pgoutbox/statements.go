package main

import "strings"

// statementsFlag is --database-initial-statements, read as Debezium reads
// database.initial.statements: statements separated by ';', where ';;'
// is a ';' within one (a DO block's), each trimmed, empty ones skipped.
type statementsFlag struct{ p *[]string }

func (f statementsFlag) String() string {
	if f.p == nil {
		return ""
	}
	escaped := make([]string, len(*f.p))
	for i, s := range *f.p {
		escaped[i] = strings.ReplaceAll(s, ";", ";;")
	}
	return strings.Join(escaped, "; ")
}

func (f statementsFlag) Set(v string) error {
	*f.p = splitStatements(v)
	return nil
}

func splitStatements(v string) []string {
	var (
		out []string
		cur strings.Builder
	)
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] != ';':
			cur.WriteByte(v[i])
		case i+1 < len(v) && v[i+1] == ';':
			cur.WriteByte(';')
			i++
		default:
			flush()
		}
	}
	flush()
	return out
}
