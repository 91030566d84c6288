package schema

import (
	"fmt"
	"regexp"
	"strings"
)

// Patterns is a Debezium include or exclude list (table.include.list,
// column.exclude.list, a column mapping's columns, …): regular
// expressions, each matched whole and in any case, as Debezium's
// Predicates.includes matches them.
type Patterns []*regexp.Regexp

// ParsePatterns reads a comma-separated list of patterns, each trimmed;
// empty items are skipped.
func ParsePatterns(list string) (Patterns, error) {
	var out Patterns
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		re, err := regexp.Compile(`(?i)^(?:` + p + `)$`)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Match tells whether one of the patterns matches s.
func (ps Patterns) Match(s string) bool {
	for _, re := range ps {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
