package poll

import "testing"

// Only an error of the planned statement makes the table unfit to be
// marked: a connection terminated by an administrator (57P01), the server
// shutting down (57P02) or out of connections (53300), which a takeover
// meets, are for the caller to try again.
func TestStatementError(t *testing.T) {
	for code, want := range map[string]bool{
		"42703": true, "42804": true, "42501": true, "22P02": true, "23514": false,
		"57P01": false, "57P02": false, "53300": false, "08006": false, "40001": false,
	} {
		if got := statementError(code); got != want {
			t.Errorf("statementError(%s) = %v, want %v", code, got, want)
		}
	}
}
