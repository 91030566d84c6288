package registry

import "fmt"

// RefusedError is the registry's refusal of a schema: an incompatible
// evolution under the subject's compatibility rule, an invalid schema, or
// (with auto-registration off) a schema not registered. It belongs to the
// record, which can be dead-lettered; retrying gives the same answer.
type RefusedError struct {
	Subject string
	Status  int
	// Answer is the registry's answer, as it gave it.
	Answer string
}

func (e *RefusedError) Error() string {
	if e.Status == 0 { // refused before asking the registry
		return fmt.Sprintf("schema of %s: %s", e.Subject, e.Answer)
	}
	return fmt.Sprintf("schema registry refused the schema of subject %s: %d %s", e.Subject, e.Status, e.Answer)
}

// Poison: the refusal is the record's schema's.
func (e *RefusedError) Poison() bool { return true }

// Permanent: asking again gives the same answer.
func (e *RefusedError) Permanent() bool { return true }

// UnreachableError is a registry that cannot answer now (no connection,
// a time-out, a 5xx): the record waits, and is tried again.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return "schema registry " + e.URL + " unreachable: " + e.Err.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }
