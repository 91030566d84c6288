package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// slotFailoverJSON is the failover part of slot status --json.
type slotFailoverJSON struct {
	Failover struct {
		Survives             bool     `json:"survives"`
		ServerMajor          int      `json:"server_major"`
		Standby              bool     `json:"standby"`
		SlotFailover         bool     `json:"slot_failover"`
		SlotSynced           bool     `json:"slot_synced"`
		StandbySlots         []string `json:"synchronized_standby_slots"`
		SyncReplicationSlots *bool    `json:"sync_replication_slots"`
		Warnings             []string `json:"warnings"`
	} `json:"failover"`
}

func slotFailover(t *testing.T, url string) slotFailoverJSON {
	t.Helper()
	out, stderr, _ := testenv.CLI(t, "slot", "status", "--json", "--database-url", url)
	var s slotFailoverJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("slot status output is not JSON: %v\n%s\n%s", err, out, stderr)
	}
	return s
}

// slot create --failover makes a failover slot on 17 and later and refuses
// clearly before; slot status says whether the slot would survive a
// failover, and why not.
func TestSlotCreateFailover(t *testing.T) {
	e := testenv.New(t)
	if e.PG.External() {
		t.Skip("a standby needs the throwaway cluster, not PGOUTBOX_TEST_DATABASE_URL")
	}
	major := testenv.ServerMajor(t, e.Conn)
	out, stderr, ok := testenv.CLI(t, "slot", "create", "--failover", "--database-url", e.URL)
	if major < 17 {
		if ok || !strings.Contains(stderr, "failover slots need PostgreSQL 17") {
			t.Fatalf("PostgreSQL %d: slot create --failover exited ok=%t\n%s%s; want a refusal naming PostgreSQL 17", major, ok, out, stderr)
		}
		// run --slot-failover stops with the same reason rather than
		// retrying what cannot work.
		p := e.Run(t, "--slot-failover")
		select {
		case <-p.Done():
			if err := p.Err(); err == nil || !strings.Contains(p.Out.String(), "failover slots need PostgreSQL 17") {
				t.Errorf("run --slot-failover on PostgreSQL %d exited with %v; want a failure naming PostgreSQL 17:\n%s", major, err, p.Out)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run --slot-failover on PostgreSQL %d still running after 30s", major)
		}
		if _, stderr, ok := testenv.CLI(t, "slot", "create", "--database-url", e.URL); !ok {
			t.Fatalf("slot create: %s", stderr)
		}
		s := slotFailover(t, e.URL)
		if s.Failover.Survives || !strings.Contains(strings.Join(s.Failover.Warnings, "\n"), "has no failover slots") {
			t.Errorf("PostgreSQL %d: slot status says %+v; want a warning that a failover loses the slot", major, s.Failover)
		}
		return
	}
	if !ok {
		t.Fatalf("slot create --failover: %s%s", out, stderr)
	}
	var failover bool
	if err := e.Conn.QueryRow(context.Background(), "SELECT failover FROM pg_replication_slots WHERE slot_name = 'pgoutbox'").Scan(&failover); err != nil || !failover {
		t.Fatalf("pg_replication_slots.failover = %t (%v), want true", failover, err)
	}
	s := slotFailover(t, e.URL)
	if s.Failover.Survives || !s.Failover.SlotFailover || !strings.Contains(strings.Join(s.Failover.Warnings, "\n"), "synchronized_standby_slots is empty") {
		t.Errorf("failover slot without synchronized_standby_slots: %+v; want a warning", s.Failover)
	}

	standby := pgcluster.NewStandby(t, e.PG, testenv.StandbyForSlotSync())
	e.Conn = e.Connect() // the cold copy restarts the primary
	if _, err := e.Conn.Exec(context.Background(), "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Conn.Exec(context.Background(), "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "slot status: survives a failover", func() bool {
		return slotFailover(t, e.URL).Failover.Survives
	})
	awaitSynced(t, standby.URL, "pgoutbox", e.URL)
	if s := slotFailover(t, standby.URL); !s.Failover.Standby || !s.Failover.SlotSynced || !s.Failover.Survives {
		t.Errorf("slot status on the standby: %+v; want a synchronized slot that survives", s.Failover)
	}

	// A slot made without --failover is named as one a failover loses.
	if _, stderr, ok := testenv.CLI(t, "slot", "drop", "--database-url", e.URL); !ok {
		t.Fatalf("slot drop: %s", stderr)
	}
	if _, stderr, ok := testenv.CLI(t, "slot", "create", "--database-url", e.URL); !ok {
		t.Fatalf("slot create: %s", stderr)
	}
	s = slotFailover(t, e.URL)
	if s.Failover.Survives || s.Failover.SlotFailover || !strings.Contains(strings.Join(s.Failover.Warnings, "\n"), "not a failover slot") {
		t.Errorf("plain slot: %+v; want a warning that it is not a failover slot", s.Failover)
	}
}

// awaitSynced waits until the standby holds a synchronized, persistent copy
// of slot. The slot synchronization worker naps up to 30 s when it found
// nothing to do; a configuration reload wakes it.
//
// The copy stays temporary (and a promotion drops it) until the primary's
// slot moves past where the standby could start it; with no relay
// consuming the slot, pass advance, the primary's URL, to move it.
func awaitSynced(t *testing.T, standbyURL, slot, advance string) {
	t.Helper()
	ctx := context.Background()
	sc, err := pgx.Connect(ctx, standbyURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx)
	var pc *pgx.Conn
	if advance != "" {
		if pc, err = pgx.Connect(ctx, advance); err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctx)
	}
	var woken time.Time
	testenv.Eventually(t, 2*time.Minute, "the slot synchronized to the standby", func() bool {
		if time.Since(woken) > 500*time.Millisecond {
			if pc != nil {
				// A running-transactions record lets the slot's restart
				// position move when it is advanced.
				if _, err := pc.Exec(ctx, "SELECT pg_log_standby_snapshot()"); err != nil {
					t.Fatal(err)
				}
				if _, err := pc.Exec(ctx, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", slot); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := sc.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
				t.Fatal(err)
			}
			woken = time.Now()
		}
		var synced, temporary bool
		err := sc.QueryRow(ctx, "SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&synced, &temporary)
		return err == nil && synced && !temporary
	})
}

// failoverWriter commits events like testenv.Load, through a multi-host URL:
// when the primary dies it reconnects to whichever server accepts writes. A
// commit whose connection broke has an unknown outcome: its events may or
// may not exist, and the checker accepts either.
type failoverWriter struct {
	mu        sync.Mutex
	committed map[string]int
	uncertain map[string]bool
	errors    int
	stop      chan struct{}
	done      chan struct{}
}

func startFailoverLoad(t *testing.T, url string, writers int) *failoverWriter {
	l := &failoverWriter{committed: map[string]int{}, uncertain: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			var conn *pgx.Conn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			for {
				select {
				case <-l.stop:
					return
				case <-time.After(time.Duration(5+rng.IntN(10)) * time.Millisecond):
				}
				if conn == nil || conn.IsClosed() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					c, err := pgx.Connect(ctx, url)
					cancel()
					if err != nil {
						l.mu.Lock()
						l.errors++
						l.mu.Unlock()
						continue
					}
					conn = c
				}
				if err := l.one(conn, rng); err != nil {
					conn.Close(context.Background())
					conn = nil
				}
			}
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	return l
}

// one commits a transaction of one to three events for a locked aggregate.
func (l *failoverWriter) one(conn *pgx.Conn, rng *rand.Rand) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	acct := fmt.Sprintf("acct-%d", rng.IntN(20))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	var version int
	if err := tx.QueryRow(ctx, "UPDATE account SET version = version + 1 WHERE id = $1 RETURNING version", acct).Scan(&version); err != nil {
		return err
	}
	ids := make([]string, 1+rng.IntN(3))
	for j := range ids {
		if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('account', $1, 'Posted', $2) RETURNING id::text`,
			acct, fmt.Sprintf(`{"seq": %d}`, version*10+j)).Scan(&ids[j]); err != nil {
			return err
		}
	}
	err = tx.Commit(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	for j, id := range ids {
		if err != nil {
			l.uncertain[id] = true
		} else {
			l.committed[id] = version*10 + j
		}
	}
	return err
}

func (l *failoverWriter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.committed)
}

func (l *failoverWriter) finish() (map[string]int, map[string]bool) {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.committed, l.uncertain
}

// The primary dies under load (stopped -m immediate) and its synchronous
// standby is promoted, while the application keeps writing through a
// multi-host URL and the relay runs in auto mode with one. On PostgreSQL 15
// the slot is lost with the old primary: the relay finds the new primary,
// polls the gap and creates a new slot there. On 17 and later the slot is a
// failover slot synchronized to the standby, and the relay continues from
// it. Either way nothing committed is lost and the order per aggregate
// holds; duplicates and the longest stall are reported.
func TestFailoverUnderLoad(t *testing.T) {
	e := testenv.New(t)
	if e.PG.External() {
		t.Skip("a standby needs the throwaway cluster, not PGOUTBOX_TEST_DATABASE_URL")
	}
	ctx := context.Background()
	major := testenv.ServerMajor(t, e.Conn)
	failoverSlot := major >= 17
	opts := pgcluster.StandbyOptions{Name: "standby1", Slot: "standby1", Synchronous: true}
	if failoverSlot {
		opts = testenv.StandbyForSlotSync()
	}
	standby := pgcluster.NewStandby(t, e.PG, opts)
	e.Conn = e.Connect() // a cold copy restarts the primary
	if failoverSlot {
		if _, err := e.Conn.Exec(ctx, "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Conn.Exec(ctx, `CREATE TABLE account (id text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO account (id) SELECT 'acct-' || g FROM generate_series(0, 19) g`); err != nil {
		t.Fatal(err)
	}
	multi := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		e.PG.Port, standby.Port)
	e.URL = multi
	args := []string{"--mode", "auto", "--poll-interval", "100ms", "--probe-interval", "1s", "--receive-timeout", "3s"}
	if failoverSlot {
		args = append(args, "--slot-failover")
	}
	e.Run(t, args...)
	load := startFailoverLoad(t, multi, 2)
	testenv.Eventually(t, 30*time.Second, "the relay streaming", func() bool {
		var active bool
		err := e.Conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = 'pgoutbox'").Scan(&active)
		return err == nil && active
	})
	if failoverSlot {
		awaitSynced(t, standby.URL, "pgoutbox", "")
	}
	testenv.Eventually(t, 30*time.Second, "events before the failover", func() bool { return load.count() > 300 })
	before := load.count()

	if err := e.PG.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	failedAt := time.Now()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	e.Conn = nil
	testenv.Eventually(t, 30*time.Second, "events on the new primary", func() bool { return load.count() > before+300 })
	writing := time.Since(failedAt)
	committed, uncertain := load.finish()

	rep := testenv.CheckWith(t, e.Brokers, "outbox.event.account", committed, uncertain)
	t.Logf("PostgreSQL %d (failover slot %t): %s; %d commits with an unknown outcome; writes resumed on the new primary within %v",
		major, failoverSlot, rep, len(uncertain), writing.Round(100*time.Millisecond))
	if rep.Lost > 0 || rep.OrderViolations > 0 {
		t.Errorf("lost %d, order violations %d", rep.Lost, rep.OrderViolations)
	}

	nc, err := pgx.Connect(ctx, standby.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close(ctx)
	var losses int64
	if err := nc.QueryRow(ctx, "SELECT slot_losses FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&losses); err != nil {
		t.Fatal(err)
	}
	t.Logf("slot losses recorded on the new primary: %d", losses)
	if failoverSlot && losses != 0 {
		t.Errorf("the relay lost its slot %d times; it should have continued from the synchronized one", losses)
	}
	if failoverSlot && rep.Duplicates >= before {
		t.Errorf("%d duplicates of %d events committed before the failover: the synchronized slot should resume near where the relay was", rep.Duplicates, before)
	}
	if !failoverSlot && losses == 0 {
		t.Errorf("PostgreSQL %d has no failover slots, yet the relay recorded no slot loss", major)
	}
}

// A Debezium configuration's slot.failover=true runs as Debezium runs it:
// a failover slot on PostgreSQL 17 and later, a plain one before (where
// --slot-failover alone is refused), said in a warning; the table's new
// rows are published either way.
func TestSlotFailoverFromDebeziumConfig(t *testing.T) {
	e := testenv.ExistingLedger(t, 100)
	major := testenv.ServerMajor(t, e.Conn)
	path := filepath.Join(t.TempDir(), "application.properties")
	props := testenv.DebeziumServerKafka(t, e) + `debezium.source.topic.prefix=ledger
debezium.source.plugin.name=pgoutput
debezium.source.table.include.list=public.outbox_event
debezium.source.snapshot.mode=no_data
debezium.source.slot.failover=true
debezium.transforms=outbox
debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
debezium.transforms.outbox.table.field.event.key=aggregate_id
debezium.transforms.outbox.table.field.event.type=event_type
debezium.transforms.outbox.route.by.field=aggregate_type
`
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.Run(t, "--config", path)
	e.AwaitSlotActive(t, "debezium")
	want := <-testenv.WriteLedger(t, e, 5)
	kafkatest.Consume(t, e.Brokers, []string{"outbox.event.TRANSACTION"}, len(want), 30*time.Second)
	p.Stop(t)
	var failover bool
	if err := e.Conn.QueryRow(context.Background(), "SELECT failover FROM pg_replication_slots WHERE slot_name = 'debezium'").Scan(&failover); major >= 17 && (err != nil || !failover) {
		t.Errorf("PostgreSQL %d: slot failover %v (err %v), want a failover slot", major, failover, err)
	}
	warned := strings.Contains(p.Out.String(), "slot created without failover")
	if major < 17 && !warned {
		t.Errorf("PostgreSQL %d: no warning that the slot is not a failover slot:\n%s", major, p.Out)
	}
	if major >= 17 && warned {
		t.Errorf("PostgreSQL %d: warned of a plain slot:\n%s", major, p.Out)
	}
}
