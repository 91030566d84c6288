package replication

import (
	"encoding/binary"
	"time"

	"github.com/jackc/pglogrepl"
)

// pgEpoch is the Postgres epoch that replication timestamps count from.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Position is what a standby status update reports. Write is what was
// received; Flush and Apply are what may be confirmed, which for a logical
// slot means what Kafka acknowledged.
type Position struct {
	Write, Flush, Apply pglogrepl.LSN
}

// appendStatusUpdate encodes a Standby Status Update ('r') with every
// position taken as given. pglogrepl.SendStandbyStatusUpdate replaces a zero
// flush position with the write position, which would confirm data Kafka
// has not acknowledged; encoding the message here rules that out.
func appendStatusUpdate(dst []byte, p Position, now time.Time, replyRequested bool) []byte {
	dst = append(dst, pglogrepl.StandbyStatusUpdateByteID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Write))
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Flush))
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Apply))
	dst = binary.BigEndian.AppendUint64(dst, uint64(now.Sub(pgEpoch).Microseconds()))
	reply := byte(0)
	if replyRequested {
		reply = 1
	}
	return append(dst, reply)
}

// parseStatusUpdate decodes what appendStatusUpdate wrote; tests use it to
// read back what went on the wire.
func parseStatusUpdate(b []byte) (Position, bool) {
	if len(b) != 34 || b[0] != pglogrepl.StandbyStatusUpdateByteID {
		return Position{}, false
	}
	return Position{
		Write: pglogrepl.LSN(binary.BigEndian.Uint64(b[1:])),
		Flush: pglogrepl.LSN(binary.BigEndian.Uint64(b[9:])),
		Apply: pglogrepl.LSN(binary.BigEndian.Uint64(b[17:])),
	}, true
}
