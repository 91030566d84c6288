package vanish

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/store"
)

// Account is where the detector keeps its account between phases, and
// reports what it found: the table's state row (StoreAccount).
type Account interface {
	LoadGap(ctx context.Context) (*store.Gap, error)
	SaveGap(ctx context.Context, g store.Gap) error
	ForgetGap(ctx context.Context) error
	SaveGapProgress(ctx context.Context, knownSeq, seq, unseen, taken int64) error
	AddGapBatch(ctx context.Context, knownSeq, n, lo, hi int64) error
	SaveLost(ctx context.Context, lost, from, to int64) error
}

// StoreAccount keeps the account in own's state row, on q.
func StoreAccount(own store.Pipeline, q store.Querier) Account { return stored{own, q} }

type stored struct {
	own store.Pipeline
	q   store.Querier
}

func (s stored) LoadGap(ctx context.Context) (*store.Gap, error) { return s.own.LoadGap(ctx, s.q) }
func (s stored) SaveGap(ctx context.Context, g store.Gap) error  { return s.own.SaveGap(ctx, s.q, g) }
func (s stored) ForgetGap(ctx context.Context) error             { return s.own.ForgetGap(ctx, s.q) }
func (s stored) SaveGapProgress(ctx context.Context, knownSeq, seq, unseen, taken int64) error {
	return s.own.SaveGapProgress(ctx, s.q, knownSeq, seq, unseen, taken)
}
func (s stored) AddGapBatch(ctx context.Context, knownSeq, n, lo, hi int64) error {
	return s.own.AddGapBatch(ctx, s.q, knownSeq, n, lo, hi)
}
func (s stored) SaveLost(ctx context.Context, lost, from, to int64) error {
	return s.own.SaveLost(ctx, s.q, lost, from, to)
}

// PollSource reads the table through c, and the snapshot on conn, c's
// connection.
func PollSource(c *poll.Census, conn *pgx.Conn) Source { return pollSource{c, conn} }

type pollSource struct {
	*poll.Census
	conn *pgx.Conn
}

func (s pollSource) XMin(ctx context.Context) (uint64, error) {
	xmin, _, _, err := poll.Snapshot(ctx, s.conn)
	return xmin, err
}

// checkpoint is the account of deleted rows as pgoutbox_state keeps it
// between phases (migration 011): see Detector.
type checkpoint struct {
	seq, knownSeq, known, deletes, unseen, reported int64
	// batchFrom and batchTo: the batch added to known and not confirmed
	// marked (0, -1: none).
	batchFrom, batchTo int64
	// sameStats: the database's statistics were not reset since.
	sameStats bool
	// files: filesKey of the table's relations then ("" when not saved).
	files string
}

// loadCheckpoint reads the account's checkpoint; nil where there is none.
func loadCheckpoint(ctx context.Context, acct Account) (*checkpoint, error) {
	g, err := acct.LoadGap(ctx)
	if g == nil || err != nil {
		return nil, err
	}
	return &checkpoint{seq: g.Seq, knownSeq: g.KnownSeq, known: g.Known, deletes: g.Deletes, unseen: g.Unseen,
		reported: g.Reported, batchFrom: g.BatchFrom, batchTo: g.BatchTo, sameStats: g.SameStats, files: g.Files}, nil
}

// saveCheckpoint replaces the account's checkpoint.
func saveCheckpoint(ctx context.Context, acct Account, cp checkpoint) error {
	return acct.SaveGap(ctx, store.Gap{Seq: cp.seq, KnownSeq: cp.knownSeq, Known: cp.known,
		Deletes: cp.deletes, Unseen: cp.unseen, Reported: cp.reported, Files: cp.files})
}
