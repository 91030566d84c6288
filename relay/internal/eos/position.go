package eos

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/store"
)

// Position is what the position topic keeps for a pipeline, written in the
// same Kafka transaction as the events it covers. From the WAL: the last
// Postgres transaction whose events that Kafka transaction carried, and
// which transactions Kafka has, for polling after it. From polling: the
// rows it carried, and the WAL position before it, carried over.
//
// What each mode learns from the other's:
//   - Polling after the WAL marks published, before it polls, the rows of
//     the transactions below FloorXID and of those listed in XIDs: every
//     transaction Kafka has from the WAL is one or the other.
//   - The WAL after polling skips what is at or below Commit (carried
//     from the WAL before polling), the rows the last poll carried (Seqs,
//     marked first), and the rows polling marked published: the stream
//     replays them from the slot's position.
type Position struct {
	Mode store.Mode
	// End is the commit end LSN (what the slot is confirmed to), Commit
	// the LSN of the commit record (what its rows carry as FinalLSN). In a
	// poll record, those of the last WAL record before it (0: none).
	End, Commit pglogrepl.LSN
	// Cluster is the system identifier of the cluster End and Commit
	// belong to (0: unknown); LSNs and transaction ids of another cluster
	// mean nothing here.
	Cluster int64
	// WAL records: every transaction below FloorXID is in Kafka, and so is
	// every transaction at or above it that Kafka has from the WAL since
	// the last poll record, by its 32-bit id, unless Incomplete (more
	// than maxListedXIDs of them).
	FloorXID   uint64
	XIDs       []uint32
	Incomplete bool
	// WAL records after polling: the stream may still replay rows polling
	// published, up to this WAL position.
	PolledUntil pglogrepl.LSN
	// Seqs are the order values (seq) of the rows a poll published.
	Seqs []int64
}

// maxListedXIDs bounds the transaction ids a WAL position record lists. A
// long transaction holds the floor back; past the bound, polling after the
// WAL may send again rows of the transactions not listed (at-least-once
// there), and says so.
const maxListedXIDs = 20_000

// positionValue is the record's value.
type positionValue struct {
	Pipeline       string     `json:"pipeline"`
	Mode           store.Mode `json:"mode"`
	LSN            string     `json:"lsn,omitempty"`        // WAL: commit end LSN
	CommitLSN      string     `json:"commit_lsn,omitempty"` // WAL: commit record LSN
	Cluster        int64      `json:"cluster,omitempty"`
	FloorXID       uint64     `json:"floor_xid,omitempty"`
	XIDs           xidList    `json:"xids,omitempty"`
	XIDsIncomplete bool       `json:"xids_incomplete,omitempty"`
	PolledUntil    string     `json:"polled_until,omitempty"` // WAL: replays of polled rows end here
	Seqs           []int64    `json:"seqs,omitempty"`         // poll: the rows published
	Time           time.Time  `json:"time"`
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

// Record is p as the position record of pipeline on topic, written at
// now.
func (p Position) Record(pipeline, topic string, now time.Time) (*kgo.Record, error) {
	v := positionValue{Pipeline: pipeline, Mode: p.Mode, Seqs: p.Seqs, Cluster: p.Cluster,
		FloorXID: p.FloorXID, XIDs: p.XIDs, XIDsIncomplete: p.Incomplete, Time: now.UTC()}
	if p.End != 0 {
		v.LSN, v.CommitLSN = p.End.String(), p.Commit.String()
	}
	if p.PolledUntil != 0 {
		v.PolledUntil = p.PolledUntil.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(pipeline), Value: b}, nil
}

// ParsePosition reads a position record.
func ParsePosition(rec *kgo.Record) (Position, error) {
	var v positionValue
	if err := json.Unmarshal(rec.Value, &v); err != nil {
		return Position{}, fmt.Errorf("position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
	}
	if v.Mode != store.ModeWAL && v.Mode != store.ModePoll {
		return Position{}, fmt.Errorf("position record at offset %d of %s: unknown mode %q", rec.Offset, rec.Topic, v.Mode)
	}
	p := Position{Mode: v.Mode, Cluster: v.Cluster, FloorXID: v.FloorXID, XIDs: []uint32(v.XIDs), Incomplete: v.XIDsIncomplete, Seqs: v.Seqs}
	if v.LSN != "" || v.Mode == store.ModeWAL {
		end, err1 := pglogrepl.ParseLSN(v.LSN)
		commit, err2 := pglogrepl.ParseLSN(v.CommitLSN)
		if err := errors.Join(err1, err2); err != nil {
			return Position{}, fmt.Errorf("position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
		}
		p.End, p.Commit = end, commit
	}
	if v.PolledUntil != "" {
		until, err := pglogrepl.ParseLSN(v.PolledUntil)
		if err != nil {
			return Position{}, fmt.Errorf("position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
		}
		p.PolledUntil = until
	}
	return p, nil
}

// otherCluster tells whether p was written from another cluster than the
// session's (cluster, 0: unknown): then its LSNs and transaction ids say
// nothing here.
func (p Position) otherCluster(cluster int64) bool {
	return p.Cluster != 0 && cluster != 0 && p.Cluster != cluster
}

// walPart is what a poll record carries over of p, on the session's
// cluster: the WAL's position.
func (p Position) walPart(cluster int64) Position {
	if p.End == 0 || p.otherCluster(cluster) {
		return Position{Cluster: cluster}
	}
	return Position{End: p.End, Commit: p.Commit, Cluster: p.Cluster}
}

func (p Position) String() string {
	if p.Mode == store.ModePoll {
		return fmt.Sprintf("%d polled rows after WAL position %s", len(p.Seqs), p.End)
	}
	return fmt.Sprintf("%s (transactions below %d and %d listed)", p.End, p.FloorXID, len(p.XIDs))
}
