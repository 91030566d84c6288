package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/store"
)

// One relay publishes for a pipeline at a time: the one that holds the
// pipeline's lease, a row in pgoutbox_lease (store.Lease). A session takes
// it before it reads anything, renews it every Lease.Renew, and gives it up
// when the relay stops; a relay that finds it held waits, tries again
// every Lease.Renew and as soon as it expires, and takes it over then. Each
// taking draws a greater fencing token, and what a relay writes that
// another relay's work depends on carries it: the statement that marks
// polled rows published (poll.Poller's fence), and the pipeline's
// mode, floor, confirmed position and handoff (fenced). A relay whose
// lease was taken over therefore marks and saves nothing; it learns so at
// its next renewal or mark, and its session ends. It also publishes
// nothing new once its last renewal is older than Lease.TTL less
// Lease.Renew, so it stops before another relay may take over, which the
// database's clock decides from when that renewal arrived.
//
// On a connection straight to the server the session also takes the
// pipeline's advisory lock, as before the lease; the lease records the
// server process that holds it. The lock only shortens a takeover: once
// that process no longer holds it (the holder's connection is gone: a
// kill -9, a crash) and the lease has gone two renewal intervals without a
// renewal, a relay holding the lock itself takes the lease then instead of
// waiting for it to expire. A holder that renewed more recently is between
// two of its sessions (a session closes its connection before the next one
// takes the lock again), and keeps the pipeline. Through a pooler no lock
// is taken: a session there is not the relay's own (a transaction pooler
// hands the server connection, and the lock with it, to other clients), and
// the lease alone decides. A process that holds the lock without the lease
// (a relay of a pgoutbox from before the lease) keeps everyone from taking
// it.

// Lease defaults: a takeover after a holder died without giving the lease
// up takes Lease.TTL at most, plus one Lease.Renew.
const (
	DefaultLeaseTTL   = 5 * time.Second
	DefaultLeaseRenew = time.Second
)

// lockKey namespaces pgoutbox's advisory locks.
const lockKey = 0x706f7574 // "pout"

// errLocked: another relay holds the pipeline; this one waits.
var errLocked = errors.New("pipeline is held by another relay")

// errLeaseLapsed ends a session that could not renew its lease in time:
// another relay may take it over, so nothing more is published under it.
var errLeaseLapsed = errors.New("the pipeline's lease was not renewed in time (a renewal took longer than --lease-ttl less --lease-renew)")

// leaseKeeper is the lease a session holds: a WAL session's, or a poll
// group's for every table of the pipeline.
type leaseKeeper struct {
	lease      *store.Lease // set once
	ttl, every time.Duration
	// timeout bounds a renewal, as the session's own statements are.
	timeout time.Duration

	mu      sync.Mutex
	renewed time.Time // when the last renewal that succeeded (or the taking) was sent
	lost    bool
}

// token is the lease's fencing token.
func (k *leaseKeeper) token() int64 { return k.lease.Token }

// Guard is the lease's (poll.Fence).
func (k *leaseKeeper) Guard(n int) (string, []any) { return k.lease.Guard(n) }

// keep renews the lease on conn when a renewal is due. An error ends the
// session: store.ErrLeaseLost when another relay took the pipeline over,
// any other the connection's.
func (k *leaseKeeper) keep(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost {
		return store.ErrLeaseLost
	}
	if time.Since(k.renewed) < k.every {
		return nil
	}
	sent := time.Now()
	if err := k.lease.Renew(ctx, conn, k.ttl); err != nil {
		k.lost = errors.Is(err, store.ErrLeaseLost)
		return err
	}
	k.renewed = sent
	return nil
}

// held tells whether the relay may publish: the lease is surely still
// this relay's, its last renewal sent less than ttl less one renewal
// interval ago. Another relay takes it over only once ttl has passed since
// that renewal reached the server; the margin covers clocks that run at
// slightly different rates and the time records take to reach Kafka.
func (k *leaseKeeper) held() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.lost && time.Since(k.renewed) < k.ttl-k.every
}

