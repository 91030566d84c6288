package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/rawconn"
)

// tracker pairs each event's commit time with the time it was consumed.
// Writers register an event's id before its transaction runs, so an event
// consumed before its COMMIT returned to the writer (the relay can be that
// fast) is recognised, and counted with latency 0.
type tracker struct {
	mu          sync.Mutex
	commitAt    map[string]time.Time // zero until COMMIT returned
	seenAt      map[string]time.Time // consumed while the commit was pending
	delivered   map[string]struct{}
	warmup      map[string]struct{}
	warmParts   map[int32]struct{} // the partitions a warm-up event arrived on
	lat         []time.Duration
	committed   int
	early       int
	dups        int
	lastConsume time.Time
	// rank is an event's place in its aggregate's order, where the load
	// gives one (appTx: the aggregate row's version, taken under its
	// lock, then the event's index); last is the highest rank consumed
	// per aggregate, and outOfOrder counts events consumed after a later
	// one of their aggregate.
	rank       map[string]ranked
	last       map[string]int64
	outOfOrder int
}

// ranked is an event's aggregate and its place in the aggregate's order.
type ranked struct {
	agg  string
	rank int64
}

func newTracker() *tracker {
	return &tracker{
		commitAt:  map[string]time.Time{},
		seenAt:    map[string]time.Time{},
		delivered: map[string]struct{}{},
		warmup:    map[string]struct{}{},
		warmParts: map[int32]struct{}{},
		rank:      map[string]ranked{},
		last:      map[string]int64{},
	}
}

// order records the aggregate order of ids, committed in that order by
// the transaction that took version of aggregate agg's row.
func (t *tracker) order(ids []string, agg string, version int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, id := range ids {
		t.rank[id] = ranked{agg: agg, rank: version<<20 | int64(i)}
	}
}

// register is called before the transaction writing ids runs.
func (t *tracker) register(ids []string, warmup bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if warmup {
			t.warmup[id] = struct{}{}
		} else {
			t.commitAt[id] = time.Time{}
		}
	}
}

// committed records when the COMMIT of ids returned.
func (t *tracker) commit(ids []string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if _, ok := t.commitAt[id]; !ok {
			continue
		}
		t.commitAt[id] = at
		t.committed++
		if seen, ok := t.seenAt[id]; ok {
			delete(t.seenAt, id)
			t.lat = append(t.lat, max(0, seen.Sub(at)))
		}
	}
}

// abort forgets ids whose transaction failed.
func (t *tracker) abort(ids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		delete(t.commitAt, id)
	}
}

// consumed records that event id arrived at at, from a reader with no
// partitions (the floor). Ids the tracker did not register are ignored.
func (t *tracker) consumed(id string, at time.Time) { t.consumedFrom(id, 0, at) }

// consumedFrom records that event id arrived at at from partition.
func (t *tracker) consumedFrom(id string, partition int32, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.warmup[id]; ok {
		t.warmParts[partition] = struct{}{}
		return
	}
	c, ok := t.commitAt[id]
	if !ok {
		return
	}
	if _, dup := t.delivered[id]; dup {
		t.dups++
		return
	}
	t.delivered[id] = struct{}{}
	t.lastConsume = at
	if r, ok := t.rank[id]; ok {
		if last, seen := t.last[r.agg]; seen && r.rank < last {
			t.outOfOrder++
		} else {
			t.last[r.agg] = r.rank
		}
	}
	if c.IsZero() {
		t.seenAt[id] = at
		t.early++
		return
	}
	t.lat = append(t.lat, at.Sub(c))
}

type trackerState struct {
	committed, delivered, early, dups, outOfOrder int
	warmParts                                     int // partitions a warm-up event arrived on
	lastConsume                                   time.Time
}

func (t *tracker) state() trackerState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return trackerState{t.committed, len(t.delivered), t.early, t.dups, t.outOfOrder, len(t.warmParts), t.lastConsume}
}

// latencies returns a copy of the latencies measured so far.
func (t *tracker) latencies() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.lat...)
}

