package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

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

// paramsFlag is --template-param NAME=value, repeated; a value of several
// lines (the environment's PGOUTBOX_TEMPLATE_PARAM) gives one a line.
type paramsFlag struct{ p *map[string]string }

func (f paramsFlag) String() string {
	if f.p == nil {
		return ""
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(*f.p)) {
		out = append(out, k+"="+(*f.p)[k])
	}
	return strings.Join(out, "\n")
}

func (f paramsFlag) Set(v string) error {
	for _, line := range strings.Split(strings.TrimSpace(v), "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || name == "" {
			return fmt.Errorf("%q: want NAME=value", line)
		}
		if *f.p == nil {
			*f.p = map[string]string{}
		}
		(*f.p)[name] = value
	}
	return nil
}
