package eos

import (
	"context"
	"log/slog"
	"time"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/store"
)

// Transactions left open. A session whose Kafka transaction holds records
// and was never asked to commit (a failure, a stop while Kafka is
// unreachable) records it in the pipeline's state, and every exactly-once
// session reads that back before it reads the position topic: if Kafka's
// coordinator lost track of that transaction, LastCommitted aborts it
// rather than wait behind it for good (sink/orphan.go), in whichever
// process, the other relay of a pair's included.

// Unended is where the transactions left open are recorded: the
// pipeline's state row (Own), reached on a new connection to DB where
// the session's is gone.
type Unended struct {
	Own store.Pipeline
	DB  replication.Config
	Log *slog.Logger
}

// Remember records the transaction k's producer leaves open, if it was
// never asked to commit: in k, for this process's next session, and in
// the pipeline's state, for any process's. It runs as a session ends,
// whatever ended it. The session's connection may be gone by then (a
// SIGTERM cancels the query in flight, which closes it; the server went
// away), so a save that fails is tried again on a new connection.
func (u Unended) Remember(conn store.Querier, k Transactions) {
	id, epoch, ok := k.Unsent()
	if !ok {
		return
	}
	k.Unended(id, epoch)
	save := func(conn store.Querier) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return u.Own.SaveUnended(ctx, conn, id, epoch)
	}
	err := save(conn)
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if fresh, cerr := u.DB.Connect(ctx); cerr == nil {
			err = save(fresh)
			fresh.Close(context.Background())
		}
		cancel()
	}
	if err != nil {
		u.Log.Warn("recording the kafka transaction left open failed: if Kafka's coordinator loses track of it, the next relay waits behind it",
			"producer_id", id, "epoch", epoch, "err", err)
	}
}

// Learn tells k the transaction the pipeline's state records as left
// open.
func (u Unended) Learn(ctx context.Context, conn store.Querier, k Transactions) error {
	id, epoch, ok, err := u.Own.Unended(ctx, conn)
	if err != nil || !ok {
		return err
	}
	k.Unended(id, epoch)
	return nil
}
