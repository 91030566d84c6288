package relay

import (
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/schema"
)

// snapshotMarker marks the rows a snapshot reads by their place in it, as
// Debezium's source.snapshot does (schema.SnapshotMark), and gives them the
// snapshot's position and time. Whether a row is the last of its table,
// or of the snapshot, is known only once the next is read: it holds one
// row back, which goes out with the rows after it, or alone at the end.
//
// As Debezium's: the first row of the first table is the snapshot's first
// (none is when that table is empty), the last row read is its last, and
// the first and last rows of each table are marked as such.
type snapshotMarker struct {
	table int // the table being read, from 0
	// read counts the rows of the current table.
	read int64
	held *poll.Row
	// The held row's place.
	heldTable              int
	heldFirst, heldLastInT bool
	lsn                    pglogrepl.LSN
	at                     time.Time
}

// newSnapshotMarker marks the rows of a snapshot read at the slot's
// consistent point lsn, at time at.
func newSnapshotMarker(lsn pglogrepl.LSN, at time.Time) *snapshotMarker {
	return &snapshotMarker{lsn: lsn, at: at}
}

// take takes the next rows of the current table and returns those whose
// marks are known, in order: the row held back first, the last of rows
// held back in its place.
func (m *snapshotMarker) take(rows []poll.Row) []poll.Row {
	out := make([]poll.Row, 0, len(rows)+1)
	for i := range rows {
		if m.held != nil {
			out = append(out, m.release(false))
		}
		r := rows[i]
		m.held, m.heldTable, m.heldFirst, m.heldLastInT = &r, m.table, m.read == 0, false
		m.read++
	}
	return out
}

// tableDone ends the current table: the row held back, if it is the
// table's, is its last.
func (m *snapshotMarker) tableDone() {
	if m.held != nil && m.heldTable == m.table {
		m.heldLastInT = true
	}
	m.table, m.read = m.table+1, 0
}

// finish returns the row held back, the snapshot's last; none if the
// snapshot read no row.
func (m *snapshotMarker) finish() []poll.Row {
	if m.held == nil {
		return nil
	}
	return []poll.Row{m.release(true)}
}

// release marks the held row and lets it go.
func (m *snapshotMarker) release(last bool) poll.Row {
	r := *m.held
	m.held = nil
	r.Snapshot = schema.MarkSnapshot(m.heldTable == 0 && m.heldFirst, last, m.heldFirst, m.heldLastInT)
	r.LSN, r.CommitTime = m.lsn, m.at
	return r
}
