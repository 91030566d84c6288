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

	"github.com/pgoutbox/pgoutbox/migrations"
	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// burnXIDs advances the cluster's transaction counter by n, so that its
// transaction ids lie far above those of a fresh cluster.
func burnXIDs(e *testenv.Env, n int) {
	e.T.Helper()
	if _, err := e.Conn.Exec(context.Background(), fmt.Sprintf(`DO $$ BEGIN
  FOR i IN 1..%d LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$`, n)); err != nil {
		e.T.Fatal(err)
	}
}

// moveDatabase copies database from to database to as an operator moving
// to a new cluster would: pg_dump and pg_restore where the client can dump
// the server's version; otherwise (PGOUTBOX_PG_BINDIR pointing to a newer
// PostgreSQL, whose server Debian's pg_dump refuses) a logical copy of
// pgoutbox's and the outbox's tables through COPY, with the outbox
// sequence's value, as pg_dump would carry it.
func moveDatabase(t *testing.T, from, to *testenv.Env) string {
	t.Helper()
	ctx := context.Background()
	dump, restore := findClient("pg_dump"), findClient("pg_restore")
	if dump != "" && restore != "" && clientMajor(t, dump) >= testenv.ServerMajor(t, from.Conn) {
		file := filepath.Join(t.TempDir(), "db.dump")
		if out, err := exec.Command(dump, "-Fc", "-f", file, "-d", from.URL).CombinedOutput(); err != nil {
			t.Fatalf("pg_dump: %v\n%s", err, out)
		}
		if out, err := exec.Command(restore, "--exit-on-error", "-d", to.URL, file).CombinedOutput(); err != nil {
			t.Fatalf("pg_restore: %v\n%s", err, out)
		}
		return "pg_dump/pg_restore"
	}
	if _, err := migrations.Migrate(ctx, to.Conn, migrations.Options{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	for _, table := range []string{"outbox", "pgoutbox_state", "pgoutbox_dead_letter"} {
		to.Exec("TRUNCATE " + table)
		r, w := io.Pipe()
		src, dst := from.Connect(), to.Connect()
		go func() {
			_, err := src.PgConn().CopyTo(ctx, w, "COPY "+table+" TO STDOUT")
			w.CloseWithError(err)
		}()
		if _, err := dst.PgConn().CopyFrom(ctx, r, "COPY "+table+" FROM STDIN"); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
	}
	var last int64
	if err := from.Conn.QueryRow(ctx, "SELECT last_value FROM outbox_seq_seq").Scan(&last); err != nil {
		t.Fatal(err)
	}
	to.Exec(fmt.Sprintf("SELECT setval('outbox_seq_seq', %d)", last))
	to.Exec("CREATE PUBLICATION pgoutbox FOR TABLE outbox")
	return "a logical copy through COPY"
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

// The user's move to a new cluster: the relay runs in auto mode on cluster
// A, whose transaction ids are far above those of a fresh cluster; it
// stops; the database is dumped and restored into a new cluster B; the
// application writes events on B while the relay is down; the relay starts
// on B with the same flags. Every event written on B, before and after the
// start, arrives; the events A published are not all sent again; a WARN
// line says a new cluster was seen, and status shows it.
func TestMoveToNewClusterPublishesEverythingWrittenThere(t *testing.T) {
	a := testenv.New(t)
	ctx := context.Background()
	burnXIDs(a, 5000)
	const topic = "outbox.event.order"

	p := a.Run(t, "--mode", "auto")
	before := a.InsertN("order", 100)
	testenv.AwaitIDs(t, a.Brokers, topic, before, 30*time.Second)
	testenv.Eventually(t, 20*time.Second, "streaming", func() bool {
		var mode string
		a.Conn.QueryRow(ctx, "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode)
		return mode == "wal"
	})
	onA := append(before, a.InsertN("order", 200)...)
	testenv.AwaitIDs(t, a.Brokers, topic, onA, 30*time.Second)
	// A relay that ran a while: its published floor covers what it sent.
	testenv.Eventually(t, 30*time.Second, "the floor to pass A's events", func() bool {
		var covered bool
		a.Conn.QueryRow(ctx, `SELECT s.floor_xid > (SELECT max(txid) FROM outbox) FROM pgoutbox_state s WHERE pipeline = 'pgoutbox'`).Scan(&covered)
		return covered
	})
	if err := p.Signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("relay on A: %v\n%s", err, p.Out)
	}
	var floorA uint64
	if err := a.Conn.QueryRow(ctx, "SELECT floor_xid::text::bigint FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&floorA); err != nil {
		t.Fatalf("the floor saved on A: %v", err)
	}

	pgB := pgcluster.New(t)
	b := &testenv.Env{T: t, PG: pgB, URL: pgB.URL, Kafka: a.Kafka, Brokers: a.Brokers}
	b.Conn = b.Connect()
	how := moveDatabase(t, a, b)
	if _, err := migrations.Migrate(ctx, b.Conn, migrations.Options{}); err != nil {
		t.Fatalf("migrate B: %v", err)
	}

	// Written on B while the relay is down: B's transaction ids are below
	// the floor saved on A.
	downOnB := b.InsertN("order", 150)
	var xidB uint64
	b.Conn.QueryRow(ctx, "SELECT max(txid::text::bigint) FROM outbox WHERE id = ANY($1::uuid[])", downOnB).Scan(&xidB)
	if xidB >= floorA {
		t.Fatalf("the new cluster's transaction ids (up to %d) are not below A's floor %d: the test does not reproduce the move", xidB, floorA)
	}
	t.Logf("moved with %s; A's floor xid %d, B's transaction ids up to %d", how, floorA, xidB)

	pb := b.Run(t, "--mode", "auto")
	afterStart := b.InsertN("order", 100)
	testenv.AwaitIDs(t, b.Brokers, topic, append(append([]string{}, downOnB...), afterStart...), 60*time.Second)
	testenv.Eventually(t, 30*time.Second, "streaming on B", func() bool {
		var mode string
		b.Conn.QueryRow(ctx, "SELECT mode FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&mode)
		return mode == "wal"
	})
	late := b.InsertN("order", 20)
	testenv.AwaitIDs(t, b.Brokers, topic, late, 30*time.Second)

	counts := testenv.CountIDs(t, b.Brokers, topic)
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

	out := pb.Out.String()
	if !strings.Contains(out, `"level":"WARN","msg":"a new cluster`) {
		t.Fatalf("no WARN line about the new cluster:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "a new cluster") {
			t.Logf("log: %s", line)
		}
	}
	st, _ := b.Status(t)
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
			a := testenv.New(t)
			ctx := context.Background()
			burnXIDs(a, 3000)
			const topic = "outbox.event.order"
			cfg := a.Config()
			cfg.PollInterval = 20 * time.Millisecond
			cfg.Poll.BatchSize = 5
			r := a.Start(cfg)
			testenv.Eventually(t, 20*time.Second, "streaming on A", func() bool { return r.Mode() == relay.ModeWAL })
			published := a.InsertN("order", 40)
			testenv.AwaitIDs(t, a.Brokers, topic, published, 30*time.Second)
			testenv.Eventually(t, 30*time.Second, "the floor to pass A's events", func() bool {
				var covered bool
				a.Conn.QueryRow(ctx, `SELECT s.floor_xid > (SELECT max(txid) FROM outbox) FROM pgoutbox_state s WHERE pipeline = 'pgoutbox'`).Scan(&covered)
				return covered && r.Mode() == relay.ModeWAL
			})
			if err := r.Stop(); err != nil {
				t.Fatal(err)
			}
			leftOnA := a.InsertN("order", 30) // never published on A

			pgB := pgcluster.New(t)
			b := &testenv.Env{T: t, PG: pgB, URL: pgB.URL, Kafka: a.Kafka, Brokers: a.Brokers}
			b.Conn = b.Connect()
			moveDatabase(t, a, b)
			if _, err := migrations.Migrate(ctx, b.Conn, migrations.Options{}); err != nil {
				t.Fatalf("migrate B: %v", err)
			}
			if tc.oldState {
				b.Exec("UPDATE pgoutbox_state SET system_identifier = NULL, floor_seq = NULL")
			}
			cfg.Replication.DatabaseURL = b.URL
			rb := b.Start(cfg)
			testenv.AwaitIDs(t, b.Brokers, topic, leftOnA, 30*time.Second)
			testenv.Eventually(t, 30*time.Second, "streaming on B", func() bool { return rb.Mode() == relay.ModeWAL })
			after := b.InsertN("order", 10)
			testenv.AwaitIDs(t, b.Brokers, topic, after, 30*time.Second)

			counts := testenv.CountIDs(t, b.Brokers, topic)
			resent := 0
			for _, id := range published {
				if counts[id] > 1 {
					resent++
				}
			}
			t.Logf("published on A: %d, sent again from B: %d", len(published), resent)
			var what string
			b.Conn.QueryRow(ctx, "SELECT cluster_change FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&what)
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
