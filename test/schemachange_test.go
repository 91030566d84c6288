package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// shapeWriter commits events for locked aggregates until stopped, as the
// application does while the outbox table changes under it: it names no
// column a change may take away (type comes from its default), and it
// notes, in each transaction, whether the table had its type column when
// the row was written (the insert's lock keeps the answer from changing
// until the commit).
type shapeWriter struct {
	mu        sync.Mutex
	committed map[string]int  // event id -> its place in its aggregate's commit order
	typeless  map[string]bool // written while the table had no type column
	stop      chan struct{}
	wg        sync.WaitGroup
}

func startShapeWriter(t *testing.T, e *testenv.Env, writers int) *shapeWriter {
	t.Helper()
	ctx := context.Background()
	e.Exec(`CREATE TABLE account (id text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO account (id) SELECT 'acct-' || g FROM generate_series(0, 9) g;
ALTER TABLE outbox ALTER COLUMN type SET DEFAULT 'Posted'`)
	w := &shapeWriter{committed: map[string]int{}, typeless: map[string]bool{}, stop: make(chan struct{})}
	for n := 0; n < writers; n++ {
		cfg, err := pgx.ParseConfig(e.URL)
		if err != nil {
			t.Fatal(err)
		}
		// Statements are not prepared: the table's columns change.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(n), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-w.stop:
					return
				case <-time.After(time.Duration(1+rng.IntN(3)) * time.Millisecond):
				}
				acct := fmt.Sprintf("acct-%d", rng.IntN(10))
				var (
					version int
					id      string
					hasType bool
				)
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					if err := tx.QueryRow(ctx, "UPDATE account SET version = version + 1 WHERE id = $1 RETURNING version", acct).Scan(&version); err != nil {
						return err
					}
					if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, payload) VALUES ('account', $1, $2) RETURNING id::text`,
						acct, fmt.Sprintf(`{"v": %d}`, version)).Scan(&id); err != nil {
						return err
					}
					return tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'outbox'::regclass AND attname = 'type' AND NOT attisdropped)`).Scan(&hasType)
				})
				if err != nil {
					t.Error(err)
					return
				}
				w.mu.Lock()
				w.committed[id] = version
				if !hasType {
					w.typeless[id] = true
				}
				w.mu.Unlock()
			}
		}()
	}
	return w
}

// written is how many events the writer committed so far.
func (w *shapeWriter) written() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.committed)
}

func (w *shapeWriter) finish() (map[string]int, map[string]bool) {
	close(w.stop)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed, w.typeless
}

// The outbox table changes while the application writes and pgoutbox
// streams it, in auto mode and in WAL mode (two pipelines, each to its own
// topics): a column added, retyped and dropped that pgoutbox does not
// read; the payload retyped (jsonb to json); the type column renamed and
// renamed back a second later; the headers column dropped and added again;
// the type column dropped, and added again. The rows written while the
// table had no type column cannot be events: each is dead-lettered, with
// the reason, and its aggregate held; the relays go on. Once the table is
// right again, dlq replay publishes what was dead-lettered and held: every
// event arrives, in commit order per aggregate, and the rows dead-lettered
// for the table's shape are exactly those written without the column.
func TestSchemaChangesUnderLoad(t *testing.T) {
	e := testenv.New(t)
	pipelines := []struct{ slot, mode string }{{"pa", "auto"}, {"pw", "wal"}}
	var procs []*testenv.Proc
	for _, pl := range pipelines {
		procs = append(procs, e.Run(t, "--mode", pl.mode, "--slot", pl.slot, "--publication", pl.slot,
			"--topic", pl.slot+".{aggregatetype}", "--poll-interval", "50ms"))
	}
	testenv.Eventually(t, 30*time.Second, "both relays streaming", func() bool {
		return strings.Contains(procs[0].Out.String(), `"msg":"streaming"`) && strings.Contains(procs[1].Out.String(), `"msg":"streaming"`)
	})
	w := startShapeWriter(t, e, 2)
	time.Sleep(500 * time.Millisecond)
	for _, step := range []struct {
		sql   string
		after time.Duration
	}{
		{"ALTER TABLE outbox ADD COLUMN note text DEFAULT 'n'", 200 * time.Millisecond},
		{"ALTER TABLE outbox ALTER COLUMN note TYPE varchar(20)", 200 * time.Millisecond},
		{"ALTER TABLE outbox ALTER COLUMN payload TYPE json USING payload::json", 200 * time.Millisecond},
		{"ALTER TABLE outbox RENAME COLUMN type TO kind", 600 * time.Millisecond},
		{"ALTER TABLE outbox RENAME COLUMN kind TO type", 200 * time.Millisecond},
		{"ALTER TABLE outbox DROP COLUMN note", 200 * time.Millisecond},
		{"ALTER TABLE outbox DROP COLUMN headers", 200 * time.Millisecond},
		{"ALTER TABLE outbox ADD COLUMN headers jsonb", 200 * time.Millisecond},
		{"ALTER TABLE outbox DROP COLUMN type", 300 * time.Millisecond},
		{"ALTER TABLE outbox ADD COLUMN type text NOT NULL DEFAULT 'Posted'", 300 * time.Millisecond},
	} {
		e.Exec(step.sql)
		time.Sleep(step.after * testenv.Chaos[time.Duration](1, 5)) // make chaos: 15 s of load
	}
	// A loaded machine writes slower: the table right again, the load
	// goes on until it has written enough to mean something.
	testenv.Eventually(t, 30*time.Second, "200 events written", func() bool { return w.written() >= 200 })
	committed, typeless := w.finish()
	if len(typeless) == 0 || len(committed) < 200 {
		t.Fatalf("%d events, %d written without the type column: the load was too light to mean anything", len(committed), len(typeless))
	}
	end := e.CurrentLSN()
	for i, pl := range pipelines {
		testenv.Eventually(t, 30*time.Second, pl.slot+" past every row", func() bool { return e.Slot(pl.slot).ConfirmedLSN >= end })
		out, stderr, ok := testenv.CLI(t, "dlq", "replay", "--database-url", e.URL, "--kafka-brokers", strings.Join(e.Brokers, ","),
			"--slot", pl.slot, "--topic", pl.slot+".{aggregatetype}")
		if !ok {
			t.Fatalf("dlq replay %s: %s%s", pl.slot, out, stderr)
		}
		rep := testenv.Check(t, e.Brokers, pl.slot+".account", committed)
		t.Logf("%s (%s mode): %v; %d written without the type column", pl.slot, pl.mode, rep, len(typeless))
		if rep.Lost != 0 || rep.OrderViolations != 0 {
			t.Errorf("%s: lost %d, order violations %d", pl.slot, rep.Lost, rep.OrderViolations)
		}
		rows, err := e.Conn.Query(context.Background(), "SELECT event_id, reason FROM pgoutbox_dead_letter WHERE pipeline = $1", pl.slot)
		if err != nil {
			t.Fatal(err)
		}
		shape, held := map[string]bool{}, 0
		for rows.Next() {
			var id, reason string
			if err := rows.Scan(&id, &reason); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(reason, "held behind") {
				held++
			}
			if strings.Contains(reason, "a schema change") {
				shape[id] = true
				if !typeless[id] {
					t.Errorf("%s: event %s written with the type column was dead-lettered: %s", pl.slot, id, reason)
				}
			}
		}
		for id := range typeless {
			if !shape[id] {
				t.Errorf("%s: event %s written without the type column was not dead-lettered for it", pl.slot, id)
			}
		}
		t.Logf("%s: %d dead-lettered for the table's shape, %d held behind them until the replay", pl.slot, len(shape), held)
		if err := procs[i].Signal(t, syscall.SIGTERM); err != nil {
			t.Errorf("%s: pgoutbox run: %v", pl.slot, err)
		}
	}
}

