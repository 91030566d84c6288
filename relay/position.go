package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"
)

// position is what the position topic keeps for a pipeline, written in the
// same Kafka transaction as the events it covers. From the WAL: the last
// Postgres transaction whose events that Kafka transaction carried, and
// which transactions Kafka has, for polling after it. From polling: the
// rows it carried, and the WAL position before it, carried over.
//
// What each mode learns from the other's:
//   - Polling after the WAL marks published, before it polls, the rows of
//     the transactions below floorXID and of those listed in xids: every
//     transaction Kafka has from the WAL is one or the other.
//   - The WAL after polling skips what is at or below commit (carried
//     from the WAL before polling), the rows the last poll carried (seqs,
//     marked first), and the rows polling marked published: the stream
//     replays them from the slot's position.
type position struct {
	mode Mode
	// end is the commit end LSN (what the slot is confirmed to), commit
	// the LSN of the commit record (what its rows carry as FinalLSN). In a
	// poll record, those of the last WAL record before it (0: none).
	end, commit pglogrepl.LSN
	// cluster is the system identifier of the cluster end and commit
	// belong to (0: unknown); LSNs and transaction ids of another cluster
	// mean nothing here.
	cluster int64
	// WAL records: every transaction below floorXID is in Kafka, and so is
	// every transaction at or above it that Kafka has from the WAL since
	// the last poll record, by its 32-bit id, unless incomplete (more
	// than maxListedXIDs of them).
	floorXID   uint64
	xids       []uint32
	incomplete bool
	// WAL records after polling: the stream may still replay rows polling
	// published, up to this WAL position.
	polledUntil pglogrepl.LSN
	// seqs are the order values (seq) of the rows a poll published.
	seqs []int64
}

// maxListedXIDs bounds the transaction ids a WAL position record lists. A
// long transaction holds the floor back; past the bound, polling after the
// WAL may send again rows of the transactions not listed (at-least-once
// there), and says so.
const maxListedXIDs = 20_000

// positionValue is the record's value.
type positionValue struct {
	Pipeline       string    `json:"pipeline"`
	Mode           Mode      `json:"mode"`
	LSN            string    `json:"lsn,omitempty"`        // WAL: commit end LSN
	CommitLSN      string    `json:"commit_lsn,omitempty"` // WAL: commit record LSN
	Cluster        int64     `json:"cluster,omitempty"`
	FloorXID       uint64    `json:"floor_xid,omitempty"`
	XIDs           xidList   `json:"xids,omitempty"`
	XIDsIncomplete bool      `json:"xids_incomplete,omitempty"`
	PolledUntil    string    `json:"polled_until,omitempty"` // WAL: replays of polled rows end here
	Seqs           []int64   `json:"seqs,omitempty"`         // poll: the rows published
	Time           time.Time `json:"time"`
}

// xidList is written as a JSON array of numbers, as encoding/json writes
// a []uint32, without reflection per element: a position record lists up
// to maxListedXIDs of them, at every Kafka transaction's commit.
type xidList []uint32

func (l xidList) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(l)*11)
	b = append(b, '[')
	for i, x := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(x), 10)
	}
	return append(b, ']'), nil
}

// record is p as the position record of pipeline on topic, written at now.
func (p position) record(pipeline, topic string, now time.Time) (*kgo.Record, error) {
	v := positionValue{Pipeline: pipeline, Mode: p.mode, Seqs: p.seqs, Cluster: p.cluster,
		FloorXID: p.floorXID, XIDs: p.xids, XIDsIncomplete: p.incomplete, Time: now.UTC()}
	if p.end != 0 {
		v.LSN, v.CommitLSN = p.end.String(), p.commit.String()
	}
	if p.polledUntil != 0 {
		v.PolledUntil = p.polledUntil.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(pipeline), Value: b}, nil
}