// newUUID returns a random (version 4) UUID in its text form.
func newUUID() string {
	var b [16]byte
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := 0; i < 8; i++ {
		b[i] = byte(hi >> (8 * i))
		b[8+i] = byte(lo >> (8 * i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// writer inserts outbox rows on its own connection, one transaction per
// call, every row of a transaction for one aggregate.
type writer struct {
	conn    *pgx.Conn
	sql     string
	lockSQL string // locks an aggregate's row; empty without --aggregates
	aggType string
	payload string
	tr      *tracker
}

// openWriters opens n writers of aggregate type aggType into table.
// aggTable, when not empty, is the quoted aggregates table whose rows
// appTx locks.
func openWriters(ctx context.Context, url string, table outbox.Table, aggTable, aggType string, n, payloadBytes int, tr *tracker) ([]*writer, error) {
	sql := "INSERT INTO " + table.Quoted() + ` (id, aggregatetype, aggregateid, type, payload)
SELECT i::uuid, $2, $3, 'BenchEvent', $4::jsonb FROM unnest($1::text[]) AS i`
	var lockSQL string
	if aggTable != "" {
		lockSQL = "UPDATE " + aggTable + " SET version = version + 1 WHERE id = $1 RETURNING version"
	}
	ws := make([]*writer, 0, n)
	for i := 0; i < n; i++ {
		conn, err := connectWriter(ctx, url)
		if err != nil {
			closeWriters(ws)
			return nil, fmt.Errorf("writer connection: %w", err)
		}
		ws = append(ws, &writer{conn: conn, sql: sql, lockSQL: lockSQL, aggType: aggType, payload: payloadOf(payloadBytes), tr: tr})
	}
	return ws, nil
}

// connectWriter opens a writer's connection. Writers commit one
// transaction after another on the machine the relay is measured on, so
// their sockets skip the scheduler's system-call path (package rawconn).
func connectWriter(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, errors.New("parse database URL: invalid connection string")
	}
	cfg.DialFunc = rawconn.Dial(&net.Dialer{KeepAlive: 5 * time.Minute})
	return pgx.ConnectConfig(ctx, cfg)
}

func closeWriters(ws []*writer) {
	for _, w := range ws {
		w.conn.Close(context.Background())
	}
}

// payloadOf returns a JSON object of n bytes (at least 10).
func payloadOf(n int) string {
	return `{"pad":"` + strings.Repeat("x", max(0, n-10)) + `"}`
}

// tx writes k events for aggregate key in one transaction (a single
// autocommit statement: when Exec returns, COMMIT has returned) and
// returns when it committed.
func (w *writer) tx(ctx context.Context, key string, k int, warmup bool) ([]string, error) {
	ids := newIDs(k)
	w.tr.register(ids, warmup)
	_, err := w.conn.Exec(ctx, w.sql, ids, w.aggType, key, w.payload)
	at := time.Now()
	if err != nil {
		w.tr.abort(ids)
		return nil, err
	}
	if !warmup {
		w.tr.commit(ids, at)
	}
	return ids, nil
}

// appTx is an application's transaction: BEGIN, lock aggregate agg's row
// (UPDATE ... WHERE id = $1, held until COMMIT), insert k events for it,
// COMMIT; each statement a round trip. It returns when COMMIT returned.
func (w *writer) appTx(ctx context.Context, agg, k int) ([]string, error) {
	ids := newIDs(k)
	w.tr.register(ids, false)
	var version int64
	err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, w.lockSQL, agg).Scan(&version); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("aggregate %d: no such row", agg)
			}
			return err
		}
		// The row lock orders the aggregate's transactions, and its
		// version says in which order they commit.
		w.tr.order(ids, aggregateKey(agg), version)
		_, err := tx.Exec(ctx, w.sql, ids, w.aggType, aggregateKey(agg), w.payload)
		return err
	})
	at := time.Now()
	if err != nil {
		w.tr.abort(ids)
		return nil, err
	}
	w.tr.commit(ids, at)
	return ids, nil
}

func aggregateKey(i int) string { return "agg-" + strconv.Itoa(i) }

func newIDs(k int) []string {
	ids := make([]string, k)
	for i := range ids {
		ids[i] = newUUID()
	}
	return ids
}
