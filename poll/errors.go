package poll

// The package's errors say how a caller should treat them, through
// methods that errors.As finds, as replication's do:
//
//	Permanent() bool    retrying cannot fix it: the table or the role
//	                    must change
var (
	// ErrNoPollingColumns means the outbox table lacks a column polling
	// needs (by default seq, txid and published_at); pgoutbox migrate
	// adds them.
	ErrNoPollingColumns error = &sentinel{"the outbox table lacks polling columns; pgoutbox migrate adds them without rewriting the table", true}
	// ErrNoSequence means seq draws from no sequence this role may read, so
	// positions that never became visible cannot be counted.
	ErrNoSequence error = &sentinel{"seq draws from no readable sequence", false}
	// ErrNoSnapshotOrder means a snapshot cannot read the table in
	// insertion order: no column gives it to every row.
	ErrNoSnapshotOrder error = &sentinel{"no insertion order to read the table's existing rows in", true}
)

type sentinel struct {
	msg       string
	permanent bool
}

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Permanent() bool { return e.permanent }