// fenced runs fn, which writes the pipeline's state, under the lease: in a
// transaction that commits only while the lease is still this relay's.
func (k *leaseKeeper) fenced(ctx context.Context, conn *pgx.Conn, fn func(store.Querier) error) error {
	return k.lease.Fenced(ctx, conn, fn)
}

// takeLease takes the pipeline's lease on conn for holder, and on a direct
// connection its advisory lock first, or returns errLocked saying who
// holds it. timeout bounds it: a holder stalled inside a transaction that
// guards the lease's row holds a takeover back until it goes on or goes
// away.
func takeLease(ctx context.Context, conn *pgx.Conn, cfg Config, holder string, pooled bool) (*leaseKeeper, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.queryTimeout())
	defer cancel()
	slot := cfg.Replication.Slot
	// A holder renews every Lease.Renew; one that renewed within two of
	// them and whose lock is gone is between two of its sessions.
	lock := store.AdvisoryLock{Class: lockKey, Name: slot, Quiet: 2 * cfg.Lease.Renew}
	if !pooled {
		var ok bool
		var pid int32
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext($2)), pg_backend_pid()", lockKey, slot).Scan(&ok, &pid); err != nil {
			return nil, fmt.Errorf("pipeline lock: %w", err)
		}
		if ok {
			lock.PID = pid
		}
		// Without the lock, another session holds it: the lease's holder
		// (whose lease still decides, once it has expired), or a relay
		// from before the lease, which keeps the lease from anyone.
	}
	sent := time.Now()
	lease, other, err := store.Pipeline{Name: slot}.AcquireLease(ctx, conn, holder, cfg.Lease.TTL, lock)
	if err != nil {
		return nil, err
	}
	if lease == nil {
		return nil, &heldError{holder: *other}
	}
	return &leaseKeeper{lease: lease, ttl: cfg.Lease.TTL, every: cfg.Lease.Renew, timeout: cfg.queryTimeout(), renewed: sent}, nil
}

// release lets another relay take the pipeline over at once, when this one
// stops; a lease already lost is left alone.
func (k *leaseKeeper) release(cfg Config, log *slog.Logger) {
	k.mu.Lock()
	lost := k.lost
	k.mu.Unlock()
	if lost {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := cfg.Replication.Connect(ctx)
	if err != nil {
		log.Warn("could not give up the pipeline's lease; another relay takes over once it expires", "in", cfg.Lease.TTL)
		return
	}
	defer conn.Close(context.Background())
	if err := k.lease.Release(ctx, conn); err != nil {
		log.Warn("could not give up the pipeline's lease; another relay takes over once it expires", "in", cfg.Lease.TTL, "err", err)
	}
}

// heldError is errLocked with the lease's holder, and when to try again:
// when it expires, unless its holder renews it first.
type heldError struct{ holder store.LeaseHolder }

func (e *heldError) Error() string {
	if e.holder.LockedBy != 0 {
		return fmt.Sprintf("%s: server process %d holds the pipeline's advisory lock without its lease: a relay of a pgoutbox older than the lease runs this pipeline "+
			"(stop it, or let it finish), or left its lock on a connection pooler's server connection", errLocked, e.holder.LockedBy)
	}
	return fmt.Sprintf("%s: %s holds its lease (token %d), for %s more", errLocked, e.holder.Holder, e.holder.Token,
		max(0, e.holder.ExpiresIn).Round(time.Millisecond))
}

func (e *heldError) Is(target error) bool { return target == errLocked }

// retryIn is how long a relay waits before it tries to take the lease
// again: until it expires, and no longer than every, at which its holder
// renews it.
func retryIn(err error, every time.Duration) time.Duration {
	var h *heldError
	if errors.As(err, &h) && h.holder.LockedBy == 0 {
		return min(every, max(h.holder.ExpiresIn+10*time.Millisecond, 100*time.Millisecond))
	}
	return every
}

// leaseHolder names this relay in the lease: host, process and a random
// part, so that two relays started in one process differ too.
func leaseHolder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s/%d/%04x", host, os.Getpid(), rand.N(1<<16))
}
