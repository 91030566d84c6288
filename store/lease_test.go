package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
)

// The lease: one holder at a time, a greater token at every taking, a
// holder of its own taking again at once, another only once it expired.
func TestLeaseTakeAndExpire(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	a, held, err := p.AcquireLease(ctx, conn, "a", time.Hour, AdvisoryLock{})
	if err != nil || a == nil || held != nil || a.Token != 1 {
		t.Fatalf("first taking: %+v, %+v, %v", a, held, err)
	}
	if b, held, err := p.AcquireLease(ctx, conn, "b", time.Hour, AdvisoryLock{}); err != nil || b != nil || held == nil ||
		held.Holder != "a" || held.Token != 1 || held.ExpiresIn < 59*time.Minute {
		t.Fatalf("taking a held lease: %+v, %+v, %v", b, held, err)
	}
	again, _, err := p.AcquireLease(ctx, conn, "a", time.Hour, AdvisoryLock{})
	if err != nil || again == nil || again.Token != 2 {
		t.Fatalf("the holder taking it again: %+v, %v", again, err)
	}
	if err := a.Renew(ctx, conn, time.Hour); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renewing an earlier token: %v, want ErrLeaseLost", err)
	}
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_lease SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	b, _, err := p.AcquireLease(ctx, conn, "b", time.Hour, AdvisoryLock{})
	if err != nil || b == nil || b.Token != 3 {
		t.Fatalf("taking an expired lease: %+v, %v", b, err)
	}
	if err := again.Renew(ctx, conn, time.Hour); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the old holder renewing: %v, want ErrLeaseLost", err)
	}
	if err := again.Release(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if h, err := p.LeaseHolder(ctx, conn); err != nil || h.Holder != "b" || h.ExpiresIn < 59*time.Minute {
		t.Fatalf("an old holder's release freed the lease: %+v, %v", h, err)
	}
	if err := b.Release(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if c, _, err := p.AcquireLease(ctx, conn, "c", time.Hour, AdvisoryLock{}); err != nil || c == nil || c.Token != 4 {
		t.Fatalf("taking a released lease: %+v, %v", c, err)
	}
}

// A holder on a direct connection records the server process that holds
// the pipeline's advisory lock for it: once that process no longer holds
// it and the lease went Quiet without a renewal, a taker that holds it may
// take the lease before it expires; while it does, before Quiet, or
// without the lock, nobody may.
func TestLeaseTakenOverFromAGoneSession(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	lockOn := func(c *pgx.Conn) AdvisoryLock {
		t.Helper()
		var ok bool
		var pid int32
		if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock(7, hashtext('p')), pg_backend_pid()").Scan(&ok, &pid); err != nil || !ok {
			t.Fatalf("advisory lock: %t, %v", ok, err)
		}
		return AdvisoryLock{Class: 7, Name: "p", PID: pid}
	}
	holderConn, err := pgx.Connect(ctx, conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	if l, _, err := p.AcquireLease(ctx, conn, "a", time.Hour, lockOn(holderConn)); err != nil || l == nil {
		t.Fatalf("taking: %+v, %v", l, err)
	}
	if l, _, err := p.AcquireLease(ctx, conn, "b", time.Hour, AdvisoryLock{Class: 7, Name: "p"}); err != nil || l != nil {
		t.Fatalf("taking without the lock while the holder's session lives: %+v, %v", l, err)
	}
	holderConn.Close(ctx) // the holder dies
	taker, err := pgx.Connect(ctx, conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer taker.Close(ctx)
	var lock AdvisoryLock
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ok bool
		var pid int32
		// The server ends the holder's process a moment after its
		// connection closes.
		if err := taker.QueryRow(ctx, "SELECT pg_try_advisory_lock(7, hashtext('p')), pg_backend_pid()").Scan(&ok, &pid); err != nil {
			t.Fatal(err)
		}
		if ok {
			lock = AdvisoryLock{Class: 7, Name: "p", PID: pid}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock was never free")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l, _, err := p.AcquireLease(ctx, conn, "c", time.Hour, AdvisoryLock{Class: 7, Name: "p"}); err != nil || l != nil {
		t.Fatalf("taking without holding the lock: %+v, %v", l, err)
	}
	// A holder that renewed within Quiet is between two of its sessions.
	quiet := lock
	quiet.Quiet = time.Hour
	if l, held, err := p.AcquireLease(ctx, conn, "b", time.Hour, quiet); err != nil || l != nil || held == nil || held.Holder != "a" {
		t.Fatalf("taking from a gone session renewed within Quiet: %+v, %+v, %v", l, held, err)
	}
	quiet.Quiet = 200 * time.Millisecond
	time.Sleep(300 * time.Millisecond)
	if l, _, err := p.AcquireLease(ctx, conn, "b", time.Hour, quiet); err != nil || l == nil || l.Token != 2 {
		t.Fatalf("taking from a gone session not renewed for Quiet while holding the lock: %+v, %v", l, err)
	}
}

// fencedPoller is a database whose outbox holds four rows (seq 1 to 4), the
// lease of pipeline p taken by "a", and a poller fenced by it.
func fencedPoller(t *testing.T) (*pgx.Conn, Pipeline, *Lease, *poll.Poller) {
	t.Helper()
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	if _, err := conn.Exec(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) SELECT 'o', g::text, 'T', '{}' FROM generate_series(1, 4) g`); err != nil {
		t.Fatal(err)
	}
	lease, _, err := p.AcquireLease(ctx, conn, "a", time.Hour, AdvisoryLock{})
	if err != nil {
		t.Fatal(err)
	}
	poller, err := poll.New(ctx, conn, poll.Config{})
	if err != nil {
		t.Fatal(err)
	}
	poller.SetFence(lease)
	return conn, p, lease, poller
}

// What a relay writes under its lease: a mark and a state write commit
// while the token is the lease's, and change nothing once another relay
// took it over.
func TestLeaseFencesMarksAndState(t *testing.T) {
	ctx := context.Background()
	conn, p, old, poller := fencedPoller(t)
	if err := poller.MarkPublished(ctx, []int64{1}); err != nil {
		t.Fatalf("marking under the lease: %v", err)
	}
	setMode := func(q Querier) error { return p.SetMode(ctx, q, "public.outbox", ModePoll, Started(ModePoll)) }
	if err := old.Fenced(ctx, conn, setMode); err != nil {
		t.Fatalf("a state write under the lease: %v", err)
	}
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_lease SET expires_at = now()"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.AcquireLease(ctx, conn, "b", time.Hour, AdvisoryLock{}); err != nil {
		t.Fatal(err)
	}
	if err := poller.MarkPublished(ctx, []int64{2, 3}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("marking after a takeover: %v, want ErrLeaseLost", err)
	}
	if n, err := poller.MarkTransactions(ctx, outbox.Floor{}, 1<<40, nil); !errors.Is(err, ErrLeaseLost) || n != 0 {
		t.Fatalf("marking transactions after a takeover: %d, %v, want ErrLeaseLost", n, err)
	}
	var marked int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE published_at IS NOT NULL").Scan(&marked); err != nil || marked != 1 {
		t.Fatalf("%d rows marked (%v), want only the one marked under the lease", marked, err)
	}
	if err := old.Fenced(ctx, conn, func(q Querier) error {
		t.Error("a state write ran after a takeover")
		return nil
	}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a state write after a takeover: %v, want ErrLeaseLost", err)
	}
}

// A mark that waits for a takeover under way finds the new token when the
// takeover commits, and marks nothing; a takeover waits for a mark under
// way, so what the old holder marked is visible to the new holder's first
// poll.
func TestLeaseMarkAndTakeoverSerialize(t *testing.T) {
	ctx := context.Background()
	conn, p, _, poller := fencedPoller(t)
	other, err := pgx.Connect(ctx, conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)

	// A takeover under way: the mark waits for it, then finds it lost.
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE pgoutbox_lease SET expires_at = now()"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.AcquireLease(ctx, tx, "b", time.Hour, AdvisoryLock{}); err != nil {
		t.Fatal(err)
	}
	marked := make(chan error, 1)
	go func() { marked <- poller.MarkPublished(ctx, []int64{1, 2}) }()
	select {
	case err := <-marked:
		t.Fatalf("the mark did not wait for the takeover: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-marked; !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a mark that waited for a takeover: %v, want ErrLeaseLost", err)
	}

	// A mark under way (its statement's transaction still open): the
	// takeover of an expired lease waits for it.
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_lease SET expires_at = now()"); err != nil {
		t.Fatal(err)
	}
	current, _, err := p.AcquireLease(ctx, conn, "a", time.Hour, AdvisoryLock{})
	if err != nil || current == nil {
		t.Fatalf("taking the lease back: %+v, %v", current, err)
	}
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_lease SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	mark, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	guard, args := current.Guard(1)
	var one int
	if err := mark.QueryRow(ctx, guard, args...).Scan(&one); err != nil {
		t.Fatalf("the guard of an expired lease nobody took over: %v", err)
	}
	if _, err := mark.Exec(ctx, "UPDATE outbox SET published_at = now() WHERE seq = 3"); err != nil {
		t.Fatal(err)
	}
	taken := make(chan error, 1)
	go func() {
		_, _, err := p.AcquireLease(ctx, other, "b", time.Hour, AdvisoryLock{})
		taken <- err
	}()
	select {
	case err := <-taken:
		t.Fatalf("the takeover did not wait for the mark: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := mark.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-taken; err != nil {
		t.Fatal(err)
	}
	if h, err := p.LeaseHolder(ctx, other); err != nil || h.Holder != "b" {
		t.Fatalf("after the mark, the takeover: %+v, %v", h, err)
	}
}

// A relay of a pgoutbox older than the lease holds only the pipeline's
// advisory lock: while it does, nobody takes the lease, and the lock's
// process is named. A lease's own holder that holds the lock but let the
// lease expire (stalled) is taken over all the same.
func TestLeaseRespectsALockHeldWithoutIt(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	p := Pipeline{Name: "p"}
	key := AdvisoryLock{Class: 7, Name: "p"}
	older, err := pgx.Connect(ctx, conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	var olderPID int32
	if err := older.QueryRow(ctx, "SELECT pg_advisory_lock(7, hashtext('p')), pg_backend_pid()").Scan(nil, &olderPID); err != nil {
		t.Fatal(err)
	}
	if l, h, err := p.AcquireLease(ctx, conn, "new", time.Hour, key); err != nil || l != nil || h.LockedBy != olderPID {
		t.Fatalf("taking the lease while an older relay holds the lock: %+v, %+v, %v; want it refused, naming process %d", l, h, err, olderPID)
	}
	older.Close(ctx)
	var l *Lease
	for deadline := time.Now().Add(10 * time.Second); l == nil; {
		if l, _, err = p.AcquireLease(ctx, conn, "new", time.Hour, key); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease was never taken once the older relay was gone")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The holder holds the lock, and its lease expires.
	holder, err := pgx.Connect(ctx, conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	lock := key
	if err := holder.QueryRow(ctx, "SELECT pg_advisory_lock(7, hashtext('p')), pg_backend_pid()").Scan(nil, &lock.PID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_lease SET expires_at = now()"); err != nil {
		t.Fatal(err)
	}
	if l, _, err = p.AcquireLease(ctx, holder, "stalled", time.Hour, lock); err != nil || l == nil {
		t.Fatalf("taking with the lock: %+v, %v", l, err)
	}
	if l, h, err := p.AcquireLease(ctx, conn, "other", time.Hour, key); err != nil || l != nil || h.LockedBy != 0 {
		t.Fatalf("taking a live lease: %+v, %+v, %v", l, h, err)
	}
	if _, err := conn.Exec(ctx, "UPDATE pgoutbox_lease SET expires_at = now()"); err != nil {
		t.Fatal(err)
	}
	if l, _, err := p.AcquireLease(ctx, conn, "other", time.Hour, key); err != nil || l == nil {
		t.Fatalf("taking the lease its stalled holder let expire: %+v, %v", l, err)
	}
}

// A least-privilege role granted the state table before the lease existed
// may hold the lease after the upgrade: migration 013 grants it the lease
// table as well.
func TestLeaseGrantedToRolesOfTheStateTable(t *testing.T) {
	ctx := context.Background()
	conn := migrated(t)
	role := fmt.Sprintf("relay_%d", time.Now().UnixNano())
	for _, sql := range []string{
		"DROP TABLE pgoutbox_lease", "UPDATE pgoutbox_schema_version SET version = 12", // as before migration 013
		"CREATE ROLE " + role + " LOGIN", "GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO " + role,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), "DROP OWNED BY "+role)
		conn.Exec(context.Background(), "DROP ROLE "+role)
	})
	if _, err := migrations.Migrate(ctx, conn, migrations.Options{StateOnly: true}); err != nil {
		t.Fatal(err)
	}
	var may bool
	if err := conn.QueryRow(ctx, "SELECT has_table_privilege($1, 'pgoutbox_lease', 'SELECT, INSERT, UPDATE')", role).Scan(&may); err != nil || !may {
		t.Fatalf("%s may not use the lease table after the upgrade (%v)", role, err)
	}
}
