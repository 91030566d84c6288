package replication

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// The flush position must go out exactly as given: pglogrepl's own sender
// copies the write position into a zero flush, which would confirm what
// Kafka never acknowledged.
func TestStatusUpdateCarriesEveryPositionExplicitly(t *testing.T) {
	tests := []struct {
		name string
		pos  Position
	}{
		{"all distinct", Position{Write: 0x3000, Flush: 0x2000, Apply: 0x1000}},
		{"nothing confirmed yet", Position{Write: 0x5000, Flush: 0, Apply: 0}},
		{"write behind flush", Position{Write: 0x10, Flush: 0x20, Apply: 0x20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendStatusUpdate(nil, tt.pos, time.Now(), true)
			got, ok := parseStatusUpdate(b)
			if !ok {
				t.Fatalf("cannot parse %x", b)
			}
			if got != tt.pos {
				t.Fatalf("sent %+v, want %+v", got, tt.pos)
			}
			if b[len(b)-1] != 1 {
				t.Fatal("reply flag not set")
			}
		})
	}
}

// The encoding matches what the server parses: 'r', three int64 positions,
// a timestamp in microseconds since 2000-01-01, and the reply byte.
func TestStatusUpdateWireFormat(t *testing.T) {
	now := time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC)
	b := appendStatusUpdate(nil, Position{Write: 1, Flush: 2, Apply: 3}, now, false)
	want := []byte{'r',
		0, 0, 0, 0, 0, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 2,
		0, 0, 0, 0, 0, 0, 0, 3,
		0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, // 1,000,000 µs
		0}
	if string(b) != string(want) {
		t.Fatalf("got  %x\nwant %x", b, want)
	}
	if pglogrepl.StandbyStatusUpdateByteID != 'r' {
		t.Fatal("unexpected message id")
	}
}
