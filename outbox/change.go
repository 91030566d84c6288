package outbox

import (
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/schema"
)

// Kind says what a Change is.
type Kind uint8

const (
	// KindRow is an insert into the outbox table.
	KindRow Kind = iota + 1
	// KindCommit ends a transaction; LSN is its commit end LSN, the only
	// position that may be confirmed for it.
	KindCommit
	// KindHeartbeat is a heartbeat message outside any transaction; LSN may
	// be confirmed once everything before it is acknowledged.
	KindHeartbeat
)

// Relation is the shape of a table as last announced by the server. A new
// Relation value replaces the old one whenever the server sends it again
// (after ALTER TABLE, or on a new connection), so consumers may cache
// anything derived from it by pointer.
type Relation struct {
	ID      uint32
	Schema  string
	Name    string
	Columns []schema.Column
	// Message: the relation is a logical decoding message's shape, its
	// top-level JSON fields as columns (Schema names no schema, Name is
	// the message's prefix), not a table's.
	Message bool
}

// Change is one item of the stream.
type Change struct {
	Kind Kind
	// Snapshot (KindRow) places a row a snapshot read in it; zero for a
	// row of the stream or of polling.
	Snapshot schema.SnapshotMark
	LSN      pglogrepl.LSN // KindCommit: commit end LSN; KindHeartbeat: message LSN; KindRow: the row's WAL position
	FinalLSN pglogrepl.LSN // KindRow and KindCommit: the transaction's commit LSN, from its Begin
	// PrevEnd (KindRow) is the end of the last commit the stream received
	// before the row's transaction, of any transaction the stream carried,
	// 0 when none since it started: what Debezium writes first in
	// source.sequence (its lastCommitLsn).
	PrevEnd    pglogrepl.LSN
	XID        uint32
	CommitTime time.Time // of the row's transaction
	Relation   *Relation // KindRow
	Values     [][]byte  // KindRow: text values in table column order, nil for NULL; owned by the receiver
	// Op (KindRow) is the row's operation: an insert, or, where the
	// stream reads change events (replication.Config.ChangeEvents), an
	// update or a delete. A delete's Values are its Old.
	Op schema.Op
	// Old (an update or a delete) is the row before it, as the table's
	// replica identity gives it: the key's columns (the others nil), or
	// every column under REPLICA IDENTITY FULL (OldFull); nil for an
	// update of which the server sent no old row (the default identity,
	// the key unchanged).
	Old     [][]byte
	OldFull bool
	// Moved, for the delete and the create of an update that moved its
	// row to another key, is the other row: the new one for the delete,
	// the old one for the create.
	Moved [][]byte
	// Ordinal (KindRow, from the stream) is the row's place among its
	// transaction's rows, from 1: with FinalLSN it names the change
	// (several rows a COPY wrote share one WAL record, so LSN does not).
	Ordinal uint32
	// Unchanged (an update) marks the columns whose TOAST value the
	// update left as it was, which the server did not send (nil in
	// Values); nil when there is none.
	Unchanged []bool
}

// Inserted tells a row an INSERT wrote: not an update's or a delete's, nor
// the create Debezium makes of an update that changed the row's key
// (Op is OpInsert, Old the row before).
func (c *Change) Inserted() bool { return c.Op == schema.OpInsert && c.Old == nil }
