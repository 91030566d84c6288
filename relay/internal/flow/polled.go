package flow

import (
	"strconv"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// MaxPolledSeqs bounds what a poll phase remembers for the WAL session
// after it: beyond it, the WAL simply sends the rest again.
const MaxPolledSeqs = 1 << 20

// Polled are the rows a poll phase published, handed to the WAL session
// after it, which skips them until its stream passes the WAL position the
// phase ended at.
type Polled struct {
	seqs  Seqs
	until pglogrepl.LSN
	// byTable are, in a pipeline of several tables, each table's rows by
	// its name (schema.table); seqs is then unused.
	byTable map[string]Seqs
}

// Add records a row the poll phase published.
func (p *Polled) Add(seq int64) { p.seqs.Add(seq) }

// EndAt records where the poll phase ended: every row it published
// committed before the WAL's insert position until; once the WAL passes
// it, none can come again.
func (p *Polled) EndAt(until pglogrepl.LSN) { p.until = until }

// Until is where the poll phase ended (EndAt).
func (p *Polled) Until() pglogrepl.LSN { return p.until }

// Unknown says the poll phase's end cannot be read: without it, nothing
// can be skipped safely, so nothing is.
func (p *Polled) Unknown() { p.seqs = nil }

// EndByTable is EndAt for a poll group: every table's rows, by its name,
// replacing what was kept.
func (p *Polled) EndByTable(until pglogrepl.LSN, byTable map[string]Seqs) {
	p.Forget()
	p.until, p.byTable = until, byTable
}

// of returns the set the WAL row c would be in.
func (p *Polled) of(c *outbox.Change) Seqs {
	if p.byTable == nil {
		return p.seqs
	}
	return p.byTable[outbox.Table{Schema: c.Relation.Schema, Name: c.Relation.Name}.String()]
}

// pending tells whether any polled row may still come from the WAL.
func (p *Polled) pending() bool { return len(p.seqs) > 0 || len(p.byTable) > 0 }

// passed tells whether a commit at lsn is past every polled row the
// stream may replay: then none is left to skip.
func (p *Polled) passed(lsn pglogrepl.LSN) bool { return p.pending() && lsn > p.until }

// Rows are the rows of a poll session of one table.
func (p *Polled) Rows() Seqs { return p.seqs }

// Forget stops the skipping: the stream is past what polling published.
func (p *Polled) Forget() { p.seqs, p.byTable = nil, nil }

// Seqs are the rows a poll phase published (Kafka acked them), by their
// order value. When the relay returns to the WAL, the slot replays those
// transactions; the WAL session skips these rows instead of publishing
// them twice. Skipping an acknowledged row loses nothing and keeps order:
// it was delivered before everything the WAL publishes after it.
type Seqs map[int64]struct{}

// Add adds seq, up to MaxPolledSeqs of them.
func (p *Seqs) Add(seq int64) {
	if *p == nil {
		*p = make(Seqs)
	}
	if len(*p) < MaxPolledSeqs {
		(*p)[seq] = struct{}{}
	}
}

// Take reports whether seq was published by polling, and forgets it.
func (p Seqs) Take(seq int64) bool {
	if _, ok := p[seq]; ok {
		delete(p, seq)
		return true
	}
	return false
}

// SeqOf reads a row's order column (seq, or the table's own id), the
// insertion order polling marks rows by.
func SeqOf(rel *outbox.Relation, values [][]byte, order string) (int64, bool) {
	for i, col := range rel.Columns {
		if col.Name == order && i < len(values) && values[i] != nil {
			n, err := strconv.ParseInt(string(values[i]), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// XIDBefore compares 32-bit transaction ids as PostgreSQL does, modulo
// 2^32: a comes before b.
func XIDBefore(a, b uint32) bool { return int32(a-b) < 0 }
