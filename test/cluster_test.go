package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
)

// burnXIDs advances the cluster's transaction counter by n, so that its
// transaction ids lie far above those of a fresh cluster.
func (e *env) burnXIDs(n int) {
	e.t.Helper()
	if _, err := e.conn.Exec(context.Background(), fmt.Sprintf(`DO $$ BEGIN
  FOR i IN 1..%d LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$`, n)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) insertN(aggType string, n int) []string {
	e.t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, e.insert(row{aggType, fmt.Sprintf("o-%d", i%7), "Placed", fmt.Sprintf(`{"n":%d}`, i)})...)
	}
	return ids
}

// moveDatabase copies database from to database to as an operator moving
// to a new cluster would: pg_dump and pg_restore where the client can dump
// the server's version; otherwise (PGOUTBOX_PG_BINDIR pointing to a newer
// PostgreSQL, whose server Debian's pg_dump refuses) a logical copy of
// pgoutbox's and the outbox's tables through COPY, with the outbox
// sequence's value, as pg_dump would carry it.
func moveDatabase(t *testing.T, from, to *env) string {
	t.Helper()
	ctx := context.Background()
	dump, restore := findClient("pg_dump"), findClient("pg_restore")
	if dump != "" && restore != "" && clientMajor(t, dump) >= serverMajor(t, from.conn) {
		file := filepath.Join(t.TempDir(), "db.dump")
		if out, err := exec.Command(dump, "-Fc", "-f", file, "-d", from.url).CombinedOutput(); err != nil {
			t.Fatalf("pg_dump: %v\n%s", err, out)
		}
		if out, err := exec.Command(restore, "--exit-on-error", "-d", to.url, file).CombinedOutput(); err != nil {
			t.Fatalf("pg_restore: %v\n%s", err, out)
		}
		return "pg_dump/pg_restore"
	}
	if _, err := migrations.Migrate(ctx, to.conn, migrations.Options{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	for _, table := range []string{"outbox", "pgoutbox_state", "pgoutbox_dead_letter"} {
		to.exec("TRUNCATE " + table)
		r, w := io.Pipe()
		src, dst := from.connect(), to.connect()
		go func() {
			_, err := src.PgConn().CopyTo(ctx, w, "COPY "+table+" TO STDOUT")
			w.CloseWithError(err)
		}()
		if _, err := dst.PgConn().CopyFrom(ctx, r, "COPY "+table+" FROM STDIN"); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
	}
	var last int64
	if err := from.conn.QueryRow(ctx, "SELECT last_value FROM outbox_seq_seq").Scan(&last); err != nil {
		t.Fatal(err)
	}
	to.exec(fmt.Sprintf("SELECT setval('outbox_seq_seq', %d)", last))
	to.exec("CREATE PUBLICATION pgoutbox FOR TABLE outbox")
	return "a logical copy through COPY"
}

func (e *env) exec(sql string) {
	e.t.Helper()
	if _, err := e.conn.Exec(context.Background(), sql); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// findClient finds a PostgreSQL client program beside the test servers'
// binaries, or on PATH.
func findClient(name string) string {
	if dir := os.Getenv("PGOUTBOX_PG_BINDIR"); dir != "" {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	p, _ := exec.LookPath(name)
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func clientMajor(t *testing.T, bin string) int {
	t.Helper()
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	m := regexp.MustCompile(`(\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version: %q", bin, out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// serverMajor is the major version (15, 18...) of the server conn is
// connected to, for the assertions whose right answer depends on it.
func serverMajor(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var v int
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int / 10000").Scan(&v); err != nil {
		t.Fatalf("server version: %v", err)
	}
	return v
}

// countIDs reads the whole topic and counts the records of each event id.
func countIDs(t *testing.T, brokers []string, topic string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, r := range drain(t, brokers, topic, 0) {
		n[decodeEvent(t, r).ID]++
	}
	return n
}

// The user's move to a new cluster: the relay runs in auto mode on cluster
// A, whose transaction ids are far above those of a fresh cluster; it
// stops; the database is dumped and restored into a new cluster B; the
// application writes events on B while the relay is down; the relay starts
// on B with the same flags. Every event written on B, before and after the
// start, arrives; the events A published are not all sent again; a WARN
// line says a new cluster was seen, and status shows it.
func TestMoveToNewClusterPublishesEverythingWrittenThere(t *testing.T) {
	a := newEnv(t)
	ctx := context.Background()
	a.burnXIDs(5000)
	const topic = "outbox.event.order"

	p := a.runProcess(t, "--mode", "auto")
	before := a.insertN("order", 100)
	awaitIDs(t, a.brokers, topic, before, 30*time.Second)
	eventually(t, 20*time.Second, "streaming", func() bool {
		var mode string
		a.conn.QueryRow(ctx, "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode)
		return mode == "wal"
	})
	onA := append(before, a.insertN("order", 200)...)
	awaitIDs(t, a.brokers, topic, onA, 30*time.Second)
	// A relay that ran a while: its published floor covers what it sent.
	eventually(t, 30*time.Second, "the floor to pass A's events", func() bool {
		var covered bool
		a.conn.QueryRow(ctx, `SELECT s.floor_xid > (SELECT max(txid) FROM outbox) FROM pgoutbox_state s WHERE pipeline = 'pgoutbox'`).Scan(&covered)
		return covered
	})
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("relay on A: %v\n%s", err, p.out)
	}
	var floorA uint64
	if err := a.conn.QueryRow(ctx, "SELECT floor_xid::text::bigint FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&floorA); err != nil {
		t.Fatalf("the floor saved on A: %v", err)
	}

	pgB := pgcluster.New(t)
	b := &env{t: t, pg: pgB, url: pgB.URL, kafka: a.kafka, brokers: a.brokers}
	b.conn = b.connect()
	how := moveDatabase(t, a, b)
	if _, err := migrations.Migrate(ctx, b.conn, migrations.Options{}); err != nil {
		t.Fatalf("migrate B: %v", err)
	}

	// Written on B while the relay is down: B's transaction ids are below
	// the floor saved on A.
	downOnB := b.insertN("order", 150)
	var xidB uint64
	b.conn.QueryRow(ctx, "SELECT max(txid::text::bigint) FROM outbox WHERE id = ANY($1::uuid[])", downOnB).Scan(&xidB)
	if xidB >= floorA {
		t.Fatalf("the new cluster's transaction ids (up to %d) are not below A's floor %d: the test does not reproduce the move", xidB, floorA)
	}
	t.Logf("moved with %s; A's floor xid %d, B's transaction ids up to %d", how, floorA, xidB)

	pb := b.runProcess(t, "--mode", "auto")
	afterStart := b.insertN("order", 100)
	awaitIDs(t, b.brokers, topic, append(append([]string{}, downOnB...), afterStart...), 60*time.Second)
	eventually(t, 30*time.Second, "streaming on B", func() bool {
		var mode string
		b.conn.QueryRow(ctx, "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode)
		return mode == "wal"
	})
	late := b.insertN("order", 20)
	awaitIDs(t, b.brokers, topic, late, 30*time.Second)

	counts := countIDs(t, b.brokers, topic)
	resent := 0
	for _, id := range onA {
		if counts[id] > 1 {
			resent++
		}
	}
	dupB := 0
	for _, id := range append(append(append([]string{}, downOnB...), afterStart...), late...) {
		if counts[id] > 1 {
			dupB++
		}
	}
	t.Logf("events published on A: %d, sent again from B: %d; events written on B: %d, all arrived, %d of them twice",
		len(onA), resent, len(downOnB)+len(afterStart)+len(late), dupB)
	if resent == len(onA) {
		t.Fatalf("every event published on A was sent again from B")
	}

	out := pb.out.String()
	if !strings.Contains(out, `"level":"WARN","msg":"a new cluster`) {
		t.Fatalf("no WARN line about the new cluster:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "a new cluster") {
			t.Logf("log: %s", line)
		}
	}
	st, _ := b.status(t)
	if st.ClusterChange == nil || st.ClusterChange.Previous == nil || st.Cluster == nil || *st.ClusterChange.Previous == *st.Cluster {
		raw, _ := json.Marshal(st)
		t.Fatalf("status does not show the new cluster: %s", raw)
	}
	t.Logf("status: cluster %d, changed %s: %s", *st.Cluster, st.ClusterChange.At.Format(time.RFC3339), st.ClusterChange.What)
}

// Rows the relay had not published on the old cluster keep their old
// transaction ids, above every id of the new cluster: the handoff on the
// new cluster must not end before they are published, even when polling
// reads them a few at a time and nothing else is pending below the new
// slot's xmax. State saved by an older pgoutbox (no system identifier, no
// sequence value with the floor) is recognised by its floor above the
// cluster's next transaction id, and then everything unpublished is sent.
func TestMoveToNewClusterPublishesRowsLeftUnpublished(t *testing.T) {
	for _, tc := range []struct {
		name     string
		oldState bool
	}{{"floor with sequence", false}, {"state from an older pgoutbox", true}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newEnv(t)
			ctx := context.Background()
			a.burnXIDs(3000)
			const topic = "outbox.event.order"
			cfg := a.config()
			cfg.PollInterval = 20 * time.Millisecond
			cfg.Poll.BatchSize = 5
			r := a.start(cfg)
			eventually(t, 20*time.Second, "streaming on A", func() bool { return r.Mode() == relay.ModeWAL })
			published := a.insertN("order", 40)
			awaitIDs(t, a.brokers, topic, published, 30*time.Second)
			eventually(t, 30*time.Second, "the floor to pass A's events", func() bool {
				var covered bool
				a.conn.QueryRow(ctx, `SELECT s.floor_xid > (SELECT max(txid) FROM outbox) FROM pgoutbox_state s WHERE pipeline = 'pgoutbox'`).Scan(&covered)
				return covered && r.Mode() == relay.ModeWAL
			})
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			leftOnA := a.insertN("order", 30) // never published on A

			pgB := pgcluster.New(t)
			b := &env{t: t, pg: pgB, url: pgB.URL, kafka: a.kafka, brokers: a.brokers}
			b.conn = b.connect()
			moveDatabase(t, a, b)
			if _, err := migrations.Migrate(ctx, b.conn, migrations.Options{}); err != nil {
				t.Fatalf("migrate B: %v", err)
			}
			if tc.oldState {
				b.exec("UPDATE pgoutbox_state SET system_identifier = NULL, floor_seq = NULL")
			}
			cfg.Replication.DatabaseURL = b.url
			rb := b.start(cfg)
			awaitIDs(t, b.brokers, topic, leftOnA, 30*time.Second)
			eventually(t, 30*time.Second, "streaming on B", func() bool { return rb.Mode() == relay.ModeWAL })
			after := b.insertN("order", 10)
			awaitIDs(t, b.brokers, topic, after, 30*time.Second)

			counts := countIDs(t, b.brokers, topic)
			resent := 0
			for _, id := range published {
				if counts[id] > 1 {
					resent++
				}
			}
			t.Logf("published on A: %d, sent again from B: %d", len(published), resent)
			var what string
			b.conn.QueryRow(ctx, "SELECT cluster_change FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&what)
			t.Logf("recorded: %s", what)
			if tc.oldState {
				if resent != len(published) || !strings.Contains(what, "every unpublished row") {
					t.Fatalf("state without a sequence value: %d of %d sent again, recorded %q; want all, said so", resent, len(published), what)
				}
			} else if resent == len(published) {
				t.Fatal("every event published on A was sent again")
			}
		})
	}
}
