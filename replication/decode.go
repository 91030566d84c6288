package replication

import (
	"fmt"
	"sync/atomic"
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
}

// Change is one item of the stream.
type Change struct {
	Kind       Kind
	LSN        pglogrepl.LSN // KindCommit: commit end LSN; KindHeartbeat: message LSN; KindRow: the row's WAL position
	FinalLSN   pglogrepl.LSN // KindRow and KindCommit: the transaction's commit LSN, from its Begin
	XID        uint32
	CommitTime time.Time // of the row's transaction
	Relation   *Relation // KindRow
	Values     [][]byte  // KindRow: text values in table column order, nil for NULL; owned by the receiver
}

// Counters are what the stream saw besides rows; read them with Load.
type Counters struct {
	Rows        atomic.Int64 // inserts into the outbox table
	Ignored     atomic.Int64 // updates, deletes and truncates of the outbox table
	OtherTables atomic.Int64 // changes of tables other than the outbox table
	Heartbeats  atomic.Int64 // heartbeat messages received
	Keepalives  atomic.Int64 // primary keepalive messages received
}

// HeartbeatPrefix is the logical message prefix pgoutbox emits and recognises.
const HeartbeatPrefix = "pgoutbox"

// decoder turns pgoutput messages into Changes. It holds the relation cache
// and the state of the current transaction; it is not safe for concurrent use.
type decoder struct {
	tables     map[Table]bool
	relations  map[uint32]relation
	inTx       bool
	xid        uint32
	final      pglogrepl.LSN
	commitTime time.Time
	counters   *Counters
	onUpdate   func(Table, pglogrepl.LSN) error
}

func newDecoder(tables []Table, counters *Counters) *decoder {
	d := &decoder{tables: make(map[Table]bool, len(tables)), relations: make(map[uint32]relation), counters: counters}
	for _, t := range tables {
		d.tables[t] = true
	}
	return d
}

// decode handles one XLogData payload. ok is false when the message yields
// no Change (Begin, Relation, ignored operations...).
func (d *decoder) decode(walStart pglogrepl.LSN, data []byte) (c Change, ok bool, err error) {
	if len(data) == 0 {
		return c, false, fmt.Errorf("%w: empty XLogData", ErrProtocol)
	}
	msg, err := parse(data)
	if err != nil {
		return c, false, err
	}
	switch m := msg.(type) {
	case beginMsg:
		if d.inTx {
			return c, false, fmt.Errorf("%w: BEGIN inside transaction %d", ErrProtocol, d.xid)
		}
		d.inTx, d.xid, d.commitTime, d.final = true, m.xid, m.commit, m.final
	case commitMsg:
		if !d.inTx {
			return c, false, fmt.Errorf("%w: COMMIT outside a transaction", ErrProtocol)
		}
		d.inTx = false
		return Change{Kind: KindCommit, LSN: m.end, FinalLSN: d.final, XID: d.xid, CommitTime: m.commit}, true, nil
	case *Relation:
		// Whether it is an outbox table is decided once per Relation
		// message, not per insert.
		d.relations[m.ID] = relation{m, d.tables[Table{Schema: m.Schema, Name: m.Name}]}
	case insertMsg:
		r, ok := d.relations[m.rel]
		if !ok {
			return c, false, fmt.Errorf("%w: change for relation %d before its Relation message", ErrProtocol, m.rel)
		}
		rel := r.Relation
		if !r.outbox {
			d.counters.OtherTables.Add(1)
			return c, false, nil
		}
		if !d.inTx {
			return c, false, fmt.Errorf("%w: INSERT outside a transaction", ErrProtocol)
		}
		if len(m.values) != len(rel.Columns) {
			return c, false, fmt.Errorf("%w: INSERT into %s.%s has %d values for %d columns", ErrProtocol, rel.Schema, rel.Name, len(m.values), len(rel.Columns))
		}
		d.counters.Rows.Add(1)
		return Change{Kind: KindRow, LSN: walStart, FinalLSN: d.final, XID: d.xid, CommitTime: d.commitTime, Relation: rel, Values: m.values}, true, nil
	case relIDs:
		for _, id := range m {
			d.count(id)
		}
	case updateMsg:
		d.count(m.rel)
		if r, ok := d.relations[m.rel]; ok && r.outbox && d.onUpdate != nil {
			if err := d.onUpdate(Table{Schema: r.Schema, Name: r.Name}, walStart); err != nil {
				return c, false, err
			}
		}
	case message:
		if m.transactional || m.prefix != HeartbeatPrefix {
			return c, false, nil
		}
		d.counters.Heartbeats.Add(1)
		if d.inTx {
			// pgoutput sends a non-transactional message between
			// transactions; never confirm a position inside one.
			return c, false, nil
		}
		return Change{Kind: KindHeartbeat, LSN: m.lsn}, true, nil
	}
	return c, false, nil
}

// relation is a Relation as the decoder keeps it: with whether it is one of
// the outbox tables.
type relation struct {
	*Relation
	outbox bool
}

// count records an update, delete or truncate: of the outbox, ignored; of
// another table, counted apart.
func (d *decoder) count(id uint32) {
	if r, ok := d.relations[id]; ok && r.outbox {
		d.counters.Ignored.Add(1)
		return
	}
	d.counters.OtherTables.Add(1)
}
