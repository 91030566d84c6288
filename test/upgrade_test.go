package test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/relay"
	"github.com/pgoutbox/pgoutbox/test/testenv"
)

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pgUpgrade runs pg_upgrade from old's data directory into fresh's; both
// must be stopped. It skips the test where the machine has no pg_upgrade
// of the server's version (the npm build of PostgreSQL 18 ships none).
func pgUpgrade(t *testing.T, old, fresh *pgcluster.Cluster, major int) {
	t.Helper()
	bin := os.Getenv("PGOUTBOX_PG_BINDIR")
	if bin == "" {
		bin = "/usr/lib/postgresql/" + strconv.Itoa(major) + "/bin"
	}
	upgrade := filepath.Join(bin, "pg_upgrade")
	if !fileExists(upgrade) || clientMajor(t, upgrade) != major {
		t.Skipf("no pg_upgrade for PostgreSQL %d in %s", major, bin)
	}
	work := filepath.Dir(fresh.Dir) // writable by the server's user
	args := []string{upgrade, "-b", bin, "-B", bin, "-d", old.Dir, "-D", fresh.Dir, "-U", "postgres",
		"--socketdir", work, "-p", strconv.Itoa(freePort(t)), "-P", strconv.Itoa(freePort(t))}
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_upgrade: %v\n%s", err, out)
	}
}

// pg_upgrade gives the cluster a new system identifier and keeps its
// transaction ids and sequences; the slot does not survive (before 17).
// The relay notices the new cluster, says so, loses nothing written
// before or after the upgrade, and sends none of what it had published.
func TestUpgradeIsANewClusterAndLosesNothing(t *testing.T) {
	a := testenv.New(t)
	if a.PG.External() {
		t.Skip("needs throwaway clusters")
	}
	ctx := context.Background()
	major := testenv.ServerMajor(t, a.Conn)
	const topic = "outbox.event.order"
	cfg := a.Config()
	cfg.PollInterval = 20 * time.Millisecond
	r := a.Start(cfg)
	testenv.Eventually(t, 20*time.Second, "streaming", func() bool { return r.Mode() == relay.ModeWAL })
	published := a.InsertN("order", 40)
	testenv.AwaitIDs(t, a.Brokers, topic, published, 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "the floor to pass the events", func() bool {
		var covered bool
		a.Conn.QueryRow(ctx, `SELECT s.floor_xid > (SELECT max(txid) FROM outbox) FROM pgoutbox_state s WHERE pipeline = 'pgoutbox'`).Scan(&covered)
		return covered
	})
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	beforeUpgrade := a.InsertN("order", 20)
	a.Conn.Close(ctx)

	fresh := pgcluster.New(t)
	if err := a.PG.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	pgUpgrade(t, a.PG, fresh, major)
	if err := fresh.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	b := &testenv.Env{T: t, PG: fresh, URL: fresh.URL, Kafka: a.Kafka, Brokers: a.Brokers}
	b.Conn = b.Connect()
	afterUpgrade := b.InsertN("order", 20)

	cfg.Replication.DatabaseURL = b.URL
	rb := b.Start(cfg)
	testenv.AwaitIDs(t, b.Brokers, topic, append(append([]string{}, beforeUpgrade...), afterUpgrade...), 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "streaming after the upgrade", func() bool { return rb.Mode() == relay.ModeWAL })
	late := b.InsertN("order", 10)
	testenv.AwaitIDs(t, b.Brokers, topic, late, 30*time.Second)

	counts := testenv.CountIDs(t, b.Brokers, topic)
	resent := 0
	for _, id := range published {
		if counts[id] > 1 {
			resent++
		}
	}
	var what *string
	b.Conn.QueryRow(ctx, "SELECT cluster_change FROM pgoutbox_state WHERE pipeline = 'pgoutbox'").Scan(&what)
	if what == nil {
		t.Fatal("the upgrade was not recorded as a new cluster")
	}
	t.Logf("published before: %d, sent again: %d; recorded: %s", len(published), resent, *what)
	if resent == len(published) {
		t.Fatal("every event published before the upgrade was sent again")
	}
}
