package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
)

// LeaseTable holds each pipeline's lease (migration 013).
const LeaseTable = "pgoutbox_lease"

// ErrLeaseLost means another relay took the pipeline's lease over: this
// one may publish and write nothing more for the pipeline. A mark the
// lease's Guard refused is the same error.
var ErrLeaseLost = outbox.ErrFenced

// Lease is a pipeline's lease as its holder has it. While the token is the
// lease's, the holder is the one relay that publishes for the pipeline; a
// new holder gets a greater token, and every write that must not come
// from a relay that lost the lease checks it (Guard, Fenced).
type Lease struct {
	Pipeline string
	Holder   string
	Token    int64
}

// LeaseHolder is a lease another relay holds.
type LeaseHolder struct {
	Holder string
	Token  int64
	// ExpiresIn is how long until it may be taken over (negative: it
	// has expired since).
	ExpiresIn time.Duration
	// LockedBy, when not 0, is a server process that holds the
	// pipeline's advisory lock without the lease: a relay of a pgoutbox
	// older than the lease, or a lock such a relay left on a pooler's
	// server connection.
	LockedBy int32
}

// AdvisoryLock is the pipeline's session-level advisory lock,
// pg_try_advisory_lock(Class, hashtext(Name)), on a connection straight to
// the server. PID, when not 0, is the server process that holds it for the
// relay taking the lease: the lease records it, and a later taker that
// holds the lock itself sees whether that process still does. Through a
// pooler no lock is taken (PID 0): a session there is not the relay's.
type AdvisoryLock struct {
	Class int32
	Name  string
	PID   int32
	// Quiet is how long the lease must have gone without a renewal
	// before a holder whose lock is gone counts as gone. A relay closes
	// a session's connection, and the lock with it, before its next
	// session takes both again: a holder that renewed within Quiet is
	// taken to be between two sessions, and keeps the lease until it
	// expires.
	Quiet time.Duration
}

// AcquireLease takes the pipeline's lease for holder, for ttl, when no
// relay holds it, when it has expired, when holder itself held it (a new
// session of the same relay), or when its holder's session is gone: it held
// the pipeline's advisory lock and no longer does, while the taker does,
// and it has not renewed the lease for lock.Quiet. Each acquisition draws a
// new token. A lease another relay holds is returned as such, with a nil
// Lease.
//
// Whoever holds the pipeline's advisory lock without holding the lease (a
// relay of a pgoutbox older than the lease, which knows only the lock)
// holds the pipeline too: nobody takes the lease meanwhile, and
// LeaseHolder.LockedBy names the process.
func (p Pipeline) AcquireLease(ctx context.Context, q Querier, holder string, ttl time.Duration, lock AdvisoryLock) (*Lease, *LeaseHolder, error) {
	var pid *int32
	if lock.PID != 0 {
		pid = &lock.PID
	}
	var token int64
	err := q.QueryRow(ctx, `WITH lock AS (`+lockHolders(5, 6)+`)
INSERT INTO pgoutbox_lease AS l (pipeline, holder, token, expires_at, lock_pid)
SELECT $1, $2, 1, now() + $3::float8 * interval '1 millisecond', $4::int
WHERE NOT EXISTS (SELECT 1 FROM lock WHERE pid IS DISTINCT FROM $4::int
  AND pid IS DISTINCT FROM (SELECT lock_pid FROM pgoutbox_lease WHERE pipeline = $1))
ON CONFLICT (pipeline) DO UPDATE SET holder = EXCLUDED.holder, token = l.token + 1,
  expires_at = EXCLUDED.expires_at, lock_pid = EXCLUDED.lock_pid, acquired_at = now(), renewed_at = now()
WHERE (l.expires_at <= now() OR l.holder = EXCLUDED.holder
    OR ($4::int IS NOT NULL AND l.lock_pid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM lock WHERE pid = l.lock_pid)
      AND l.renewed_at <= now() - $7::float8 * interval '1 millisecond'))
  AND NOT EXISTS (SELECT 1 FROM lock WHERE pid IS DISTINCT FROM $4::int AND pid IS DISTINCT FROM l.lock_pid)
RETURNING token`, p.Name, holder, ttl.Milliseconds(), pid, int64(lock.Class), lock.Name, lock.Quiet.Milliseconds()).Scan(&token)
	switch {
	case err == nil:
		return &Lease{Pipeline: p.Name, Holder: holder, Token: token}, nil, nil
	case !errors.Is(err, pgx.ErrNoRows):
		if IsMissing(err) {
			return nil, nil, fmt.Errorf("%w: the lease table is missing; run pgoutbox migrate", ErrNoState)
		}
		if isInsufficientPrivilege(err) {
			return nil, nil, fmt.Errorf("take the pipeline's lease: %w; GRANT SELECT, INSERT, UPDATE ON %s to the relay's role", err, LeaseTable)
		}
		return nil, nil, fmt.Errorf("take the pipeline's lease: %w", err)
	}
	h, err := p.LeaseHolder(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	if h == nil {
		h = &LeaseHolder{}
	}
	// Why not: the lease, or the lock held outside of it.
	var locked *int32
	if err := q.QueryRow(ctx, `WITH lock AS (`+lockHolders(3, 4)+`)
SELECT min(pid) FROM lock WHERE pid IS DISTINCT FROM $2::int
  AND pid IS DISTINCT FROM (SELECT lock_pid FROM pgoutbox_lease WHERE pipeline = $1)`,
		p.Name, pid, int64(lock.Class), lock.Name).Scan(&locked); err != nil {
		return nil, nil, fmt.Errorf("read the pipeline's lock: %w", err)
	}
	if locked != nil {
		h.LockedBy = *locked
	}
	return nil, h, nil
}

// lockHolders is a query of the server processes that hold the pipeline's
// advisory lock in this database, pg_try_advisory_lock($class,
// hashtext($name)), its arguments numbered class and name.
func lockHolders(class, name int) string {
	return fmt.Sprintf(`SELECT k.pid FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted
  AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND k.classid::bigint = $%d AND k.objid::bigint = (hashtext($%d)::bigint & 4294967295) AND k.objsubid = 2`, class, name)
}

// LeaseHolder reads who holds the pipeline's lease; nil when none ever did.
func (p Pipeline) LeaseHolder(ctx context.Context, q Querier) (*LeaseHolder, error) {
	var (
		h  LeaseHolder
		ms float64
	)
	err := q.QueryRow(ctx, `SELECT holder, token, extract(epoch FROM expires_at - now()) * 1000 FROM pgoutbox_lease WHERE pipeline = $1`,
		p.Name).Scan(&h.Holder, &h.Token, &ms)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the pipeline's lease: %w", err)
	}
	h.ExpiresIn = time.Duration(ms * float64(time.Millisecond))
	return &h, nil
}

