package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Events written as logical decoding messages (--message-prefix) under
// --delivery exactly-once, on Apache Kafka, the relay killed with SIGKILL
// under load and started again several times. Three writers each commit
// transactions that lock one of ten aggregates and write one to three
// events of it, each a transactional message or a row of the outbox table
// (mixed in one transaction), plus a message of a prefix not read; one in
// ten rolls back. A fourth writes non-transactional messages of three
// aggregates of its own: alone (autocommit), or inside a transaction that
// inserts a row of the same aggregate and commits (one in ten rolls back:
// its message is published all the same, its row never). Its commit
// record then usually follows the message's WAL record directly, at the
// LSN the message's position ends at. A read_committed consumer must see
// every committed event exactly once, each aggregate's in commit order,
// and nothing rolled back. The same run under at-least-once counts
// duplicates, which shows the kills land with events in flight.
//
// A transaction whose commit record directly followed a non-transactional
// message was skipped, its events lost, when the Kafka transaction before
// it ended with that message (1 and 6 events lost in two runs of about
// 45,000): the message's position was the end of its WAL record, the LSN
// that commit record starts at.
func TestMessagesExactlyOnceAcrossKill(t *testing.T) {
	t.Run("at-least-once", func(t *testing.T) {
		rep := messagesKilledUnderLoad(t, "--mode", "wal")
		if rep.Lost != 0 || rep.OrderViolations != 0 {
			t.Fatalf("lost %d, order violations %d", rep.Lost, rep.OrderViolations)
		}
		if rep.Duplicates == 0 {
			t.Fatalf("no duplicate under at-least-once: the kills do not land with events in flight, so the run cannot tell exactly-once from at-least-once")
		}
	})
	t.Run("exactly-once", func(t *testing.T) {
		rep := messagesKilledUnderLoad(t, eosArgs...)
		if rep.Lost != 0 || rep.Duplicates != 0 || rep.OrderViolations != 0 {
			t.Fatalf("lost %d, duplicates %d, order violations %d", rep.Lost, rep.Duplicates, rep.OrderViolations)
		}
	})
}

