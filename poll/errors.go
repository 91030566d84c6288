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
	// ErrColumnsUnfit means the table's columns, as configured, cannot be
	// polled: the order column is not an integer, or marking a row
	// published would fail (a column's type, a status value, a privilege).
	// Poller.Check finds it before anything is published: a mark that
	// fails after Kafka acked leaves the rows pending, to be sent again.
	ErrColumnsUnfit error = &sentinel{"polling cannot use the outbox table as configured", true}
	// ErrNoSequence means the order column draws from no sequence this
	// role may read, so positions that never became visible cannot be
	// counted.
	ErrNoSequence error = &sentinel{"the order column draws from no sequence this role may read", false}
	// ErrNoSnapshotOrder means polling cannot publish the rows already
	// in the table: no column every row has orders them, and polling
	// orders and marks rows by one. (A WAL snapshot reads them in one
	// consistent read, without one: see Order.)
	ErrNoSnapshotOrder error = &sentinel{"no insertion order to poll the table's existing rows in", true}
)

type sentinel struct {
	msg       string
	permanent bool
}

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Permanent() bool { return e.permanent }
