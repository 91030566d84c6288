package promtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// What an expression reads: the selectors (a metric name and the label
// matchers given with it) and the labels its grouping and matching
// clauses name. PromQL's lexical rules are enough to tell them apart from
// functions, aggregations, keywords, strings, numbers and durations, so
// that a rule or a dashboard naming a metric the relay does not expose is
// caught without a list to keep in step.

// Matcher is a label matcher: Label Op "Value".
type Matcher struct {
	Label, Op, Value string
}

// Selector is a metric name with its label matchers; Metric is empty for
// a selector of matchers only.
type Selector struct {
	Metric   string
	Matchers []Matcher
}

// String is the selector in PromQL.
func (s Selector) String() string {
	if len(s.Matchers) == 0 {
		return s.Metric
	}
	parts := make([]string, len(s.Matchers))
	for i, m := range s.Matchers {
		parts[i] = m.Label + m.Op + strconvQuote(m.Value)
	}
	return s.Metric + "{" + strings.Join(parts, ", ") + "}"
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s) // PromQL's double-quoted strings take Go's escapes
	return string(b)
}

// Uses is what an expression reads.
type Uses struct {
	Selectors []Selector
	// Labels are named in by, without, on, ignoring, group_left and
	// group_right clauses.
	Labels []string
}

var (
	// aggregations may be followed by a grouping clause before their
	// parenthesis, so they are never taken for a metric.
	aggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
		"count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
	// grouping clauses list labels in parentheses (group_left and
	// group_right may list none).
	grouping = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	// keywords are operators and modifiers spelt as words.
	keywords = []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
)

// Parse finds what expr reads. It checks only what it needs to: strings,
// braces and brackets must be closed.
func Parse(expr string) (Uses, error) {
	var u Uses
	l := lexer{s: expr}
	last := -1 // the selector a '{' right after a metric name belongs to
	for {
		l.skipSpace()
		if l.done() {
			return u, nil
		}
		c := l.s[l.i]
		switch {
		case c == '#':
			for !l.done() && l.s[l.i] != '\n' {
				l.i++
			}
		case c == '"' || c == '\'' || c == '`':
			if _, err := l.str(); err != nil {
				return u, err
			}
			last = -1
		case c == '[':
			end := strings.IndexByte(l.s[l.i:], ']')
			if end < 0 {
				return u, fmt.Errorf("unclosed [ at %d", l.i)
			}
			l.i += end + 1
			last = -1
		case c == '{':
			ms, err := l.matchers()
			if err != nil {
				return u, err
			}
			if last >= 0 {
				u.Selectors[last].Matchers = ms
			} else {
				if len(ms) == 0 {
					return u, fmt.Errorf("empty selector at %d", l.i)
				}
				sel := Selector{Matchers: ms}
				for _, m := range ms {
					if m.Label == "__name__" && m.Op == "=" {
						sel.Metric = m.Value
					}
				}
				u.Selectors = append(u.Selectors, sel)
			}
			last = -1
		case isDigit(c) || (c == '.' && l.i+1 < len(l.s) && isDigit(l.s[l.i+1])):
			l.number()
			last = -1
		case isIdentStart(c):
			word := l.ident()
			lower := strings.ToLower(word)
			l.skipSpace()
			next := byte(0)
			if !l.done() {
				next = l.s[l.i]
			}
			last = -1
			switch {
			case slices.Contains(grouping, lower):
				if next == '(' {
					labels, err := l.labelList()
					if err != nil {
						return u, err
					}
					u.Labels = append(u.Labels, labels...)
				}
			case slices.Contains(aggregations, lower), slices.Contains(keywords, lower), next == '(':
				// an aggregation, a keyword, or a function call
			default:
				u.Selectors = append(u.Selectors, Selector{Metric: word})
				last = len(u.Selectors) - 1
			}
		default:
			l.i++
			last = -1
		}
	}
}

type lexer struct {
	s string
	i int
}

func (l *lexer) done() bool { return l.i >= len(l.s) }