// Renew extends the lease to ttl from now, if it is still the holder's:
// ErrLeaseLost when another relay took it over.
func (l *Lease) Renew(ctx context.Context, q Querier, ttl time.Duration) error {
	tag, err := q.Exec(ctx, `UPDATE pgoutbox_lease SET expires_at = now() + $3::float8 * interval '1 millisecond', renewed_at = now()
WHERE pipeline = $1 AND token = $2`, l.Pipeline, l.Token, ttl.Milliseconds())
	if err != nil {
		return fmt.Errorf("renew the pipeline's lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// Release lets another relay take the lease at once, if it is still the
// holder's.
func (l *Lease) Release(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, `UPDATE pgoutbox_lease SET expires_at = now(), lock_pid = NULL WHERE pipeline = $1 AND token = $2`,
		l.Pipeline, l.Token); err != nil {
		return fmt.Errorf("release the pipeline's lease: %w", err)
	}
	return nil
}

// Guard is a query that yields a row while the lease is the holder's,
// with its arguments numbered from $n. It locks the lease's row for as
// long as the statement's transaction lasts, so a takeover waits for it,
// and a statement that waited for a takeover finds the new token and no
// row: whatever a guarded statement writes, it writes under the lease.
func (l *Lease) Guard(n int) (string, []any) {
	return fmt.Sprintf("SELECT 1 FROM pgoutbox_lease WHERE pipeline = $%d AND token = $%d FOR SHARE", n, n+1),
		[]any{l.Pipeline, l.Token}
}

// Fenced runs fn in a transaction that holds the lease's row as Guard
// does: fn's writes commit only under the lease. ErrLeaseLost when another
// relay took it over.
func (l *Lease) Fenced(ctx context.Context, conn *pgx.Conn, fn func(Querier) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	guard, args := l.Guard(1)
	var one int
	switch err := tx.QueryRow(ctx, guard, args...).Scan(&one); {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrLeaseLost
	case err != nil:
		return fmt.Errorf("check the pipeline's lease: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
