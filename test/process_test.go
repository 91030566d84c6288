package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// proc is a pgoutbox run process.
type proc struct {
	cmd     *exec.Cmd
	out     *lockedBuffer // readable while it runs
	exit    chan struct{} // closed once it has exited
	exitErr error         // what Wait returned, once exit is closed
}

// done is closed once the process has exited; errExit then says how.
func (p *proc) done() <-chan struct{} { return p.exit }

// errExit is what waiting for the process returned (nil: it exited 0),
// once done is closed.
func (p *proc) errExit() error {
	<-p.exit
	return p.exitErr
}

// runProcess starts pgoutbox run against e's database and broker (runArgs).
func (e *env) runProcess(t *testing.T, extra ...string) *proc {
	t.Helper()
	return startBinary(t, e.runArgs(e.url, extra...)...)
}

// runArgs is the command line of pgoutbox run against the database at url
// (e's, or e's through a pooler) and e's broker, with status updates every
// 100 ms, heartbeats every 200 ms and JSON logs; extra flags come after
// these and win over them.
func (e *env) runArgs(url string, extra ...string) []string {
	return append([]string{"run",
		"--database-url", url,
		"--kafka-brokers", strings.Join(e.brokers, ","),
		"--status-interval", "100ms",
		"--heartbeat-interval", "200ms",
		"--log-format", "json",
	}, extra...)
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exit:
		return p.exitErr
	case <-time.After(60 * time.Second):
		t.Fatalf("pgoutbox did not exit within 60s of %s", sig)
		return nil
	}
}

// loadWriter commits transactions of several events for locked aggregates
// until stopped, remembering what committed and in which order per aggregate.
type loadWriter struct {
	e         *env
	mu        sync.Mutex
	committed map[string]int // event id -> its position in its aggregate's commit order
	// rollbacks counts transactions the writers rolled back; check fails
	// on any of their events it finds in the topic.
	rollbacks int
	stop      chan struct{}
	done      chan struct{}
}

func (e *env) startLoad(t *testing.T, writers int) *loadWriter {
	t.Helper()
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS account (id text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO account (id) SELECT 'acct-' || g FROM generate_series(0, 19) g ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	l := &loadWriter{e: e, committed: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		conn := e.connect()
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
	return l
}

// count is how many events have committed so far.
func (l *loadWriter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.committed)
}

// rolledBack is how many transactions the writers have rolled back so far.
func (l *loadWriter) rolledBack() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rollbacks
}

func (l *loadWriter) finish() map[string]int {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.committed
}

// report is what a checker finds in the topic.
type report struct {
	committed, delivered, lost, duplicates, orderViolations int
	// longestGap is the longest time between two consecutive new events,
	// by the time they were appended to Kafka: under continuous load, how
	// long the worst fault of the run stopped the flow.
	longestGap time.Duration
}

func (r report) String() string {
	return fmt.Sprintf("committed %d, delivered %d, lost %d, duplicates %d, order violations %d, longest stall %v",
		r.committed, r.delivered, r.lost, r.duplicates, r.orderViolations, r.longestGap.Round(time.Millisecond))
}

// check reads the topic from the start until every committed event has
// arrived (or a minute passes), then a little longer to count late
// duplicates, and compares with what committed: nothing lost, duplicates
// counted, and per aggregate the first delivery of each event in commit
// order (a redelivery replays a suffix and is allowed).
func check(t *testing.T, brokers []string, topic string, committed map[string]int) report {
	t.Helper()
	return checkWith(t, brokers, topic, committed, nil)
}

