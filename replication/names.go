package replication

import (
	"fmt"
	"regexp"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// Slot and publication names are spliced into replication commands that
// cannot take parameters (pglogrepl formats them with Sprintf), so only the
// shape Postgres itself allows for slot names is accepted.
var namePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidateName checks a slot or publication name.
func ValidateName(kind, name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: %s %q: use 1-63 lower-case letters, digits and underscores, not starting with a digit", outbox.ErrInvalidName, kind, name)
	}
	return nil
}
