// Package test holds pgoutbox's integration and end-to-end tests: a real
// PostgreSQL with logical replication (pgcluster) and a real
// Kafka-protocol broker (test/kafkatest), never a mock of either.
package test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/broker"
	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

func TestMain(m *testing.M) { pgcluster.Main(kafkatest.Main(m)) }

// env is one test's Postgres (migrated) and broker.
type env struct {
	t       *testing.T
	pg      *pgcluster.Cluster
	url     string
	kafka   *kafkatest.Cluster // the in-process broker (newEnv)
	apache  *kafkatest.Broker  // Apache Kafka (newKafkaEnv)
	brokers []string
	conn    *pgx.Conn
}

// newEnv is a test's Postgres and the in-process broker (kfake): for tests
// about PostgreSQL's behaviour and pgoutbox's own, and for those that need
// the in-process broker's fault hooks.
func newEnv(t *testing.T, pgOpts ...pgcluster.Options) *env {
	t.Helper()
	e := bareEnv(t, "", pgOpts...)
	if _, err := migrations.Migrate(context.Background(), e.conn, migrations.Options{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return e
}

// newKafkaEnv is newEnv on the package's Apache Kafka (kafkatest.Shared)
// instead of the in-process broker: for tests about Kafka's behaviour
// (transactions, fencing, limits, refusals, authentication). The topics
// the test creates are deleted when it ends.
func newKafkaEnv(t *testing.T, pgOpts ...pgcluster.Options) *env {
	t.Helper()
	b := kafkatest.Shared(t)
	e := newEnv(t, pgOpts...)
	e.kafka, e.apache, e.brokers = &kafkatest.Cluster{Brokers: b.Brokers}, b, b.Brokers
	return e
}

func (e *env) connect() *pgx.Conn {
	e.t.Helper()
	conn, err := pgx.Connect(context.Background(), e.url)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// config is a relay configuration for tests: fast status updates and
// heartbeats so that positions can be observed quickly.
func (e *env) config() relay.Config {
	var cfg relay.Config
	cfg.CreateSlot = true
	cfg.Replication.DatabaseURL = e.url
	cfg.Replication.StatusInterval = 100 * time.Millisecond
	cfg.Replication.HeartbeatInterval = 200 * time.Millisecond
	cfg.Sink = &broker.Kafka{Config: sink.Config{Brokers: e.brokers, CreateTopics: true}}
	cfg.MaxBackoff = time.Second
	return cfg
}

// setup creates the publication and slot, so that everything written from
// now on is in the slot's stream.
func (e *env) setup(cfg relay.Config) {
	e.t.Helper()
	cfg.Defaults()
	if _, err := relay.Setup(context.Background(), e.conn, cfg.Replication, true, false); err != nil {
		e.t.Fatalf("setup: %v", err)
	}
}

// running is an in-process relay.
type running struct {
	*relay.Relay
	cancel  context.CancelFunc
	exit    chan struct{} // closed once Run has returned
	exitErr error         // what Run returned, once exit is closed
}

// done is closed once Run has returned; errExit then says what it returned.
func (r *running) done() <-chan struct{} { return r.exit }

// errExit waits for Run to return and returns what it returned.
func (r *running) errExit() error {
	<-r.exit
	return r.exitErr
}

// start runs a relay in-process until the test ends or stop is called.
func (e *env) start(cfg relay.Config) *running {
	e.t.Helper()
	r, err := relay.New(cfg, testLogger(e.t))
	if err != nil {
		e.t.Fatalf("relay: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{Relay: r, cancel: cancel, exit: make(chan struct{})}
	go func() {
		run.exitErr = r.Run(ctx)
		close(run.exit)
	}()
	e.t.Cleanup(func() { run.stop() })
	return run
}

// stop asks the relay to shut down and returns what Run returned.
func (r *running) stop() error {
	r.cancel()
	select {
	case <-r.exit:
		return r.exitErr
	case <-time.After(60 * time.Second):
		return errors.New("relay did not stop within 60s")
	}
}

// insert commits one transaction of outbox rows and returns their ids.
func (e *env) insert(rows ...row) []string {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, $4) RETURNING id::text`,
			r.aggType, r.aggID, r.typ, r.payload).Scan(&ids[i]); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
	return ids
}

type row struct{ aggType, aggID, typ, payload string }

// slot reads the slot's state.
func (e *env) slot(name string) replication.SlotInfo {
	e.t.Helper()
	s, err := replication.SlotStatus(context.Background(), e.conn, name)
	if err != nil {
		e.t.Fatalf("slot status: %v", err)
	}
	return s
}

func (e *env) currentLSN() pglogrepl.LSN {
	e.t.Helper()
	var s string
	if err := e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		e.t.Fatal(err)
	}
	return lsn
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testLogger writes the relay's log to the test log, so that it shows with
// a failure and stays quiet otherwise.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("PGOUTBOX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = tWriter{}

// event is what tests read back from a structured CloudEvent.
type event struct {
	ID           string          `json:"id"`
	Source       string          `json:"source"`
	Type         string          `json:"type"`
	PartitionKey string          `json:"partitionkey"`
	Data         json.RawMessage `json:"data"`
}

func decodeEvent(t *testing.T, r *kgo.Record) event {
	t.Helper()
	var ev event
	if err := json.Unmarshal(r.Value, &ev); err != nil {
		t.Fatalf("record value is not a CloudEvent: %v: %s", err, r.Value)
	}
	return ev
}

// commitProbe is a second slot on the outbox's publication, read without
// consuming, that tells tests the exact commit end LSNs of transactions:
// the positions the relay may confirm. Bounds taken from
// pg_current_wal_lsn() are not exact, because a heartbeat may legitimately
// land between such a reading and the next commit.
type commitProbe struct {
	e    *env
	name string
}

func (e *env) commitProbe() *commitProbe {
	e.t.Helper()
	p := &commitProbe{e: e, name: "commit_probe"}
	if _, err := e.conn.Exec(context.Background(), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", p.name); err != nil {
		e.t.Fatalf("probe slot: %v", err)
	}
	e.t.Cleanup(func() {
		e.conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", p.name)
	})
	return p
}

// commits returns the commit end LSN of every transaction with outbox rows
// committed since the probe was created, in commit order.
func (p *commitProbe) commits() []pglogrepl.LSN {
	p.e.t.Helper()
	rows, err := p.e.conn.Query(context.Background(), `
SELECT lsn::text FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
  'proto_version', '1', 'publication_names', 'pgoutbox')
WHERE get_byte(data, 0) = ascii('C')`, p.name)
	if err != nil {
		p.e.t.Fatalf("peek: %v", err)
	}
	defer rows.Close()
	var out []pglogrepl.LSN
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			p.e.t.Fatal(err)
		}
		lsn, err := pglogrepl.ParseLSN(s)
		if err != nil {
			p.e.t.Fatal(err)
		}
		out = append(out, lsn)
	}
	if err := rows.Err(); err != nil {
		p.e.t.Fatal(err)
	}
	return out
}

// awaitIDs reads topic from the start until every id has arrived, and
// returns how many records it read. Duplicates (allowed after a restart)
// do not count towards completion.
func awaitIDs(t *testing.T, brokers []string, topic string, ids []string, timeout time.Duration) int {
	t.Helper()
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	c := kafkatest.NewConsumer(t, brokers, topic)
	deadline := time.Now().Add(timeout)
	read := 0
	for len(want) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never arrived on %s within %s", len(want), len(ids), topic, timeout)
		}
		fs := c.PollRecords(pollCtx(t, time.Second), 10000)
		fs.EachRecord(func(r *kgo.Record) {
			read++
			delete(want, decodeEvent(t, r).ID)
		})
	}
	return read
}
