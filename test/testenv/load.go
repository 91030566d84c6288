package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Load is an application's writers (StartLoad): each transaction locks
// one of twenty accounts (an UPDATE of its row in table account) and
// inserts one to three events of it, type account, payload {"seq": n}; one
// transaction in ten rolls back. It remembers what committed and in which
// order per aggregate, for Check.
type Load struct {
	e         *Env
	mu        sync.Mutex
	committed map[string]int // event id -> its position in its aggregate's commit order
	// rollbacks counts transactions the writers rolled back; check fails
	// on any of their events it finds in the topic.
	rollbacks int
	stop      chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
}

// StartLoad starts writers writers on connections of their own; they
// write until Finish.
func (e *Env) StartLoad(t *testing.T, writers int) *Load {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS account (id text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO account (id) SELECT 'acct-' || g FROM generate_series(0, 19) g ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	l := &Load{e: e, committed: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		conn := e.Connect()
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-l.stop:
					return
				case <-time.After(time.Duration(rng.IntN(4)) * time.Millisecond):
				}
				acct := fmt.Sprintf("acct-%d", rng.IntN(20))
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var version int
				if err := tx.QueryRow(ctx, "UPDATE account SET version = version + 1 WHERE id = $1 RETURNING version", acct).Scan(&version); err != nil {
					t.Error(err)
					return
				}
				n := 1 + rng.IntN(3)
				ids := make([]string, n)
				for j := range ids {
					payload := fmt.Sprintf(`{"seq": %d}`, version*10+j)
					if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('account', $1, 'Posted', $2) RETURNING id::text`,
						acct, payload).Scan(&ids[j]); err != nil {
						t.Error(err)
						return
					}
				}
				if rng.IntN(10) == 0 {
					tx.Rollback(ctx)
					l.mu.Lock()
					l.rollbacks++
					l.mu.Unlock()
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				l.mu.Lock()
				for j, id := range ids {
					l.committed[id] = version*10 + j
				}
				l.mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	// A test that ends early (a failed wait) never calls Finish: the
	// writers stop before their connections close, which cleanups run in
	// the reverse order of, or a writer would use a closing connection.
	t.Cleanup(l.halt)
	return l
}

// halt stops the writers and waits for them.
func (l *Load) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// Count is how many events have committed so far.
func (l *Load) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.committed)
}

// RolledBack is how many transactions the writers have rolled back so far.
func (l *Load) RolledBack() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rollbacks
}

// WriteOne commits one event for a locked aggregate, as the load writers
// do, and records it with them.
func (l *Load) WriteOne(t *testing.T, acct, payload string) (id string, seq int) {
	t.Helper()
	ctx := context.Background()
	tx, err := l.e.Conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var version int
	if err := tx.QueryRow(ctx, "UPDATE account SET version = version + 1 WHERE id = $1 RETURNING version", acct).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('account', $1, 'Posted', $2) RETURNING id::text`,
		acct, payload).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.committed[id] = version * 10
	l.mu.Unlock()
	return id, version * 10
}

// Finish stops the writers, waits for them, and returns what committed:
// event id -> its place in its aggregate's commit order.
func (l *Load) Finish() map[string]int {
	l.halt()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.committed
}

// LoadEvent is what a consumer of a sink other than Kafka (NATS, RabbitMQ,
// Redis) reads of a structured CloudEvent of Load's or InsertBulk's: the
// event id, its aggregate, and its place in the aggregate.
type LoadEvent struct {
	ID           string `json:"id"`
	PartitionKey string `json:"partitionkey"`
	Data         struct {
		Seq int `json:"seq"`
	} `json:"data"`
}

// InsertBulk commits n events of ten aggregates (bulk-0 ... bulk-9) in one
// transaction and returns their ids with their place in their aggregate.
func InsertBulk(t *testing.T, e *Env, n int) map[string]int {
	t.Helper()
	rows, err := e.Conn.Query(context.Background(), `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
SELECT 'account', 'bulk-' || (g % 10), 'Posted', jsonb_build_object('seq', g) FROM generate_series(1, $1) g
RETURNING id::text, (payload->>'seq')::int`, n)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var id string
		var seq int
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		out[id] = seq
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