func parsePosition(rec *kgo.Record) (position, error) {
	var v positionValue
	if err := json.Unmarshal(rec.Value, &v); err != nil {
		return position{}, fmt.Errorf("position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
	}
	if v.Mode != ModeWAL && v.Mode != ModePoll {
		return position{}, fmt.Errorf("position record at offset %d of %s: unknown mode %q", rec.Offset, rec.Topic, v.Mode)
	}
	p := position{mode: v.Mode, cluster: v.Cluster, floorXID: v.FloorXID, xids: []uint32(v.XIDs), incomplete: v.XIDsIncomplete, seqs: v.Seqs}
	if v.LSN != "" || v.Mode == ModeWAL {
		end, err1 := pglogrepl.ParseLSN(v.LSN)
		commit, err2 := pglogrepl.ParseLSN(v.CommitLSN)
		if err := errors.Join(err1, err2); err != nil {
			return position{}, fmt.Errorf("position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
		}
		p.end, p.commit = end, commit
	}
	if v.PolledUntil != "" {
		until, err := pglogrepl.ParseLSN(v.PolledUntil)
		if err != nil {
			return position{}, fmt.Errorf("position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
		}
		p.polledUntil = until
	}
	return p, nil
}

// otherCluster tells whether p was written from another cluster than the
// session's (cluster, 0: unknown): then its LSNs and transaction ids say
// nothing here.
func (p position) otherCluster(cluster int64) bool {
	return p.cluster != 0 && cluster != 0 && p.cluster != cluster
}

// walPart is what a poll record carries over of p, on the session's
// cluster: the WAL's position.
func (p position) walPart(cluster int64) position {
	if p.end == 0 || p.otherCluster(cluster) {
		return position{cluster: cluster}
	}
	return position{end: p.end, commit: p.commit, cluster: p.cluster}
}

func (p position) String() string {
	if p.mode == ModePoll {
		return fmt.Sprintf("%d polled rows after WAL position %s", len(p.seqs), p.end)
	}
	return fmt.Sprintf("%s (transactions below %d and %d listed)", p.end, p.floorXID, len(p.xids))
}

// walResume is what a WAL session under exactly-once delivery resumes
// from, given the position Kafka last committed (resumeWAL).
type walResume struct {
	// from is the position as it counts here: nothing of it where it was
	// written on another cluster (foreign).
	from    position
	foreign bool
	// after is what the stream skips: every row at or below its commit.
	// A WAL record's list of transactions goes on from it; after a poll
	// record the list starts empty, as what Kafka got from the WAL before
	// polling is marked in the table.
	after position
	// readPolled: the rows polling marked published are read, and skipped
	// until the stream passes polledUntil (0: the WAL's end as it is when
	// they are read); mark are the last poll transaction's rows, marked
	// published first.
	readPolled  bool
	mark        []int64
	polledUntil pglogrepl.LSN
}

// resumeWAL is what a WAL session skips after pos, on the cluster cluster
// (0: unknown), hasSeq saying the table has the polling columns. After a
// WAL record: everything at or below its commit, and, while it says the
// stream may still replay rows polling published, those rows. After a poll
// record: what is at or below the WAL position it carries, and every row
// polling published.
func resumeWAL(pos position, cluster int64, hasSeq bool) walResume {
	var r walResume
	if pos.otherCluster(cluster) {
		r.foreign = true
		pos = position{mode: pos.mode, seqs: pos.seqs}
	}
	r.from, r.after = pos, pos
	switch {
	case pos.mode == ModePoll && hasSeq:
		r.after = position{mode: ModeWAL, end: pos.end, commit: pos.commit, cluster: pos.cluster}
		r.readPolled, r.mark = true, pos.seqs
	case pos.mode == ModePoll:
		r.after = position{mode: ModeWAL, end: pos.end, commit: pos.commit, cluster: pos.cluster}
	case pos.polledUntil > pos.commit && hasSeq:
		r.readPolled, r.polledUntil = true, pos.polledUntil
	}
	return r
}

// pollResume is what a poll session under exactly-once delivery marks
// published before it polls, given the position Kafka last committed
// (resumePoll).
type pollResume struct {
	// seqs are the rows of the last poll transaction: a crash between its
	// commit and their mark left them unmarked.
	seqs []int64
	// markWAL: the rows of every transaction the WAL record says Kafka
	// has, below below or listed in xids, which polling would otherwise
	// read again from the floor.
	markWAL bool
	below   uint64
	xids    []uint32
	// foreign: the WAL record was written on another cluster; nothing of
	// it is marked.
	foreign bool
	// wal is the WAL position each poll record carries over.
	wal position
}

// resumePoll is what a poll session marks after pos, on the cluster
// cluster.
func resumePoll(pos position, cluster int64) pollResume {
	r := pollResume{wal: pos.walPart(cluster)}
	switch {
	case pos.mode == ModePoll && len(pos.seqs) > 0:
		r.seqs = pos.seqs
	case pos.mode == ModeWAL && pos.otherCluster(cluster):
		r.foreign = true
	case pos.mode == ModeWAL:
		r.markWAL, r.below, r.xids = true, pos.floorXID, pos.xids
	}
	return r
}
