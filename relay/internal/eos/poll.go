package eos

import (
	"context"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/store"
)

// Poll is a poll session's exactly-once delivery: each polled batch is
// one Kafka transaction, committed with the rows it carried as its
// position, or not at all.
type Poll struct {
	*Session
	// wal is the WAL position each poll record carries.
	wal Position
}

// Marker marks rows published (poll.Poller).
type Marker interface {
	MarkPublished(ctx context.Context, seqs []int64) error
	MarkTransactions(ctx context.Context, floor outbox.Floor, below uint64, xids []uint32) (int64, error)
}

// OpenPoll starts a poll session's exactly-once delivery on the cluster
// cluster: after the fence, what the last committed Kafka transaction
// carried is marked published through rows (resumePoll) before anything
// is polled from floor.
func OpenPoll(ctx context.Context, t *Session, cluster int64, rows Marker, floor outbox.Floor) (*Poll, error) {
	pos, err := t.open(ctx)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	res := resumePoll(pos, cluster)
	switch {
	case len(res.seqs) > 0:
		if err := rows.MarkPublished(mctx, res.seqs); err != nil {
			return nil, err
		}
	case res.foreign:
		t.log.Warn("exactly-once delivery: the last kafka transaction was written from the WAL of another cluster; polling may send again rows that it carried",
			"position_cluster", pos.Cluster, "cluster", cluster)
	case res.markWAL:
		n, err := rows.MarkTransactions(mctx, floor, res.below, res.xids)
		if err != nil {
			return nil, err
		}
		if pos.Incomplete {
			t.log.Warn("exactly-once delivery: the WAL published more transactions than its position record lists (a long transaction held the floor back); polling may send again rows of those not listed",
				"listed", len(pos.XIDs))
		}
		t.log.Info("exactly-once delivery: rows the WAL published are marked published before polling", "rows", n,
			"below_xid", pos.FloorXID, "listed_transactions", len(pos.XIDs))
	}
	t.log.Info("exactly-once delivery: the last kafka transaction is marked published", "position", pos.String(),
		"position_topic", t.cfg.Topic, "transactional_id", t.cfg.TransactionalID)
	return &Poll{Session: t, wal: res.wal}, nil
}

// Settle commits the batch's Kafka transaction, with the rows it carried
// (exactly the acked ones) as its position; a batch with a failed record
// is not committed.
func (d *Poll) Settle(ctx context.Context, led *flow.PollLedger) error {
	d.failed = led.Failed
	if err := led.Failed(); err != nil {
		return d.k.Txn.Classify(err)
	}
	pos := d.wal // the WAL's position it carries
	pos.Mode, pos.Seqs = store.ModePoll, led.AckedSeqs()
	return d.Commit(ctx, ctx, pos, len(pos.Seqs))
}
