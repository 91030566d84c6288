package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Aggregates is how many aggregates the writers spread their events over.
const Aggregates = 20

// WriterConfig is the application load.
type WriterConfig struct {
	// URL reaches whichever server accepts writes (a multi-host URL with
	// target_session_attrs=read-write), directly, not through the links
	// the faults cut.
	URL     string
	Writers int
	// Pace is the mean pause between a writer's transactions.
	Pace time.Duration
	// LargeSize is the number of events of a large transaction; about one
	// transaction in LargeEvery is one.
	LargeSize, LargeEvery int
	// One transaction in PreparedEvery is prepared (two-phase) and
	// committed, or now and then rolled back, by another connection a
	// moment later; one in PoisonEvery carries a poison row (an empty
	// aggregate id) besides its events; one in RollbackEvery rolls back.
	PreparedEvery, PoisonEvery, RollbackEvery int
	Seed                                      uint64
	// Note records what a reader of a failure needs about the prepared
	// transactions' outcomes (nil: nothing).
	Note func(msg, detail string)
}

// Defaults fills unset fields.
func (c *WriterConfig) Defaults() {
	if c.Writers == 0 {
		c.Writers = 3
	}
	if c.Pace == 0 {
		c.Pace = 10 * time.Millisecond
	}
	if c.LargeSize == 0 {
		c.LargeSize = 2000
	}
	if c.LargeEvery == 0 {
		c.LargeEvery = 3000
	}
	if c.PreparedEvery == 0 {
		c.PreparedEvery = 150
	}
	if c.PoisonEvery == 0 {
		c.PoisonEvery = 400
	}
	if c.RollbackEvery == 0 {
		c.RollbackEvery = 10
	}
}

// Writers commit outbox events until stopped: each transaction locks one
// aggregate's row and takes the next numbers from it, so the numbers of
// one aggregate's events are its commit order.
type Writers struct {
	cfg WriterConfig

	mu         sync.Mutex
	committed  []Written
	rolledBack []Written
	uncertain  []Written
	txns       map[string]int // by kind: plain, large, prepared, poison, rollback, uncertain, failed
	errs       int
	lastErr    error
	last       time.Time // the last commit

	stop      chan struct{}
	wg        sync.WaitGroup // writers and prepared-transaction resolvers
	resolvers sync.WaitGroup
}

