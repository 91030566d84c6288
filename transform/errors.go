package transform

// DataError is what Kafka Connect throws as a DataException (or another
// runtime exception) for one record: a transform or a converter that
// cannot handle it. Connect's task fails there; pgoutbox sets the row
// aside as poison (dead-lettered, or the relay halts, by its policy).
type DataError struct {
	// Transform is the alias of the transform that failed; empty for a
	// converter.
	Transform string
	Reason    string
}

func (e *DataError) Error() string {
	if e.Transform == "" {
		return "transform: " + e.Reason
	}
	return "transform " + e.Transform + ": " + e.Reason
}

// Poison: the error is one record's.
func (e *DataError) Poison() bool { return true }

// Permanent: the same record fails the same way again.
func (e *DataError) Permanent() bool { return true }
