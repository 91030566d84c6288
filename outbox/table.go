package outbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/schema"
)

// Table is a schema-qualified table name, each part as Postgres stores it
// (case kept).
type Table struct {
	Schema, Name string
}

// Table and column names are taken as Postgres stores them, and quoted
// wherever they reach SQL (pgx.Identifier.Sanitize). Quoting makes any
// name safe as an identifier, but names also reach places that are not
// identifiers (a sequence name inside the string literal of a column
// default, log lines, status output, the CloudEvents source), so they are
// validated first: 1 to 63 bytes (NAMEDATALEN-1) of printable UTF-8, with
// no control character, no single quote and no backslash. That covers what
// ORMs and teams name their outbox tables and columns (EF Core's and
// MassTransit's "OutboxMessage" and "MessageId", schemas such as
// "my-app", names with spaces or non-ASCII letters).
//
// In a table name written as text (--table, Debezium's table.include.list)
// each part is either bare, letters, digits, '_', '$' and '-' not starting
// with a digit or '-', taken as written (case kept, not folded as SQL
// folds it), or double-quoted as in SQL, with "" for a quote inside,
// which it must be when it holds anything else, such as a dot, a comma or
// a space.

// ValidateIdentifier checks a table, schema or column name as described
// above.
func ValidateIdentifier(kind, name string) error {
	if reason := identifierReason(name); reason != "" {
		return fmt.Errorf("%w: %s %q: %s", ErrInvalidName, kind, name, reason)
	}
	return nil
}

func identifierReason(name string) string { return schema.IdentifierProblem(name) }

// bare tells whether a name can be written without quotes.
func bare(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_':
		case '0' <= c && c <= '9', c == '$', c == '-':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return name != ""
}

// ParseTable parses "schema.table" or "table" (schema public), each part
// bare or double-quoted (see above). It is the one parser of table names:
// the relay, the commands, Debezium configurations and the bench all read
// theirs through it.
func ParseTable(s string) (Table, error) {
	parts, rest, err := parseName(s)
	if err == nil && rest != "" {
		err = fmt.Errorf("unexpected %q after the name", rest)
	}
	if err != nil {
		return Table{}, fmt.Errorf("%w: table %q: %v (write schema.table; quote a part holding anything but letters, digits, _, $ and -, as in SQL: \"my schema\".\"Outbox\")", ErrInvalidName, s, err)
	}
	return tableOf(s, parts)
}

func tableOf(s string, parts []string) (Table, error) {
	t := Table{Schema: "public"}
	switch len(parts) {
	case 1:
		t.Name = parts[0]
	case 2:
		t.Schema, t.Name = parts[0], parts[1]
	default:
		return Table{}, fmt.Errorf("%w: table %q: expected schema.table", ErrInvalidName, s)
	}
	for _, p := range []string{t.Schema, t.Name} {
		if reason := identifierReason(p); reason != "" {
			return Table{}, fmt.Errorf("%w: table %q: %s", ErrInvalidName, s, reason)
		}
	}
	return t, nil
}

// ParseTables parses a comma-separated list of tables; a comma inside a
// quoted part belongs to the name.
func ParseTables(s string) ([]Table, error) {
	var out []Table
	for rest := strings.TrimSpace(s); rest != ""; {
		parts, after, err := parseName(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: table list %q: %v", ErrInvalidName, s, err)
		}
		after = strings.TrimLeft(after, " \t")
		if after != "" && after[0] != ',' {
			return nil, fmt.Errorf("%w: table list %q: unexpected %q", ErrInvalidName, s, after)
		}
		t, err := tableOf(rest[:len(rest)-len(after)], parts)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		rest = strings.TrimLeft(strings.TrimPrefix(after, ","), " \t")
	}
	return out, nil
}

// parseName reads dot-separated parts from the start of s, each bare or
// double-quoted, and returns them with what follows (from the first
// character that can end a name: a comma or a space).
func parseName(s string) (parts []string, rest string, err error) {
	for {
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for {
				j := strings.IndexByte(s[i:], '"')
				if j < 0 {
					return nil, "", errors.New("unclosed quote")
				}
				b.WriteString(s[i : i+j])
				i += j + 1
				if !strings.HasPrefix(s[i:], `"`) {
					break
				}
				b.WriteByte('"')
				i++
			}
			parts, s = append(parts, b.String()), s[i:]
		} else {
			i := strings.IndexAny(s, `., "`+"\t")
			if i < 0 {
				i = len(s)
			}
			if i == 0 {
				return nil, "", errors.New("empty name")
			}
			if !bare(s[:i]) {
				return nil, "", fmt.Errorf("%q must be quoted", s[:i])
			}
			parts, s = append(parts, s[:i]), s[i:]
		}
		if !strings.HasPrefix(s, ".") {
			return parts, s, nil
		}
		s = s[1:]
	}
}

// String returns the table as ParseTable reads it back: schema.name, each
// part bare when it can be, quoted otherwise.
func (t Table) String() string { return writeName(t.Schema) + "." + writeName(t.Name) }

func writeName(s string) string {
	if bare(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// Quoted returns the table as a quoted SQL identifier.
func (t Table) Quoted() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }
