package replication

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
)

// Counters are what the stream saw besides rows; read them with Load.
type Counters struct {
	Rows    atomic.Int64 // inserts into the outbox table (and its updates and deletes under ChangeEvents)
	Ignored atomic.Int64 // updates, deletes and truncates of the outbox table not read as rows
	// Truncates counts the truncates of the outbox table among Ignored.
	Truncates atomic.Int64
	// OtherTables counts changes of tables other than the outbox tables
	// that a publication of all tables, or of whole schemas, publishes,
	// and updates and deletes of any other table.
	OtherTables atomic.Int64
	Heartbeats  atomic.Int64 // heartbeat messages received
	Messages    atomic.Int64 // logical decoding messages read as rows
	Keepalives  atomic.Int64 // primary keepalive messages received
}

// HeartbeatPrefix is the logical message prefix pgoutbox emits and recognises.
const HeartbeatPrefix = "pgoutbox"

// decoder turns pgoutput messages into Changes. It holds the relation cache
// and the state of the current transaction; it is not safe for concurrent use.
type decoder struct {
	rels       *relations
	relations  map[uint32]relation
	inTx       bool
	xid        uint32
	final      pglogrepl.LSN
	prevEnd    pglogrepl.LSN // the end of the last commit decoded
	commitTime time.Time
	counters   *Counters
	onUpdate   func(outbox.Table, pglogrepl.LSN) error
	// changeEvents makes the updates and deletes of the pipeline's tables
	// rows (Config.ChangeEvents); truncates their truncates
	// (Config.Truncates), more holding those of a message's tables after
	// the first, which the stream hands over after it.
	changeEvents bool
	truncates    bool
	more         []outbox.Change
	// ordinal counts the current transaction's rows (Change.Ordinal).
	ordinal uint32
	// truncated are the outbox tables the last message truncated; gone
	// the tables whose rows are skipped because the publication no longer
	// publishes them; renamed the outbox tables (and the name) met under
	// another name. The stream reports and clears them.
	truncated []outbox.Table
	gone      []outbox.Table
	renamed   [][2]outbox.Table
	// messages selects the logical decoding messages read as rows (nil:
	// none); msgRows makes their rows. boundary is the commit that closes
	// a non-transactional message's row, which the stream hands over
	// right after it.
	messages *Messages
	msgRows  messageRows
	boundary *outbox.Change
}

func newDecoder(rels *relations, counters *Counters) *decoder {
	return &decoder{rels: rels, relations: make(map[uint32]relation), counters: counters}
}

// stopAt is an error of the OnUpdate callback: the stream ends at the
// update, after what was decoded before it is handed over.
type stopAt struct{ err error }

func (e stopAt) Error() string { return e.err.Error() }
func (e stopAt) Unwrap() error { return e.err }

// decode handles one XLogData payload. ok is false when the message yields
// no Change (Begin, Relation, ignored operations...).
func (d *decoder) decode(walStart pglogrepl.LSN, data []byte) (c outbox.Change, ok bool, err error) {
	if len(data) == 0 {
		return c, false, fmt.Errorf("%w: empty XLogData", ErrProtocol)
	}
	msg, err := parseWith(data, d.changeEvents)
	if err != nil {
		return c, false, err
	}
	switch m := msg.(type) {
	case beginMsg:
		if d.inTx {
			return c, false, fmt.Errorf("%w: BEGIN inside transaction %d", ErrProtocol, d.xid)
		}
		d.inTx, d.xid, d.commitTime, d.final, d.ordinal = true, m.xid, m.commit, m.final, 0
	case commitMsg:
		if !d.inTx {
			return c, false, fmt.Errorf("%w: COMMIT outside a transaction", ErrProtocol)
		}
		d.inTx = false
		d.prevEnd = m.end
		return outbox.Change{Kind: outbox.KindCommit, LSN: m.end, FinalLSN: d.final, XID: d.xid, CommitTime: m.commit}, true, nil
	case *outbox.Relation:
		// What it is to the pipeline is decided once per Relation
		// message, not per insert.
		r := d.relation(m)
		if r.class == classRenamed {
			d.renamed = append(d.renamed, [2]outbox.Table{r.root, r.name()})
		}
		d.relations[m.ID] = r
	case insertMsg:
		r, ok, err := d.rowRelation(m.rel, walStart, "INSERT")
		if !ok || err != nil {
			return c, false, err
		}
		rel := r.Relation
		if len(m.values) != len(rel.Columns) {
			return c, false, fmt.Errorf("%w: INSERT into %s.%s has %d values for %d columns", ErrProtocol, rel.Schema, rel.Name, len(m.values), len(rel.Columns))
		}
		d.counters.Rows.Add(1)
		d.ordinal++
		return outbox.Change{Kind: outbox.KindRow, Ordinal: d.ordinal, LSN: walStart, FinalLSN: d.final, PrevEnd: d.prevEnd, XID: d.xid, CommitTime: d.commitTime, Relation: rel, Values: m.values}, true, nil
	case deleteMsg:
		if !d.changeEvents {
			d.count(m.rel)
			return c, false, nil
		}
		r, ok, err := d.rowRelation(m.rel, walStart, "DELETE")
		if !ok || err != nil {
			return c, false, err
		}
		rel := r.Relation
		if len(m.old) != len(rel.Columns) {
			return c, false, fmt.Errorf("%w: DELETE from %s.%s has %d values for %d columns", ErrProtocol, rel.Schema, rel.Name, len(m.old), len(rel.Columns))
		}
		d.counters.Rows.Add(1)
		d.ordinal++
		return outbox.Change{Kind: outbox.KindRow, Ordinal: d.ordinal, Op: schema.OpDelete, LSN: walStart, FinalLSN: d.final, PrevEnd: d.prevEnd, XID: d.xid, CommitTime: d.commitTime,
			Relation: rel, Values: m.old, Old: m.old, OldFull: m.oldFull}, true, nil
	case updateMsg:
		if d.changeEvents {
			r, ok, err := d.rowRelation(m.rel, walStart, "UPDATE")
			if !ok || err != nil {
				return c, false, err
			}
			rel := r.Relation
			if len(m.new) != len(rel.Columns) || (m.old != nil && len(m.old) != len(rel.Columns)) {
				return c, false, fmt.Errorf("%w: UPDATE of %s.%s has %d and %d values for %d columns", ErrProtocol, rel.Schema, rel.Name, len(m.old), len(m.new), len(rel.Columns))
			}
			d.counters.Rows.Add(1)
			d.ordinal++
			return outbox.Change{Kind: outbox.KindRow, Ordinal: d.ordinal, Op: schema.OpUpdate, LSN: walStart, FinalLSN: d.final, PrevEnd: d.prevEnd, XID: d.xid, CommitTime: d.commitTime,
				Relation: rel, Values: m.new, Old: m.old, OldFull: m.oldFull, Unchanged: m.unchanged}, true, nil
		}
		d.count(m.rel)
		if r, ok := d.relations[m.rel]; ok && (r.class == classOutbox || r.class == classRenamed) && d.onUpdate != nil {
			if err := d.onUpdate(outbox.Table{Schema: r.Schema, Name: r.Name}, walStart); err != nil {
				return c, false, stopAt{err}
			}
		}
	case truncateMsg:
		d.truncated = d.truncated[:0]
		var rows []outbox.Change
		for _, id := range m {
			if d.truncates {
				r, ok, err := d.rowRelation(id, walStart, "TRUNCATE")
				if err != nil {
					return c, false, err
				}
				if ok {
					d.counters.Rows.Add(1)
					d.ordinal++
					rows = append(rows, outbox.Change{Kind: outbox.KindRow, Ordinal: d.ordinal, Op: schema.OpTruncate, LSN: walStart, FinalLSN: d.final, PrevEnd: d.prevEnd,
						XID: d.xid, CommitTime: d.commitTime, Relation: r.Relation, Values: make([][]byte, len(r.Relation.Columns))})
				}
				continue // rowRelation counted another table's
			}
			if r, ok := d.relations[id]; ok && (r.class == classOutbox || r.class == classRenamed) {
				d.counters.Truncates.Add(1)
				d.truncated = append(d.truncated, r.root)
			}
			d.count(id)
		}
		if len(rows) > 0 {
			d.more = append(d.more, rows[1:]...)
			return rows[0], true, nil
		}
	case message:
		if d.messages.Reads(m.prefix) {
			return d.message(m)
		}
		if m.transactional || m.prefix != HeartbeatPrefix {
			return c, false, nil
		}
		d.counters.Heartbeats.Add(1)
		if d.inTx {
			// pgoutput sends a non-transactional message between
			// transactions; never confirm a position inside one.
			return c, false, nil
		}
		// Its content names the slot of the pgoutbox that wrote it: every
		// slot of the database reads every heartbeat.
		return outbox.Change{Kind: outbox.KindHeartbeat, LSN: m.lsn, Values: [][]byte{append([]byte(nil), m.content...)}}, true, nil
	}
	return c, false, nil
}

// message makes a read message's row. A transactional message is a row of
// its transaction, delivered at its commit. A non-transactional one comes
// between transactions (pgoutput sends it when it is decoded), as Debezium
// publishes it on its own: a transaction of its own row, with no
// transaction id, closed at the message's position, which is the end of
// its WAL record, so a stream started there does not send it again. Its
// FinalLSN, which exactly-once delivery keeps as the commit a Kafka
// transaction reached and skips every row at or below, is one byte before
// that end: the next WAL record starts at the end, and when it is a
// transaction's commit record, that transaction's rows carry the end as
// their FinalLSN; they come after the message and must not be skipped with
// it. Every transaction the stream sent before the message committed below
// the message's record.
func (d *decoder) message(m message) (outbox.Change, bool, error) {
	rel, values := d.msgRows.row(m.prefix, m.content)
	d.counters.Messages.Add(1)
	if m.transactional {
		if !d.inTx {
			return outbox.Change{}, false, fmt.Errorf("%w: transactional message outside a transaction", ErrProtocol)
		}
		d.ordinal++
		return outbox.Change{Kind: outbox.KindRow, Ordinal: d.ordinal, LSN: m.lsn, FinalLSN: d.final, PrevEnd: d.prevEnd, XID: d.xid, CommitTime: d.commitTime, Relation: rel, Values: values}, true, nil
	}
	if d.inTx {
		return outbox.Change{}, false, fmt.Errorf("%w: non-transactional message inside transaction %d", ErrProtocol, d.xid)
	}
	final := m.lsn - 1
	d.boundary = &outbox.Change{Kind: outbox.KindCommit, LSN: m.lsn, FinalLSN: final}
	return outbox.Change{Kind: outbox.KindRow, LSN: m.lsn, FinalLSN: final, PrevEnd: d.prevEnd, Relation: rel, Values: values}, true, nil
}

// relation is a Relation as the decoder keeps it: what it is to the
// pipeline, and for the rows of an outbox table the Relation they are
// handed over with, which names the outbox table (a partition's rows are
// the table's).
type relation struct {
	*outbox.Relation
	raw   *outbox.Relation // as the server sent it
	class relationClass
	root  outbox.Table // the outbox table, for classOutbox and classRenamed
	// looked: the catalog was read again for it.
	looked bool
}

// rowRelation is the relation of a row the stream carries (what, INSERT,
// UPDATE or DELETE, names it in errors): ok is false for a table other
// than the pipeline's, whose row is counted and skipped.
func (d *decoder) rowRelation(id uint32, walStart pglogrepl.LSN, what string) (r relation, ok bool, err error) {
	r, ok = d.relations[id]
	if !ok {
		return r, false, fmt.Errorf("%w: change for relation %d before its Relation message", ErrProtocol, id)
	}
	if r.class == classUnknown && !r.looked {
		// A partition attached, or a table that inherits created,
		// since the stream started: the catalog says.
		class, root, err := d.rels.reload(id, r.name())
		if err != nil {
			return r, false, err
		}
		r = d.relationAs(r.raw, class, root)
		r.looked = true
		d.relations[id] = r
		switch class {
		case classGone:
			d.gone = append(d.gone, r.name())
		case classRenamed:
			d.renamed = append(d.renamed, [2]outbox.Table{root, r.name()})
		}
	}
	switch r.class {
	case classOther, classGone:
		d.counters.OtherTables.Add(1)
		return r, false, nil
	case classUnknown:
		return r, false, &UnrecognisedError{Relation: r.name(), OID: id, LSN: walStart}
	}
	if !d.inTx {
		return r, false, fmt.Errorf("%w: %s outside a transaction", ErrProtocol, what)
	}
	return r, true, nil
}

func (d *decoder) relation(m *outbox.Relation) relation {
	class, root := d.rels.classify(m.ID, outbox.Table{Schema: m.Schema, Name: m.Name})
	return d.relationAs(m, class, root)
}

func (d *decoder) relationAs(m *outbox.Relation, class relationClass, root outbox.Table) relation {
	r := relation{Relation: m, raw: m, class: class, root: root}
	if (class == classOutbox || class == classRenamed) && (root.Schema != m.Schema || root.Name != m.Name) {
		r.Relation = &outbox.Relation{ID: m.ID, Schema: root.Schema, Name: root.Name, Columns: m.Columns}
	}
	return r
}

// name is the relation's name as the stream gives it at that point.
func (r relation) name() outbox.Table { return outbox.Table{Schema: r.raw.Schema, Name: r.raw.Name} }

// count records an update, delete or truncate: of the outbox, ignored; of
// another table, counted apart.
func (d *decoder) count(id uint32) {
	if r, ok := d.relations[id]; ok && (r.class == classOutbox || r.class == classRenamed) {
		d.counters.Ignored.Add(1)
		return
	}
	d.counters.OtherTables.Add(1)
}
