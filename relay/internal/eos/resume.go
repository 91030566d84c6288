package eos

import (
	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/store"
)

// walResume is what a WAL session under exactly-once delivery resumes
// from, given the position Kafka last committed (resumeWAL).
type walResume struct {
	// from is the position as it counts here: nothing of it where it was
	// written on another cluster (foreign).
	from    Position
	foreign bool
	// after is what the stream skips: every row at or below its commit.
	// A WAL record's list of transactions goes on from it; after a poll
	// record the list starts empty, as what Kafka got from the WAL before
	// polling is marked in the table.
	after Position
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
func resumeWAL(pos Position, cluster int64, hasSeq bool) walResume {
	var r walResume
	if pos.otherCluster(cluster) {
		r.foreign = true
		pos = Position{Mode: pos.Mode, Seqs: pos.Seqs}
	}
	r.from, r.after = pos, pos
	switch {
	case pos.Mode == store.ModePoll && hasSeq:
		r.after = Position{Mode: store.ModeWAL, End: pos.End, Commit: pos.Commit, Cluster: pos.Cluster}
		r.readPolled, r.mark = true, pos.Seqs
	case pos.Mode == store.ModePoll:
		r.after = Position{Mode: store.ModeWAL, End: pos.End, Commit: pos.Commit, Cluster: pos.Cluster}
	case pos.PolledUntil > pos.Commit && hasSeq:
		r.readPolled, r.polledUntil = true, pos.PolledUntil
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
	wal Position
}

// resumePoll is what a poll session marks after pos, on the cluster
// cluster.
func resumePoll(pos Position, cluster int64) pollResume {
	r := pollResume{wal: pos.walPart(cluster)}
	switch {
	case pos.Mode == store.ModePoll && len(pos.Seqs) > 0:
		r.seqs = pos.Seqs
	case pos.Mode == store.ModeWAL && pos.otherCluster(cluster):
		r.foreign = true
	case pos.Mode == store.ModeWAL:
		r.markWAL, r.below, r.xids = true, pos.FloorXID, pos.XIDs
	}
	return r
}