func (l *lexer) skipSpace() {
	for !l.done() && strings.IndexByte(" \t\r\n", l.s[l.i]) >= 0 {
		l.i++
	}
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdent(c byte) bool      { return isIdentStart(c) || isDigit(c) }

func (l *lexer) ident() string {
	start := l.i
	for !l.done() && isIdent(l.s[l.i]) {
		l.i++
	}
	return l.s[start:l.i]
}

// number skips a number or a duration: 0.99, 1e9, 0x1f, 5m, 1h30m.
func (l *lexer) number() {
	for !l.done() {
		c := l.s[l.i]
		switch {
		case isIdent(c) || c == '.':
		case (c == '+' || c == '-') && (l.s[l.i-1]|0x20) == 'e' && !strings.HasPrefix(strings.ToLower(l.s[:l.i]), "0x"):
		default:
			return
		}
		l.i++
	}
}

// str reads a string literal and returns its value.
func (l *lexer) str() (string, error) {
	quote := l.s[l.i]
	start := l.i
	l.i++
	var b strings.Builder
	for !l.done() {
		c := l.s[l.i]
		switch {
		case c == quote:
			l.i++
			return b.String(), nil
		case c == '\\' && quote != '`' && l.i+1 < len(l.s):
			b.WriteByte(l.s[l.i+1])
			l.i += 2
			continue
		}
		b.WriteByte(c)
		l.i++
	}
	return "", fmt.Errorf("unclosed string at %d", start)
}

// matchers reads {label op "value", ...}.
func (l *lexer) matchers() ([]Matcher, error) {
	start := l.i
	l.i++ // {
	var ms []Matcher
	for {
		l.skipSpace()
		if l.done() {
			return nil, fmt.Errorf("unclosed { at %d", start)
		}
		if l.s[l.i] == '}' {
			l.i++
			return ms, nil
		}
		if l.s[l.i] == ',' {
			l.i++
			continue
		}
		if !isIdentStart(l.s[l.i]) {
			return nil, fmt.Errorf("label name expected at %d", l.i)
		}
		var m Matcher
		m.Label = l.ident()
		l.skipSpace()
		for _, op := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(l.s[l.i:], op) {
				m.Op = op
				l.i += len(op)
				break
			}
		}
		if m.Op == "" {
			return nil, fmt.Errorf("matcher operator expected at %d", l.i)
		}
		l.skipSpace()
		if l.done() || strings.IndexByte("\"'`", l.s[l.i]) < 0 {
			return nil, fmt.Errorf("matcher value expected at %d", l.i)
		}
		v, err := l.str()
		if err != nil {
			return nil, err
		}
		m.Value = v
		ms = append(ms, m)
	}
}

// labelList reads (label, ...).
func (l *lexer) labelList() ([]string, error) {
	start := l.i
	end := strings.IndexByte(l.s[l.i:], ')')
	if end < 0 {
		return nil, fmt.Errorf("unclosed ( at %d", start)
	}
	var labels []string
	for _, f := range strings.Split(l.s[l.i+1:l.i+end], ",") {
		if f = strings.TrimSpace(f); f != "" {
			labels = append(labels, f)
		}
	}
	l.i += end + 1
	return labels, nil
}

// grafanaVar is a dashboard variable: $name or ${name}.
var grafanaVar = regexp.MustCompile(`\$\{[A-Za-z0-9_]+\}|\$[A-Za-z0-9_]+`)

// labelValues is Grafana's label_values([selector,] label) query.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(?:(.*),\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// DashboardQueries returns the PromQL a Grafana dashboard's JSON runs:
// every "expr" of its panels' targets (rows included), with Grafana's
// variables substituted (Substitute); and what its variables' queries
// read, label_values(selector, label) as the selector and the label.
func DashboardQueries(dashboard []byte) (exprs []string, variables []Uses, err error) {
	var doc any
	if err := json.Unmarshal(dashboard, &doc); err != nil {
		return nil, nil, err
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if s, ok := c.(string); ok && k == "expr" {
					exprs = append(exprs, Substitute(s))
					continue
				}
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if m, ok := doc.(map[string]any); ok {
		if tpl, ok := m["templating"].(map[string]any); ok {
			list, _ := tpl["list"].([]any)
			for _, item := range list {
				v, _ := item.(map[string]any)
				if v["type"] != "query" {
					continue
				}
				q := v["query"]
				if o, ok := q.(map[string]any); ok {
					q = o["query"]
				}
				s, _ := q.(string)
				lv := labelValues.FindStringSubmatch(Substitute(s))
				if lv == nil {
					return nil, nil, fmt.Errorf("variable %v: query %q is not label_values(...)", v["name"], s)
				}
				var u Uses
				if lv[1] != "" {
					if u, err = Parse(lv[1]); err != nil {
						return nil, nil, fmt.Errorf("variable %v: %w", v["name"], err)
					}
				}
				u.Labels = append(u.Labels, lv[2])
				variables = append(variables, u)
			}
		}
	}
	return exprs, variables, nil
}
