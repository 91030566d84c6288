package schema

// The package's errors say how a caller should treat them, through
// methods that errors.As finds:
//
//	Permanent() bool  retrying cannot fix it: the table or the mapping
//	                  must change
//	Poison() bool     it belongs to one row, not to the pipeline: the row
//	                  can be set aside (dead-lettered) and the rest go on

// ErrMissingColumn is wrapped by [Columns.Bind] when the table lacks a
// required column; the error names the missing columns. It is permanent.
var ErrMissingColumn error = &sentinel{"outbox table lacks a required column"}

// ErrColumnType is wrapped by [Columns.Bind] when a column's type cannot
// serve its role; the error names the column. It is permanent.
var ErrColumnType error = &sentinel{"outbox column of the wrong type"}

type sentinel struct{ msg string }

func (e *sentinel) Error() string   { return e.msg }
func (e *sentinel) Permanent() bool { return true }

// Permanent: the row stays as it is until someone changes it.
func (e *RowError) Permanent() bool { return true }

// Poison: a RowError is one row's.
func (e *RowError) Poison() bool { return true }