// A required column is dropped from the outbox while the relay runs. Under
// the halt policy it stops with an error naming the column and confirms
// nothing past the change. Under the dead-letter policy (the default) the
// row written without the column is dead-lettered with that reason and
// the relay goes on (TestSchemaChangesUnderLoad); a nullable column added
// is harmless (TestOutboxColumnAddedWhileRunning).
func TestRequiredColumnDropped(t *testing.T) {
	for _, policy := range []string{relay.PoisonHalt, relay.PoisonDeadLetter} {
		t.Run(policy, func(t *testing.T) { requiredColumnDropped(t, policy) })
	}
}

func requiredColumnDropped(t *testing.T, policy string) {
	e := testenv.New(t)
	cfg := e.Config()
	cfg.OnPoison = policy
	e.Setup(cfg)
	r := e.Start(cfg)
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	testenv.AwaitIDs(t, e.Brokers, "outbox.event.order", ids, 10*time.Second)
	ctx := context.Background()
	probe := testenv.NewCommitProbe(e)
	if _, err := e.Conn.Exec(ctx, "ALTER TABLE outbox DROP COLUMN aggregatetype"); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := e.Conn.QueryRow(ctx, `INSERT INTO outbox (aggregateid, type, payload) VALUES ('o-2', 'Placed', '{}') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if policy == relay.PoisonDeadLetter {
		var reason string
		testenv.Eventually(t, 20*time.Second, "the row dead-lettered", func() bool {
			return e.Conn.QueryRow(ctx, "SELECT reason FROM pgoutbox_dead_letter WHERE event_id = $1", id).Scan(&reason) == nil
		})
		if !strings.Contains(reason, "lacks a required column: aggregatetype") {
			t.Errorf("dead-lettered for %q", reason)
		}
		select {
		case <-r.Done():
			t.Fatalf("the relay stopped: %v", r.Err())
		case <-time.After(500 * time.Millisecond):
		}
		return
	}
	var err error
	select {
	case <-r.Done():
		err = r.Err()
	case <-time.After(20 * time.Second):
		t.Fatal("the relay did not stop")
	}
	if !errors.Is(err, schema.ErrMissingColumn) {
		t.Fatalf("stopped with %v, want a missing column", err)
	}
	t.Logf("stopped with: %v", err)
	commits := probe.Commits()
	if got := e.Slot("pgoutbox").ConfirmedLSN; len(commits) > 1 && got >= commits[len(commits)-1] {
		t.Fatalf("confirmed %s, past the insert into the altered table (%s)", got, commits[len(commits)-1])
	}
}

// ALTER TABLE on the outbox while the relay runs: a nullable column added
// changes the Relation message; columns are mapped by name, so events keep
// flowing and keep their values.
func TestOutboxColumnAddedWhileRunning(t *testing.T) {
	e := testenv.New(t)
	cfg := e.Config()
	e.Setup(cfg)
	e.Start(cfg)
	e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":1}`))
	if _, err := e.Conn.Exec(context.Background(), "ALTER TABLE outbox ADD COLUMN note text"); err != nil {
		t.Fatal(err)
	}
	ids := e.Insert(testenv.NewRow("order", "o-1", "Placed", `{"n":2}`))
	recs := kafkatest.Consume(t, e.Brokers, []string{"outbox.event.order"}, 2, 15*time.Second)
	if ev := testenv.DecodeEvent(t, recs[1]); ev.ID != ids[0] || string(ev.Data) != `{"n": 2}` {
		t.Fatalf("after ALTER TABLE: %+v", ev)
	}
}
