package outbox

// The package's errors say how a caller should treat them, as
// replication's do (Permanent: retrying cannot fix it).
var (
	// ErrInvalidName is returned for a slot, publication or table name that
	// cannot be used safely.
	ErrInvalidName error = &sentinel{"invalid name", true}
	// ErrFenced means a write for the pipeline was refused because the
	// pipeline's fence no longer holds: another relay took it over (a mark
	// of polled rows, store's lease).
	ErrFenced error = &sentinel{"another relay holds the pipeline now", false}
)

type sentinel struct {
	msg       string
	permanent bool
}

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Permanent() bool { return e.permanent }

// Unavailable: none of these says anything of logical replication.
func (e *sentinel) Unavailable() bool { return false }
