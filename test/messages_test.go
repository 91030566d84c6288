package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Events written as logical decoding messages (--message-prefix), not
// rows: several writers, each transaction locking one of ten aggregates
// and emitting one to three messages of it, one in ten rolled back, and a
// stray message of another prefix in each. pgoutbox is killed mid-load and
// started again: every committed event arrives, in its aggregate's commit
// order, none that rolled back, nothing of the other prefix. The kill
// lands while records are in flight: a slot confirmed before Kafka
// acknowledged them would lose them at the restart.
func TestMessagesUnderLoadAcrossKill(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	if _, err := e.Conn.Exec(ctx, `CREATE TABLE agg (id text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO agg (id) SELECT 'agg-' || g FROM generate_series(0, 9) g`); err != nil {
		t.Fatal(err)
	}
	args := []string{"--message-prefix", "orders", "--snapshot-mode", "no_data"}
	p := e.Run(t, args...)
	e.AwaitSlotActive(t, "pgoutbox")

	var (
		mu        sync.Mutex
		committed = map[string]int{}
		wg        sync.WaitGroup
		stop      = make(chan struct{})
	)
	for w := 0; w < 4; w++ {
		conn := e.Connect()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(rng.IntN(3)) * time.Millisecond):
				}
				agg := fmt.Sprintf("agg-%d", rng.IntN(10))
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var version int
				if err := tx.QueryRow(ctx, "UPDATE agg SET version = version + 1 WHERE id = $1 RETURNING version", agg).Scan(&version); err != nil {
					t.Error(err)
					return
				}
				ids := map[string]int{}
				for j := range 1 + rng.IntN(3) {
					id := fmt.Sprintf("w%d-%d-%d", w, n, j)
					ids[id] = version*10 + j
					content := fmt.Sprintf(`{"id": %q, "aggregatetype": "order", "aggregateid": %q, "type": "Placed", "payload": {"seq": %d}}`, id, agg, ids[id])
					if _, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, 'orders', $1)", content); err != nil {
						t.Error(err)
						return
					}
				}
				if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, 'audit', '{"id": "never", "aggregatetype": "order", "aggregateid": "x", "type": "T", "payload": {}}')`); err != nil {
					t.Error(err)
					return
				}
				if rng.IntN(10) == 0 {
					tx.Rollback(ctx)
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for id, seq := range ids {
					committed[id] = seq
				}
				mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(committed) }
	testenv.Eventually(t, 30*time.Second, "events written and published", func() bool {
		return count() > 300 && e.Slot("pgoutbox").ConfirmedLSN > 0
	})
	// The slot never passes what Kafka holds: whatever it confirmed before
	// the kill is in the topic (checked below, with everything).
	p.Signal(t, syscall.SIGKILL)
	time.Sleep(300 * time.Millisecond) // the writers go on while pgoutbox is down
	p2 := e.Run(t, args...)
	testenv.Eventually(t, 30*time.Second, "more events written", func() bool { return count() > 900 })
	close(stop)
	wg.Wait()
	mu.Lock()
	want := make(map[string]int, len(committed))
	for id, seq := range committed {
		want[id] = seq
	}
	mu.Unlock()
	rep := testenv.Check(t, e.Brokers, "outbox.event.order", want)
	t.Log(rep)
	if rep.Lost > 0 {
		t.Errorf("%d committed events lost across the kill", rep.Lost)
	}
	// Stopped cleanly, the slot is confirmed through the last commit:
	// everything was acknowledged.
	if err := p2.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p2.Done()
	if err := p2.Err(); err != nil {
		t.Errorf("pgoutbox exited: %v", err)
	}
	end := e.CurrentLSN()
	if s := e.Slot("pgoutbox"); s.ConfirmedLSN == 0 || s.ConfirmedLSN > end {
		t.Errorf("slot confirmed at %s, WAL at %s", s.ConfirmedLSN, end)
	}
}

// A message that is not a JSON object is poison: dead-lettered, and the
// events after it go on.
func TestMalformedMessageDeadLettered(t *testing.T) {
	e := testenv.New(t)
	ctx := context.Background()
	p := e.Run(t, "--message-prefix", "orders", "--on-poison", "dlq")
	e.AwaitSlotActive(t, "pgoutbox")
	for _, c := range []string{
		`{"id": "m-1", "aggregatetype": "order", "aggregateid": "o-1", "type": "Placed", "payload": {"n": 1}}`,
		`not json`,
		`{"id": "m-2", "aggregatetype": "order", "aggregateid": "o-2", "type": "Placed", "payload": {"n": 2}}`,
	} {
		if _, err := e.Conn.Exec(ctx, "SELECT pg_logical_emit_message(true, 'orders', $1)", c); err != nil {
			t.Fatal(err)
		}
	}
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", []string{"m-1", "m-2"}, 15*time.Second)
	dl := testenv.AwaitDeadLetters(t, e.Brokers, "pgoutbox.dlq", 1, 15*time.Second)
	if len(dl) != 1 || !strings.Contains(dl[0].Reason, "logical decoding message") {
		t.Fatalf("dead letters %+v, want the malformed message's", dl)
	}
	p.Stop(t)
}

// --mode poll is refused: messages are in the WAL only.
func TestMessagesRefusePoll(t *testing.T) {
	e := testenv.New(t)
	code, out := testenv.RunOnce(t, 20*time.Second, nil, e.RunArgs(e.URL, "--message-prefix", "orders", "--mode", "poll")...)
	if code == 0 {
		t.Fatalf("--mode poll with --message-prefix was taken:\n%s", out)
	}
	testenv.ExpectOutput(t, code, code, out, []string{"logical decoding messages are in the WAL only"}, nil)
}
