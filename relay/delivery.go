package relay

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/replication"
)

// Delivery is what the relay promises a consumer of its topics.
type Delivery string

const (
	// AtLeastOnce: every event arrives, in order per aggregate; a crash
	// can send what was in flight again.
	AtLeastOnce Delivery = "at-least-once"
	// ExactlyOnce: a consumer with isolation.level=read_committed sees
	// every event once. Events go out in Kafka transactions that carry
	// whole Postgres transactions and a position record on the
	// pipeline's position topic; a restart reads that position and skips
	// what Kafka already has.
	ExactlyOnce Delivery = "exactly-once"
)

// ParseDelivery parses at-least-once or exactly-once.
func ParseDelivery(s string) (Delivery, error) {
	switch d := Delivery(s); d {
	case AtLeastOnce, ExactlyOnce:
		return d, nil
	}
	return "", fmt.Errorf("delivery %q: use at-least-once or exactly-once", s)
}

// A session's delivery is chosen once, when the session opens it, as
// franz-go's transactional session wraps its client: at-least-once
// (atleastonce.go) or exactly-once (exactlyonce.go, internal/eos). The row path
// (publisher.go) and the sessions never ask which: the delivery gives the
// ledger a WAL session's rows go into and runs its publishing loop, and
// settles a poll session's batches.

// walDelivery is how a WAL session's rows reach Kafka and what it may
// confirm.
type walDelivery interface {
	// begin binds the delivery to the session's stream (where it starts,
	// where it confirms) and to what its records are produced with, and
	// returns the ledger the publisher's rows go into.
	begin(to confirmer, recordCtx context.Context) ledger
	// publish runs pub over the stream's batches until they end (a stop
	// at a transaction boundary) or something fails.
	publish(ctx context.Context, pub *publisher, batches <-chan *replication.Batch) error
	// End closes the delivery after the session failed (failed, its
	// error), once its records were flushed; an error it returns is the
	// session's instead.
	End(ctx context.Context, failed error) error
	// position is what the session confirmed, how many transactions wait
	// for their acks, and the first record that failed, for its last log
	// line.
	position() (confirmed pglogrepl.LSN, waiting int, failed error)
}

// pollDelivery settles a poll session's batches.
type pollDelivery interface {
	// Settle is called once every record of a batch is acked or failed,
	// before the acked rows are marked published; an error leaves all of
	// the batch unmarked.
	Settle(ctx context.Context, led *flow.PollLedger) error
	// End is walDelivery.End for a poll session.
	End(ctx context.Context, failed error) error
}

// confirmer is where a WAL session confirms (replication.Stream).
type confirmer interface {
	Start() pglogrepl.LSN
	Confirm(pglogrepl.LSN)
	Confirmed() pglogrepl.LSN
}
