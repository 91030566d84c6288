package test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/pgbouncer"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// Connection poolers: PgBouncer (Debian's 1.18) between the relays and
// PostgreSQL, the managed-database case, where pgoutbox polls.

// pooledEnv is a database reached through PgBouncer as well as directly,
// whose outbox already holds rows: history (published before) and pending
// (not yet published).
type pooledEnv struct {
	*testenv.Env
	bouncer *pgbouncer.Bouncer
	// pooled is the database's URL through PgBouncer.
	pooled  string
	history map[string]bool
	pending []string
}

// newPooledEnv puts PgBouncer in poolMode in front of a fresh database,
// migrates it through PgBouncer, as a user with only the pooler's address
// would, and fills its outbox with 300 published and 40 pending rows.
func newPooledEnv(t *testing.T, poolMode string) *pooledEnv {
	t.Helper()
	e := &testenv.Env{T: t, URL: pgcluster.NewDatabase(t)}
	e.Kafka = kafkatest.New(t)
	e.Brokers = e.Kafka.Brokers
	e.Conn = e.Connect()
	p := &pooledEnv{Env: e, bouncer: pgbouncer.Start(t, e.URL, pgbouncer.Options{PoolMode: poolMode})}
	p.pooled = p.bouncer.URL
	if out, err := pgoutboxAt(t, 30*time.Second, "migrate", "--database-url", p.pooled); err != nil {
		t.Fatalf("pgoutbox migrate through PgBouncer (%s pooling): %v\n%s", poolMode, err, out)
	}
	ctx := context.Background()
	rows, err := e.Conn.Query(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload, published_at)
SELECT 'order', 'o-' || (g % 7), 'Placed', jsonb_build_object('old', g), now() - interval '1 day' FROM generate_series(1, 300) g
RETURNING id::text`)
	if err != nil {
		t.Fatal(err)
	}
	p.history = map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		p.history[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	p.pending = p.InsertN("order", 40)
	return p
}

// pgoutboxAt runs the binary to completion, within timeout.
func pgoutboxAt(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	bin := testenv.Bin(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("still running after %s", timeout)
	}
	return string(out), err
}

func running(p *testenv.Proc) bool {
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}

const leaseTaken = "holding the pipeline's lease"

// holderOf waits until one of the relays holds the pipeline's lease (its
// n-th time) and returns it.
func holderOf(t *testing.T, n int, relays ...*testenv.Proc) *testenv.Proc {
	t.Helper()
	var holder *testenv.Proc
	testenv.Eventually(t, 30*time.Second, "a relay holding the pipeline's lease", func() bool {
		for _, r := range relays {
			if len(r.Logged(leaseTaken)) >= n {
				holder = r
				return true
			}
		}
		return false
	})
	return holder
}

// delivery is what a topic holds of an outbox's events, with the producer
// (one per relay process) of each record.
type delivery struct {
	records map[string][]*kgo.Record // by event id, in offset order per partition
}

func readDelivery(t *testing.T, brokers []string, topic string) delivery {
	t.Helper()
	d := delivery{records: map[string][]*kgo.Record{}}
	for _, r := range testenv.Drain(t, brokers, topic, 0) {
		id := testenv.DecodeEvent(t, r).ID
		d.records[id] = append(d.records[id], r)
	}
	return d
}

// awaitDelivery reads the topic until every committed event has arrived,
// or timeout passes, and returns what it holds then.
func awaitDelivery(t *testing.T, brokers []string, topic string, committed map[string]int, timeout time.Duration) delivery {
	t.Helper()
	c := kafkatest.NewConsumer(t, brokers, topic)
	seen := map[string]bool{}
	for deadline := time.Now().Add(timeout); len(seen) < len(committed) && time.Now().Before(deadline); {
		c.PollRecords(testenv.TimeoutContext(t, time.Second), 10000).EachRecord(func(r *kgo.Record) {
			if id := testenv.DecodeEvent(t, r).ID; committedHas(committed, id) {
				seen[id] = true
			}
		})
	}
	return readDelivery(t, brokers, topic)
}

func committedHas(committed map[string]int, id string) bool {
	_, ok := committed[id]
	return ok
}

// duplicates counts the events delivered more than once.
func (d delivery) duplicates() int {
	n := 0
	for _, rs := range d.records {
		n += len(rs) - 1
	}
	return n
}

// PgBouncer in front of the server, in transaction and in session pooling,
// with pgoutbox's default settings and two relays of one pipeline (an HA
// pair) through it, over an outbox that already holds rows. Both keep
// running: one publishes, the other waits; auto mode polls and says that
// the pooler is why. The pending rows and every new one arrive once, the
// history never. The holder stops (SIGTERM) and the other takes over at
// once; the stopped one, started again on the pooler's server connections
// its first run left, waits instead of failing. Before pgoutbox set its
// own query mode, a second relay (or a restarted one) met the first's
// prepared statements there and exited ("prepared statement stmtcache_...
// already exists"); with pgx's simple protocol both ran, and both polled.
func TestPoolerDefaultSettings(t *testing.T) {
	for _, mode := range []string{pgbouncer.Transaction, pgbouncer.Session} {
		t.Run(mode, func(t *testing.T) {
			p := newPooledEnv(t, mode)
			a := testenv.StartBinary(t, p.RunArgs(p.pooled)...)
			b := testenv.StartBinary(t, p.RunArgs(p.pooled)...)
			ids := append(slices.Clone(p.pending), p.InsertN("order", 30)...)
			testenv.AwaitIDs(t, p.Brokers, "outbox.event.order", ids, 30*time.Second)
			if !running(a) || !running(b) {
				t.Fatalf("a relay exited: running %v and %v", running(a), running(b))
			}
			holder := holderOf(t, 1, a, b)
			standby := a
			if holder == a {
				standby = b
			}
			if n := len(standby.Logged(leaseTaken)); n != 0 {
				t.Fatalf("the standby took the lease %d times while the holder ran", n)
			}
			// Its line may still be on its way from the pipe when the
			// events arrived.
			testenv.Eventually(t, 10*time.Second, "the standby to say it waits", func() bool {
				return len(standby.Logged("another relay holds this pipeline; waiting to take over")) > 0
			})
			// status, through the pooler too, names the holder.
			out, _ := pgoutboxAt(t, 30*time.Second, "status", "--database-url", p.pooled, "--json")
			var st struct {
				Lease *struct{ Holder string } `json:"lease"`
			}
			var taken struct{ Holder string }
			if err := json.NewDecoder(strings.NewReader(out)).Decode(&st); err != nil || st.Lease == nil {
				t.Errorf("status shows no lease (%v):\n%s", err, out)
			} else if json.Unmarshal([]byte(holder.Logged(leaseTaken)[0].Raw), &taken); st.Lease.Holder != taken.Holder {
				t.Errorf("status says %s holds the lease, the holder's log says %s", st.Lease.Holder, taken.Holder)
			}
			fallback := holder.Logged("switching to polling")
			if len(fallback) == 0 || !strings.Contains(fallback[0].Raw, "connection pooler") ||
				!strings.Contains(fallback[0].Raw, "Point --database-url at the server itself") {
				t.Errorf("auto mode does not say the pooler is why it polls: %v", fallback)
			}

			stopped := time.Now()
			if err := holder.Signal(t, syscall.SIGTERM); err != nil {
				t.Fatalf("the holder's exit after SIGTERM: %v", err)
			}
			took := holderOf(t, 1, standby).Logged(leaseTaken)[0].Time.Sub(stopped)
			more := p.InsertN("order", 20)
			testenv.AwaitIDs(t, p.Brokers, "outbox.event.order", more, 30*time.Second)
			again := testenv.StartBinary(t, p.RunArgs(p.pooled)...)
			testenv.Eventually(t, 20*time.Second, "the restarted relay waiting", func() bool {
				return len(again.Logged("another relay holds this pipeline; waiting to take over")) > 0
			})
			time.Sleep(500 * time.Millisecond)
			if !running(again) {
				t.Fatalf("the relay started again on the pooler's connections exited:\n%s", again.Out.String())
			}

			d := readDelivery(t, p.Brokers, "outbox.event.order")
			for _, id := range append(ids, more...) {
				if len(d.records[id]) == 0 {
					t.Errorf("event %s never arrived", id)
				}
			}
			for id := range d.records {
				if p.history[id] {
					t.Errorf("event %s of the history was published", id)
				}
			}
			t.Logf("%s pooling: %d events, %d duplicates; after a SIGTERM of the holder the other took over in %s",
				mode, len(d.records), d.duplicates(), took.Round(time.Millisecond))
			if d.duplicates() != 0 || len(d.records) != len(ids)+len(more) {
				t.Fatalf("%d events arrived (%d duplicates), want %d once each", len(d.records), d.duplicates(), len(ids)+len(more))
			}
		})
	}
}

// What cannot work through a pooler is refused at start, saying what to
// change: WAL mode (PgBouncer 1.18 refuses replication connections), a
// query mode that keeps statements on one server connection, and
// statement pooling, which refuses transactions.
func TestPoolerRefusals(t *testing.T) {
	p := newPooledEnv(t, pgbouncer.Transaction)
	statement := pgbouncer.Start(t, p.URL, pgbouncer.Options{PoolMode: pgbouncer.Statement})
	run := []string{"run", "--kafka-brokers", strings.Join(p.Brokers, ","), "--log-format", "json"}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"wal mode", []string{"--database-url", p.pooled, "--mode", "wal"},
			[]string{"refused the replication connection", "Point --database-url at the server itself"}},
		{"cached statements", []string{"--database-url", p.pooled + "&default_query_exec_mode=cache_statement", "--mode", "poll"},
			[]string{"default_query_exec_mode=cache_statement", "drop that setting"}},
		{"statement pooling", []string{"--database-url", statement.URL, "--mode", "poll"},
			[]string{"refuses transactions", "pool_mode = transaction or session"}},
	} {
		out, err := pgoutboxAt(t, 30*time.Second, append(slices.Clone(run), c.args...)...)
		if err == nil || strings.Contains(err.Error(), "still running") {
			t.Errorf("%s: run did not stop (%v):\n%s", c.name, err, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the output does not say %q:\n%s", c.name, w, out)
			}
		}
	}
}

// The split brain: two relays of one pipeline through a transaction
// pooler under load, with pgoutbox's default lease (5s, renewed every
// second). The holder stalls (SIGSTOP) for longer than its lease: the
// other takes the pipeline over. The stalled one comes back (SIGCONT) and
// publishes nothing more: its lease was taken over, its marks are refused,
// and it waits. Then the new holder is killed (kill -9) and the first
// takes over again; the takeover time is measured. Each relay publishes
// only while it holds the lease, by the records' own timestamps; the only
// duplicates are what a holder had in flight, unmarked, when it stalled or
// died; nothing is lost; order per aggregate holds. Before the lease, the
// session's advisory lock went to whichever client the pooler handed its
// server connection, and both relays polled at once (574 of 605 events
// published twice).
func TestPoolerSplitBrain(t *testing.T) {
	p := newPooledEnv(t, pgbouncer.Transaction)
	load := p.StartLoad(t, 3)
	a := testenv.StartBinary(t, p.RunArgs(p.pooled, "--mode", "poll", "--poll-interval", "100ms")...)
	b := testenv.StartBinary(t, p.RunArgs(p.pooled, "--mode", "poll", "--poll-interval", "100ms")...)
	first := holderOf(t, 1, a, b)
	second := a
	if first == a {
		second = b
	}
	firstFrom := first.Logged(leaseTaken)[0].Time
	time.Sleep(testenv.Chaos(2*time.Second, 20*time.Second)) // both run

	// The holder stalls past its lease.
	if err := first.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stalled := time.Now()
	secondFrom := holderOf(t, 1, second).Logged(leaseTaken)[0].Time
	if err := first.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	testenv.Eventually(t, 20*time.Second, "the stalled relay finding its lease taken over", func() bool {
		return len(first.Logged("another relay took over this pipeline; this one stopped publishing and waits"))+
			len(first.Logged("another relay holds this pipeline; waiting to take over")) > 0
	})
	time.Sleep(testenv.Chaos(time.Second, 10*time.Second)) // both run again

	// The new holder dies.
	second.Signal(t, syscall.SIGKILL)
	killed := time.Now()
	back := holderOf(t, 2, first).Logged(leaseTaken)[1].Time
	took := back.Sub(killed)
	time.Sleep(testenv.Chaos(time.Second, 10*time.Second))
	committed := load.Finish()
	d := awaitDelivery(t, p.Brokers, "outbox.event.account", committed, 60*time.Second)
	// Which producer is which relay: the one whose records mostly fall
	// in the second relay's lease is the second's.
	inSecond := map[int64]int{}
	for _, rs := range d.records {
		for _, r := range rs {
			if r.Timestamp.After(secondFrom) && r.Timestamp.Before(killed) {
				inSecond[r.ProducerID]++
			} else {
				inSecond[r.ProducerID]--
			}
		}
	}
	var outside []string
	lost, order := 0, 0
	last := map[string]int{}
	type firstSeen struct {
		offset int64
		seq    int
	}
	firsts := map[string][]firstSeen{}
	for id, pos := range committed {
		rs := d.records[id]
		if len(rs) == 0 {
			lost++
			continue
		}
		key := string(rs[0].Key)
		firsts[key] = append(firsts[key], firstSeen{rs[0].Offset, pos})
		for _, r := range rs {
			at := r.Timestamp
			if inSecond[r.ProducerID] > 0 {
				if at.Before(secondFrom) || at.After(killed) {
					outside = append(outside, fmt.Sprintf("second relay at %s", at.Format(time.StampMilli)))
				}
			} else if at.Before(firstFrom) || (at.After(stalled) && at.Before(back)) {
				// Its first lease, until it stalled; its second, from the
				// takeover after the kill.
				outside = append(outside, fmt.Sprintf("first relay at %s", at.Format(time.StampMilli)))
			}
		}
	}
	// First deliveries in commit order, per aggregate (one partition each:
	// offsets order its records).
	for key, fs := range firsts {
		slices.SortFunc(fs, func(x, y firstSeen) int { return cmp.Compare(x.offset, y.offset) })
		for _, f := range fs {
			if prev, ok := last[key]; ok && f.seq < prev {
				order++
			}
			last[key] = f.seq
		}
	}
	dups := d.duplicates()
	t.Logf("committed %d, delivered %d, lost %d, duplicates %d (what the stalled and the killed holder had in flight), order violations %d; "+
		"takeover after the stall %s (stalled at %s), after kill -9 %s",
		len(committed), len(d.records), lost, dups, order,
		secondFrom.Sub(stalled).Round(time.Millisecond), stalled.Format(time.StampMilli), took.Round(time.Millisecond))
	if len(outside) > 0 {
		t.Errorf("%d records published outside their relay's lease, first %s (the stall %s to %s)", len(outside), outside[0],
			stalled.Format(time.StampMilli), resumed.Format(time.StampMilli))
	}
	if lost != 0 || order != 0 {
		t.Errorf("lost %d, order violations %d", lost, order)
	}
	// One poll's batch (500) at most at each of the two handovers.
	if dups > 2*500 {
		t.Errorf("%d duplicates: more than two relays' batches in flight", dups)
	}
	if took > 10*time.Second {
		t.Errorf("the takeover after kill -9 took %s, with a 5s lease", took)
	}
	if len(committed) < 300 {
		t.Fatalf("only %d events committed; the load was too light to mean anything", len(committed))
	}
}

// Commit-to-consume latency through a transaction pooler against a direct
// connection, at a 100 ms poll interval: two pipelines over two tables
// with the same rows, written in the same transactions, one relay straight
// to the server and one through PgBouncer, measured side by side. The
// pooler's p50 stays within 1.5 times the direct one's.
func TestPoolerLatency(t *testing.T) {
	p := newPooledEnv(t, pgbouncer.Transaction)
	ctx := context.Background()
	if out, err := pgoutboxAt(t, 30*time.Second, "migrate", "--database-url", p.pooled, "--table", "public.outbox_pooled"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if _, err := p.Conn.Exec(ctx, "UPDATE outbox SET published_at = now() WHERE published_at IS NULL"); err != nil {
		t.Fatal(err)
	}
	common := []string{"--mode", "poll", "--poll-interval", "100ms"}
	testenv.StartBinary(t, p.RunArgs(p.URL, append(common, "--slot", "direct", "--topic", "direct.{aggregatetype}")...)...)
	testenv.StartBinary(t, p.RunArgs(p.pooled, append(common, "--slot", "pooled", "--table", "public.outbox_pooled", "--topic", "pooled.{aggregatetype}")...)...)
	time.Sleep(time.Second)

	var mu sync.Mutex
	arrived := map[string]time.Time{}
	stop := make(chan struct{})
	done := make(chan struct{})
	c := kafkatest.NewConsumer(t, p.Brokers, "direct.lat", "pooled.lat")
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			fs := c.PollRecords(testenv.TimeoutContext(t, 200*time.Millisecond), 10000)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if id := r.Topic + "/" + testenv.DecodeEvent(t, r).ID; arrived[id].IsZero() {
					arrived[id] = now
				}
			})
			mu.Unlock()
		}
	}()
	committed := map[string]time.Time{}
	var pairs [][2]string
	end := time.Now().Add(testenv.Chaos(6*time.Second, 30*time.Second))
	for i := 0; time.Now().Before(end); i++ {
		var direct, pooled string
		tx, err := p.Conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for table, id := range map[string]*string{"outbox": &direct, "outbox_pooled": &pooled} {
			if err := tx.QueryRow(ctx, `INSERT INTO `+table+` (aggregatetype, aggregateid, type, payload) VALUES ('lat', $1, 'T', '{}') RETURNING id::text`,
				fmt.Sprint(i%10)).Scan(id); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		committed["direct.lat/"+direct], committed["pooled.lat/"+pooled] = now, now
		pairs = append(pairs, [2]string{"direct.lat/" + direct, "pooled.lat/" + pooled})
		time.Sleep(20 * time.Millisecond)
	}
	testenv.Eventually(t, 30*time.Second, "every event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(arrived) >= len(committed)
	})
	close(stop)
	<-done
	var direct, pooled []time.Duration
	for _, pr := range pairs {
		direct = append(direct, arrived[pr[0]].Sub(committed[pr[0]]))
		pooled = append(pooled, arrived[pr[1]].Sub(committed[pr[1]]))
	}
	slices.Sort(direct)
	slices.Sort(pooled)
	q := func(l []time.Duration, f float64) time.Duration {
		return l[int(f*float64(len(l)-1))].Round(100 * time.Microsecond)
	}
	t.Logf("%d events each at a 100 ms poll interval: direct p50 %s p90 %s p99 %s; through PgBouncer (transaction pooling) p50 %s p90 %s p99 %s",
		len(pairs), q(direct, .5), q(direct, .9), q(direct, .99), q(pooled, .5), q(pooled, .9), q(pooled, .99))
	if q(pooled, .5) > q(direct, .5)*3/2 {
		t.Fatalf("p50 through the pooler %s is more than 1.5 times the direct %s", q(pooled, .5), q(direct, .5))
	}
}