// messagesKilledUnderLoad runs TestMessagesExactlyOnceAcrossKill's load and
// kills with the relay's flags delivery, and reports what a read_committed
// consumer finds.
func messagesKilledUnderLoad(t *testing.T, delivery ...string) testenv.Report {
	e := testenv.NewKafka(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE agg (id text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO agg (id) SELECT 'agg-' || g FROM generate_series(0, 9) g`)
	// The slot exists before anything is written: every event is in its
	// stream, whichever relay is running.
	e.Setup(e.Config())
	args := append(slices.Clone(delivery), "--message-prefix", "orders", "--snapshot-mode", "no_data")

	var (
		mu         sync.Mutex
		committed  = map[string]int{} // event id -> its place in its aggregate's order
		kinds      = map[string]string{}
		rolledBack int
		wg         sync.WaitGroup
		stop       = make(chan struct{})
		stopOnce   sync.Once
		halt       = func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
		stopped    = func() bool {
			select {
			case <-stop:
				return true
			default:
				return false
			}
		}
		record = func(ids map[string]int, kind map[string]string) {
			mu.Lock()
			defer mu.Unlock()
			for id, seq := range ids {
				committed[id], kinds[id] = seq, kind[id]
			}
		}
	)
	message := func(id, agg string, seq int) string {
		return fmt.Sprintf(`{"id": %q, "aggregatetype": "order", "aggregateid": %q, "type": "Placed", "payload": {"seq": %d}}`, id, agg, seq)
	}
	insertRow := `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', $1, 'Placed', $2) RETURNING id::text`

	// The transactional writers.
	for w := 0; w < 3; w++ {
		conn := e.Connect()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for n := 0; !stopped(); n++ {
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
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
				ids, kind := map[string]int{}, map[string]string{}
				for j := range 1 + rng.IntN(3) {
					seq := version*10 + j
					if rng.IntN(3) == 0 {
						var id string
						if err := tx.QueryRow(ctx, insertRow, agg, fmt.Sprintf(`{"seq": %d}`, seq)).Scan(&id); err != nil {
							t.Error(err)
							return
						}
						ids[id], kind[id] = seq, "row"
						continue
					}
					id := fmt.Sprintf("w%d-%d-%d", w, n, j)
					if _, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, 'orders', $1)", message(id, agg, seq)); err != nil {
						t.Error(err)
						return
					}
					ids[id], kind[id] = seq, "transactional message"
				}
				if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, 'audit', $1)`, message("never", "x", 0)); err != nil {
					t.Error(err)
					return
				}
				if rng.IntN(10) == 0 {
					tx.Rollback(ctx)
					mu.Lock()
					rolledBack++
					mu.Unlock()
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				record(ids, kind)
			}
		}()
	}

	// The non-transactional writer: its aggregates are its own, each
	// event's place the order it wrote them in. A message inside a
	// transaction is published when the WAL has it, before the
	// transaction's row, which is published at the commit.
	{
		conn := e.Connect()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(99, uint64(time.Now().UnixNano())))
			seqs := map[string]int{}
			for n := 0; !stopped(); n++ {
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				agg := fmt.Sprintf("nt-%d", rng.IntN(3))
				id := fmt.Sprintf("nt-%d", n)
				seqs[agg]++
				msgSeq := seqs[agg]
				if n%2 == 0 {
					if _, err := conn.Exec(ctx, "SELECT pg_logical_emit_message(false, 'orders', $1)", message(id, agg, msgSeq)); err != nil {
						t.Error(err)
						return
					}
					record(map[string]int{id: msgSeq}, map[string]string{id: "non-transactional message"})
					continue
				}
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				seqs[agg]++
				rowSeq := seqs[agg]
				var rowID string
				if err := tx.QueryRow(ctx, insertRow, agg, fmt.Sprintf(`{"seq": %d}`, rowSeq)).Scan(&rowID); err != nil {
					t.Error(err)
					return
				}
				if _, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(false, 'orders', $1)", message(id, agg, msgSeq)); err != nil {
					t.Error(err)
					return
				}
				if rng.IntN(10) == 0 {
					if err := tx.Rollback(ctx); err != nil {
						t.Error(err)
						return
					}
					record(map[string]int{id: msgSeq}, map[string]string{id: "non-transactional message"})
					mu.Lock()
					rolledBack++
					mu.Unlock()
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
				record(map[string]int{id: msgSeq, rowID: rowSeq}, map[string]string{id: "non-transactional message", rowID: "row of a transaction with a non-transactional message"})
			}
		}()
	}
	t.Cleanup(halt)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(committed) }

	kills := testenv.Chaos(4, 20)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i := 0; i < kills; i++ {
		p := e.Run(t, args...)
		// Killed while it publishes: once its session streams, within the
		// status interval that confirms what it sent.
		testenv.Eventually(t, 30*time.Second, "the relay's session", func() bool {
			return strings.Contains(p.Out.String(), `"msg":"streaming"`)
		})
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		p.Signal(t, syscall.SIGKILL)
		<-p.Done()
	}
	p := e.Run(t, args...)
	before := count()
	testenv.Eventually(t, 60*time.Second, "more events written after the last start", func() bool { return count() > before+500 })
	halt()
	mu.Lock()
	want := make(map[string]int, len(committed))
	byKind := map[string]int{}
	for id, seq := range committed {
		want[id] = seq
		byKind[kinds[id]]++
	}
	rb := rolledBack
	mu.Unlock()
	rep := testenv.Check(t, e.Brokers, "outbox.event.order", want)
	t.Logf("%s, messages, %d kills: %v", strings.Join(delivery, " "), kills, rep)
	t.Logf("committed by kind: %v; transactions rolled back: %d", byKind, rb)
	if rep.Lost > 0 {
		// Which were lost, by kind, and the first few of them.
		seen := map[string]bool{}
		for _, rec := range readAll(t, e.Brokers, "outbox.event.order") {
			seen[testenv.DecodeEvent(t, rec).ID] = true
		}
		lost, examples := map[string]int{}, []string{}
		for id := range want {
			if !seen[id] {
				lost[kinds[id]]++
				examples = append(examples, fmt.Sprintf("%s (%s, seq %d)", id, kinds[id], want[id]))
			}
		}
		slices.Sort(examples)
		t.Logf("lost by kind: %v; e.g. %v", lost, examples[:min(10, len(examples))])
	}
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if rep.Committed < 1000 || byKind["non-transactional message"] < 100 || byKind["row"] < 100 {
		t.Fatalf("the load was too light to mean anything: %v", byKind)
	}
	return rep
}