// checkWith is check that also accepts the events in maybe (of commits whose
// outcome the writer could not know): they may arrive or not, are counted
// neither as delivered nor as lost, and are not ordered.
func checkWith(t *testing.T, brokers []string, topic string, committed map[string]int, maybe map[string]bool) report {
	t.Helper()
	c := kafkatest.NewConsumer(t, brokers, topic)
	rep := report{committed: len(committed)}
	seen := map[string]int{}
	last := map[string]int{}
	var firsts []time.Time
	deadline := time.Now().Add(60 * time.Second)
	idle := 0
	for {
		fs := c.PollRecords(pollCtx(t, 500*time.Millisecond), 10000)
		if fs.NumRecords() == 0 {
			idle++
		} else {
			idle = 0
		}
		fs.EachRecord(func(r *kgo.Record) {
			ev := decodeEvent(t, r)
			seen[ev.ID]++
			if seen[ev.ID] > 1 {
				rep.duplicates++
				return
			}
			seq, ok := committed[ev.ID]
			if !ok && maybe[ev.ID] {
				return
			}
			if !ok {
				t.Errorf("event %s was never committed (rolled back?)", ev.ID)
				return
			}
			rep.delivered++
			firsts = append(firsts, r.Timestamp)
			if prev, ok := last[string(r.Key)]; ok && seq <= prev {
				rep.orderViolations++
				t.Errorf("aggregate %s: seq %d delivered after %d", r.Key, seq, prev)
			}
			last[string(r.Key)] = seq
		})
		if (rep.delivered == len(committed) && idle >= 2) || time.Now().After(deadline) {
			break
		}
	}
	rep.lost = len(committed) - rep.delivered
	slices.SortFunc(firsts, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(firsts); i++ {
		rep.longestGap = max(rep.longestGap, firsts[i].Sub(firsts[i-1]))
	}
	return rep
}

// drain reads every record of topic up to the end offsets the broker
// reports now, and returns those past the first skip ones. Reading to the
// end offsets, not until a poll comes back empty, makes it exact however
// slow the first fetch is.
func drain(t *testing.T, brokers []string, topic string, skip int) []*kgo.Record {
	t.Helper()
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ends, err := kadm.NewClient(admin).ListEndOffsets(pollCtx(t, 15*time.Second), topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	c := kafkatest.NewConsumer(t, brokers, topic)
	var out []*kgo.Record
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	for len(want) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("drain %s: partitions %v not read to their end", topic, want)
		}
		fs := c.PollRecords(pollCtx(t, time.Second), 10000)
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
			if n >= skip {
				out = append(out, r)
			}
			n++
		})
	}
	return out
}

// The relay is killed with SIGKILL at random moments under continuous load
// and restarted each time: every committed event arrives, per-aggregate
// order holds for first deliveries, duplicates are counted and reported.
func TestSIGKILLMidStream(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	e.setup(cfg)
	load := e.startLoad(t, 3)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	kills := chaos(6, 50)
	for i := 0; i < kills; i++ {
		p := e.runProcess(t)
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		p.signal(t, syscall.SIGKILL)
	}
	p := e.runProcess(t)
	time.Sleep(500 * time.Millisecond)
	committed := load.finish()
	rep := check(t, e.brokers, "outbox.event.account", committed)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	t.Logf("%d kills: %v", kills, rep)
	if rep.lost != 0 || rep.orderViolations != 0 {
		t.Fatalf("lost %d events, %d order violations", rep.lost, rep.orderViolations)
	}
	if rep.committed < 200 {
		t.Fatalf("only %d events committed; the load was too light to mean anything", rep.committed)
	}
}

// SIGTERM under load: the relay stops reading at a transaction boundary,
// waits for Kafka's acks, confirms, and exits 0. A restart then sends
// nothing twice.
func TestSIGTERMUnderLoadLeavesNoDuplicates(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	e.setup(cfg)
	load := e.startLoad(t, 3)
	p := e.runProcess(t)
	time.Sleep(1500 * time.Millisecond)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		var exit *exec.ExitError
		errors.As(err, &exit)
		t.Fatalf("pgoutbox exited with %v after SIGTERM, want 0", err)
	}
	if !strings.Contains(p.out.String(), `"msg":"stream stopped"`) {
		t.Errorf("no shutdown line in the log:\n%s", p.out.String())
	}
	time.Sleep(300 * time.Millisecond)
	p2 := e.runProcess(t)
	time.Sleep(500 * time.Millisecond)
	committed := load.finish()
	rep := check(t, e.brokers, "outbox.event.account", committed)
	if err := p2.signal(t, syscall.SIGTERM); err != nil {
		t.Errorf("second exit: %v", err)
	}
	t.Logf("%v", rep)
	if rep.lost != 0 || rep.duplicates != 0 || rep.orderViolations != 0 {
		t.Fatalf("after a clean stop: lost %d, duplicates %d, order violations %d", rep.lost, rep.duplicates, rep.orderViolations)
	}
}
