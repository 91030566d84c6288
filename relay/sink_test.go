package relay

import (
	"errors"
	"testing"
)

// A broker opened for exactly-once delivery must bring its transactions
// and position log; one without them is refused, and closed.
func TestOpenRefusesExactlyOnceWithoutTransactions(t *testing.T) {
	p := testPipeline(t, "", PoisonHalt)
	tests := []struct {
		name string
		use  SinkUse
		want error
	}{
		{"at-least-once", SinkUse{}, nil},
		{"exactly-once", SinkUse{TransactionalID: "pgoutbox.p", PositionTopic: "p.position"}, ErrNoTransactions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := p.open(tt.use)
			if !errors.Is(err, tt.want) {
				t.Fatalf("open: %v, want %v", err, tt.want)
			}
			if err == nil {
				b.Close()
			}
		})
	}
}