// Setup creates the aggregates' table.
func SetupWriters(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS account (id text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO account (id) SELECT 'acct-' || g FROM generate_series(0, %d) g ON CONFLICT DO NOTHING`, Aggregates-1))
	return err
}

// StartWriters starts the writers.
func StartWriters(cfg WriterConfig) *Writers {
	cfg.Defaults()
	w := &Writers{cfg: cfg, stop: make(chan struct{}), txns: map[string]int{}}
	for i := 0; i < cfg.Writers; i++ {
		w.wg.Add(1)
		go w.run(i)
	}
	return w
}

// Stop stops the writers and waits until every prepared transaction is
// resolved.
func (w *Writers) Stop() {
	close(w.stop)
	w.wg.Wait()
	w.resolvers.Wait()
}

// CommittedFrom are the events committed so far from the i-th on, and
// the total.
func (w *Writers) CommittedFrom(i int) ([]Written, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i >= len(w.committed) {
		return nil, len(w.committed)
	}
	return append([]Written(nil), w.committed[i:]...), len(w.committed)
}

// LastCommit is when the last transaction committed.
func (w *Writers) LastCommit() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Outcome is what the writers did, once stopped; uncertain commits are
// still to be resolved (Resolve).
func (w *Writers) Outcome() (committed, rolledBack, uncertain []Written) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Written(nil), w.committed...), append([]Written(nil), w.rolledBack...), append([]Written(nil), w.uncertain...)
}

// Transactions are the transactions by kind.
func (w *Writers) Transactions() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.txns))
	for k, v := range w.txns {
		out[k] = v
	}
	return out
}

func (w *Writers) run(i int) {
	defer w.wg.Done()
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)+1))
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for n := 0; ; n++ {
		pause := time.Duration(rng.Int64N(int64(2*w.cfg.Pace) + 1))
		select {
		case <-w.stop:
			return
		case <-time.After(pause):
		}
		if conn == nil || conn.IsClosed() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			c, err := pgx.Connect(ctx, w.cfg.URL)
			cancel()
			if err != nil {
				w.failed(err)
				select {
				case <-w.stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			conn = c
		}
		t := w.cfg.plan(rng, i, n)
		if err := w.commit(conn, t); err != nil {
			w.failed(err)
			conn.Close(context.Background())
			conn = nil
		}
	}
}

// txn is one transaction a writer makes.
type txn struct {
	kind      string // plain, large, prepared, rollback
	aggregate string
	events    int
	poison    bool
	gid       string // prepared transactions
	commit    bool   // prepared: committed (else rolled back) by the resolver
	hold      time.Duration
}

func (t txn) String() string {
	s := fmt.Sprintf("%s of %d on %s", t.kind, t.events, t.aggregate)
	if t.gid != "" {
		s += " gid " + t.gid
	}
	return s
}

// plan draws the n-th transaction of a writer from its rng.
func (c *WriterConfig) plan(rng *rand.Rand, writer, n int) txn {
	t := txn{kind: "plain", aggregate: fmt.Sprintf("acct-%d", rng.IntN(Aggregates)), events: 1 + rng.IntN(3)}
	switch {
	case rng.IntN(c.LargeEvery) == 0:
		t.kind, t.events = "large", c.LargeSize
	case rng.IntN(c.PreparedEvery) == 0:
		t.kind, t.gid = "prepared", fmt.Sprintf("nemesis-%d-%d-%d", c.Seed, writer, n)
		t.commit = rng.IntN(8) != 0
		t.hold = time.Duration(100+rng.IntN(1900)) * time.Millisecond
	case rng.IntN(c.RollbackEvery) == 0:
		t.kind = "rollback"
	}
	t.poison = rng.IntN(c.PoisonEvery) == 0
	return t
}

func (w *Writers) failed(err error) {
	w.mu.Lock()
	w.errs++
	w.lastErr = err
	w.mu.Unlock()
}

// commit runs one transaction. An error means the connection is suspect
// and is replaced.
func (w *Writers) commit(conn *pgx.Conn, t txn) error {
	timeout := 10 * time.Second
	if t.kind == "large" {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	evs, err := insert(ctx, conn, t)
	if err != nil {
		return err
	}
	switch t.kind {
	case "rollback":
		_, err := conn.Exec(ctx, "ROLLBACK")
		w.rolled("rollback", evs)
		return err
	case "prepared":
		if _, err := conn.Exec(ctx, "PREPARE TRANSACTION '"+t.gid+"'"); err != nil {
			// Prepared or not: the resolver finds out.
			w.note("PREPARE failed", fmt.Sprintf("%s: %v", t, err))
			w.resolve(t, evs)
			return err
		}
		w.resolve(t, evs)
		return nil
	}
	_, err = conn.Exec(ctx, "COMMIT")
	at := time.Now()
	if err != nil {
		w.mu.Lock()
		for _, e := range evs {
			e.Committed = at
			w.uncertain = append(w.uncertain, e)
		}
		w.txns["uncertain"]++
		w.mu.Unlock()
		return err
	}
	lsn := currentLSN(ctx, conn)
	w.done(t.kind, evs, at, lsn, t.poison)
	return nil
}

// done records a committed transaction.
func (w *Writers) done(kind string, evs []Written, at time.Time, lsn uint64, poison bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range evs {
		e.Committed, e.LSN = at, lsn
		w.committed = append(w.committed, e)
	}
	w.last = at
	w.txns[kind]++
	if poison {
		w.txns["poison"]++
	}
}

// currentLSN is the WAL insert position, at or past the end of the commit
// the connection just made; the largest LSN when it cannot be read (the
// event then never counts as confirmed by the slot).
func currentLSN(ctx context.Context, conn *pgx.Conn) uint64 {
	var s string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return ^uint64(0)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return ^uint64(0)
	}
	return uint64(lsn)
}

// insert takes the aggregate's next numbers and inserts the events (and
// the poison row) in the open transaction.
func insert(ctx context.Context, conn *pgx.Conn, t txn) ([]Written, error) {
	var n int64
	if err := conn.QueryRow(ctx, "UPDATE account SET n = n + $2 WHERE id = $1 RETURNING n", t.aggregate, t.events).Scan(&n); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'account', $1::text, 'Posted', jsonb_build_object('agg', $1::text, 'seq', g)
FROM generate_series($2::bigint, $3::bigint) g ORDER BY g
RETURNING id::text, (payload->>'seq')::bigint, txid::text`, t.aggregate, n-int64(t.events)+1, n)
	if err != nil {
		return nil, err
	}
	evs := make([]Written, 0, t.events+1)
	for rows.Next() {
		e := Written{Aggregate: t.aggregate, Txn: t.String()}
		var xid string
		if err := rows.Scan(&e.ID, &e.Seq, &xid); err != nil {
			rows.Close()
			return nil, err
		}
		e.XID, _ = strconv.ParseUint(xid, 10, 64)
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(evs) != t.events {
		return nil, fmt.Errorf("nemesis: inserted %d events, want %d", len(evs), t.events)
	}
	if t.poison {
		e := Written{Poison: true, XID: evs[0].XID, Txn: t.String()}
		if err := conn.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
VALUES ('account', '', 'Poison', '{"poison": true}') RETURNING id::text`).Scan(&e.ID); err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// resolve commits or rolls back a prepared transaction after its hold,
// from a connection of its own, retrying through faults until the server
// answers.
func (w *Writers) resolve(t txn, evs []Written) {
	w.resolvers.Add(1)
	go func() {
		defer w.resolvers.Done()
		time.Sleep(t.hold)
		verb := "ROLLBACK PREPARED"
		if t.commit {
			verb = "COMMIT PREPARED"
		}
		// sent: a COMMIT PREPARED went out whose answer was lost (the
		// server restarted): it may have committed.
		sent := false
		for attempt := 0; ; attempt++ {
			ok, prepared, lsn, err := w.finish(verb, t.gid)
			switch {
			case err == nil && ok:
				if t.commit {
					w.done("prepared", evs, time.Now(), lsn, t.poison)
				} else {
					w.rolled("prepared-rollback", evs)
				}
				return
			case err == nil && !prepared && sent && t.commit:
				w.note("commit prepared outcome unknown", fmt.Sprintf("%s: gone from pg_prepared_xacts after a COMMIT PREPARED whose answer was lost; the table tells", t))
				w.mu.Lock()
				w.uncertain = append(w.uncertain, evs...)
				w.txns["uncertain"]++
				w.mu.Unlock()
				return
			case err == nil && !prepared:
				// It never was (PREPARE failed with its connection), or a
				// ROLLBACK PREPARED whose answer was lost went through.
				w.note("not prepared", fmt.Sprintf("%s: not in pg_prepared_xacts; counted as rolled back", t))
				w.rolled("prepare-failed", evs)
				return
			case prepared:
				sent = true
			}
			w.failed(err)
			if attempt > 600 {
				// Left to Resolve: the table says whether it committed.
				w.mu.Lock()
				w.uncertain = append(w.uncertain, evs...)
				w.mu.Unlock()
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

func (w *Writers) note(msg, detail string) {
	if w.cfg.Note != nil {
		w.cfg.Note(msg, detail)
	}
}

func (w *Writers) rolled(kind string, evs []Written) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range evs {
		e.Txn = kind + " " + e.Txn
		w.rolledBack = append(w.rolledBack, e)
	}
	w.txns[kind]++
}

// finish ends the prepared transaction gid with verb if it is prepared.
func (w *Writers) finish(verb, gid string) (done, prepared bool, lsn uint64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, w.cfg.URL)
	if err != nil {
		return false, false, 0, err
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_prepared_xacts WHERE gid = $1)", gid).Scan(&prepared); err != nil {
		return false, false, 0, err
	}
	if !prepared {
		return false, false, 0, nil
	}
	if _, err := conn.Exec(ctx, verb+" '"+gid+"'"); err != nil {
		return false, true, 0, err
	}
	return true, true, currentLSN(ctx, conn), nil
}

// Resolve sorts the commits whose outcome the writers could not know by
// what the table holds now: present, they committed; absent, they did not
// (or committed on a primary lost in a failover before its standby had
// them).
func Resolve(ctx context.Context, conn *pgx.Conn, uncertain []Written) (committed []Written, vanished []string, err error) {
	if len(uncertain) == 0 {
		return nil, nil, nil
	}
	ids := make([]string, len(uncertain))
	for i, e := range uncertain {
		ids[i] = e.ID
	}
	rows, err := conn.Query(ctx, "SELECT id::text FROM outbox WHERE id = ANY($1::uuid[])", ids)
	if err != nil {
		return nil, nil, err
	}
	present, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, err
	}
	have := setOf(present)
	for _, e := range uncertain {
		if have[e.ID] {
			e.LSN = ^uint64(0) // its commit position is unknown
			committed = append(committed, e)
		} else {
			vanished = append(vanished, e.ID)
		}
	}
	return committed, vanished, nil
}

// errorsSeen is the number of errors the writers met and the last one.
func (w *Writers) errorsSeen() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs, w.lastErr
}
