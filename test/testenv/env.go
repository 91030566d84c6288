// Package testenv is the harness of pgoutbox's integration tests
// (package test): a test's PostgreSQL and broker, the relay run in the
// test's process or as the binary a user runs, the application's writers,
// and the assertions on what reached the broker and on what pgoutbox says
// (its status, metrics and log).
//
// A test starts with New (NewKafka for Apache Kafka, NewBare for a
// database that holds only a user's table) and uses the Env's methods for
// what nearly every test does; what tests of several features share is a
// function taking the Env, in the file of its subject. A helper that the
// tests of one feature use stays in that feature's test file.
//
// Only tests import this package, so none of it reaches the binary.
package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/test/kafkatest"
)

// Env is one test's PostgreSQL and broker. Its methods fail the test (T)
// on any error of their own.
type Env struct {
	T   *testing.T
	PG  *pgcluster.Cluster // nil when a test made the Env of a URL alone
	URL string             // the database's, as the test's superuser
	// Kafka is the in-process broker (New, NewBare); under NewKafka it
	// holds Apache Kafka's brokers, which Apache gives in full.
	Kafka   *kafkatest.Cluster
	Apache  *kafkatest.Broker
	Brokers []string  // the broker's plaintext listeners
	Conn    *pgx.Conn // the test's own connection, closed when it ends
}

// New is a test's Postgres and the in-process broker (kfake): for tests
// about PostgreSQL's behaviour and pgoutbox's own, and for those that need
// the in-process broker's fault hooks.
func New(t *testing.T, pgOpts ...pgcluster.Options) *Env {
	t.Helper()
	e := NewBare(t, "", pgOpts...)
	if _, err := migrations.Migrate(context.Background(), e.Conn, migrations.Options{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return e
}

// NewKafka is New on the package's Apache Kafka (kafkatest.Shared)
// instead of the in-process broker: for tests about Kafka's behaviour
// (transactions, fencing, limits, refusals, authentication). The topics
// the test creates are deleted when it ends.
func NewKafka(t *testing.T, pgOpts ...pgcluster.Options) *Env {
	t.Helper()
	b := kafkatest.Shared(t)
	e := New(t, pgOpts...)
	e.Kafka, e.Apache, e.Brokers = &kafkatest.Cluster{Brokers: b.Brokers}, b, b.Brokers
	return e
}

// NewBare is a database holding only what ddl creates (nothing when ddl
// is empty), and the in-process broker: nothing of pgoutbox, as a user's
// database is before pgoutbox's first start.
func NewBare(t *testing.T, ddl string, pgOpts ...pgcluster.Options) *Env {
	t.Helper()
	e := &Env{T: t, PG: pgcluster.New(t, pgOpts...)}
	e.URL = e.PG.URL
	e.Kafka = kafkatest.New(t)
	e.Brokers = e.Kafka.Brokers
	e.Conn = e.Connect()
	if ddl == "" {
		return e
	}
	if _, err := e.Conn.Exec(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	return e
}

// Connect opens another connection to the database, closed when the test
// ends.
func (e *Env) Connect() *pgx.Conn {
	e.T.Helper()
	conn, err := pgx.Connect(context.Background(), e.URL)
	if err != nil {
		e.T.Fatalf("connect: %v", err)
	}
	e.T.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Exec runs sql on the test's connection.
func (e *Env) Exec(sql string) {
	e.T.Helper()
	if _, err := e.Conn.Exec(context.Background(), sql); err != nil {
		e.T.Fatalf("%s: %v", sql, err)
	}
}

// Row is an outbox row of the default table's columns, as Insert writes it.
type Row struct{ AggType, AggID, Type, Payload string }

// NewRow is the row of aggregate type aggType and id aggID, with event
// type typ and payload, a JSON text.
func NewRow(aggType, aggID, typ, payload string) Row {
	return Row{AggType: aggType, AggID: aggID, Type: typ, Payload: payload}
}

// Insert commits one transaction of outbox rows and returns their ids.
func (e *Env) Insert(rows ...Row) []string {
	e.T.Helper()
	ctx := context.Background()
	tx, err := e.Conn.Begin(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, $4) RETURNING id::text`,
			r.AggType, r.AggID, r.Type, r.Payload).Scan(&ids[i]); err != nil {
			e.T.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		e.T.Fatal(err)
	}
	return ids
}

// InsertN commits n rows of aggType, one transaction each, for seven
// aggregates (o-0 to o-6), and returns their ids in commit order.
func (e *Env) InsertN(aggType string, n int) []string {
	e.T.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, e.Insert(NewRow(aggType, fmt.Sprintf("o-%d", i%7), "Placed", fmt.Sprintf(`{"n":%d}`, i)))...)
	}
	return ids
}

// Slot reads the slot's state; a slot that does not exist fails the test.
func (e *Env) Slot(name string) replication.SlotInfo {
	e.T.Helper()
	s, err := replication.SlotStatus(context.Background(), e.Conn, name)
	if err != nil {
		e.T.Fatalf("slot status: %v", err)
	}
	return s
}

// CurrentLSN is the server's current WAL write position.
func (e *Env) CurrentLSN() pglogrepl.LSN {
	e.T.Helper()
	var s string
	if err := e.Conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
		e.T.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		e.T.Fatal(err)
	}
	return lsn
}

// AwaitSlotActive waits until a process streams from the slot, so that
// rows inserted afterwards are in its stream.
func (e *Env) AwaitSlotActive(t *testing.T, slot string) {
	t.Helper()
	Eventually(t, 30*time.Second, "slot "+slot+" active", func() bool {
		var active bool
		err := e.Conn.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		return err == nil && active
	})
}

// EndStreamUntil ends the stream of slot (its WAL sender terminated),
// again each second while cond is false, and fails the test after
// timeout with what the server shows of the slot's senders. Once the
// role may no longer replicate, a sender that was starting when the
// first one ended streams on: only its end stops the stream.
func (e *Env) EndStreamUntil(t *testing.T, slot string, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var ended time.Time
	for !cond() {
		if time.Since(ended) >= time.Second {
			if _, err := e.Conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active`, slot); err != nil {
				t.Fatalf("ending the stream of slot %s: %v", slot, err)
			}
			ended = time.Now()
		}
		if time.Now().After(deadline) {
			var senders string
			e.Conn.QueryRow(ctx, `SELECT coalesce(string_agg(format('pid %s, user %s, state %s, slot active %s', r.pid, r.usename, r.state, s.active), '; '), 'none')
FROM pg_stat_replication r FULL JOIN pg_replication_slots s ON s.active_pid = r.pid AND s.slot_name = $1`, slot).Scan(&senders)
			t.Fatalf("timed out after %s waiting for %s; WAL senders: %s", timeout, what, senders)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AppURL is the database's URL for another role (without a password:
// the tests' servers trust loopback connections).
func (e *Env) AppURL(user string) string {
	u, err := url.Parse(e.URL)
	if err != nil {
		e.T.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

// ServerMajor is the major version (15, 18...) of the server conn is
// connected to, for the assertions whose right answer depends on it.
func ServerMajor(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var v int
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int / 10000").Scan(&v); err != nil {
		t.Fatalf("server version: %v", err)
	}
	return v
}

// StandbyForSlotSync is a synchronous standby that keeps copies of the
// primary's failover slots (PostgreSQL 17 and later).
func StandbyForSlotSync() pgcluster.StandbyOptions {
	return pgcluster.StandbyOptions{Name: "standby1", Slot: "standby1", Synchronous: true,
		Settings: map[string]string{"sync_replication_slots": "on", "hot_standby_feedback": "on"}}
}

// Chaos picks a scenario's size: the short version runs in make test, the
// full one in make chaos (PGOUTBOX_CHAOS=1).
func Chaos[T any](short, full T) T {
	if os.Getenv("PGOUTBOX_CHAOS") != "" {
		return full
	}
	return short
}

// GrantHeartbeatSQL grants role EXECUTE on every pg_logical_emit_message,
// which the heartbeats call: PostgreSQL 17 added a fourth argument (flush),
// so the signature to name differs per version.
func GrantHeartbeatSQL(role string) string {
	return `DO $$DECLARE f regprocedure; BEGIN
FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = 'pg_logical_emit_message' LOOP
EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, ` + "'" + role + "'" + `);
END LOOP; END$$`
}

// AppGrants gives the role app what a relay needs on the default outbox
// and pgoutbox's tables, without REPLICATION or ownership.
var AppGrants = `GRANT SELECT, UPDATE ON outbox TO app; GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox_state TO app;
GRANT SELECT, INSERT, UPDATE ON pgoutbox_dead_letter TO app; GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO app;
` + GrantHeartbeatSQL("app")
