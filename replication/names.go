package replication

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Slot and publication names are spliced into replication commands that
// cannot take parameters (pglogrepl formats them with Sprintf), so only the
// shape Postgres itself allows for slot names is accepted.
var namePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateName checks a slot or publication name.
func ValidateName(kind, name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: %s %q: use 1-63 lower-case letters, digits and underscores, not starting with a digit", ErrInvalidName, kind, name)
	}
	return nil
}

// Table is a schema-qualified table name.
type Table struct {
	Schema, Name string
}

var identPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// ParseTable parses "schema.table" or "table" (schema public). Names are
// taken as written, case included, and quoted wherever they reach SQL; a
// quoted name ("My Schema".outbox) is not parsed. It is the one parser of
// table names: the relay, the commands, Debezium configurations and the
// bench all read theirs through it.
func ParseTable(s string) (Table, error) {
	schema, name, ok := strings.Cut(s, ".")
	if !ok {
		schema, name = "public", s
	}
	for _, part := range []string{schema, name} {
		if !identPattern.MatchString(part) {
			return Table{}, fmt.Errorf("%w: table %q: expected schema.table of letters, digits and underscores", ErrInvalidName, s)
		}
	}
	return Table{Schema: schema, Name: name}, nil
}

// String returns schema.name as given.
func (t Table) String() string { return t.Schema + "." + t.Name }

// Quoted returns the table as a quoted SQL identifier.
func (t Table) Quoted() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }
