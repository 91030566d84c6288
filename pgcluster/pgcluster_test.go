package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		helperProcess()
		return
	}
	Main(m)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func show(t *testing.T, conn *pgx.Conn, setting string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(context.Background(), "SHOW "+setting).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", setting, err)
	}
	return v
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	c := New(t)
	conn := connect(t, c.URL)
	if got := show(t, conn, "wal_level"); got != "logical" {
		t.Errorf("wal_level = %q, want logical", got)
	}
	if c.External() {
		return
	}
	if !strings.HasPrefix(c.URL, "postgres://postgres@127.0.0.1:") || !strings.HasSuffix(c.URL, "/postgres?sslmode=disable") {
		t.Errorf("URL = %q, want postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable", c.URL)
	}
	for setting, want := range map[string]string{
		"fsync": "off", "full_page_writes": "off", "synchronous_commit": "on",
		"max_replication_slots": "20", "max_wal_senders": "20",
	} {
		if got := show(t, conn, setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
}

func TestOptionsAreHonoured(t *testing.T) {
	t.Parallel()
	if os.Getenv(DatabaseURLEnv) != "" {
		t.Skipf("%s points at an existing server, whose settings are its own", DatabaseURLEnv)
	}
	c := New(t, Options{
		WALLevel: "replica",
		Fsync:    true,
		Settings: map[string]string{"max_slot_wal_keep_size": "1MB", "application_name": `it's a \ test`},
	})
	conn := connect(t, c.URL)
	for setting, want := range map[string]string{
		"wal_level": "replica", "fsync": "on", "full_page_writes": "on",
		"max_slot_wal_keep_size": "1MB", "application_name": `it's a \ test`,
	} {
		if got := show(t, conn, setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
}

func TestBadSettings(t *testing.T) {
	t.Parallel()
	for _, settings := range []map[string]string{
		{"port": "5432"},
		{"bad name": "x"},
		{"work_mem": "1MB\nfsync = on"},
	} {
		c, err := Start(context.Background(), Options{Settings: settings})
		if err == nil {
			c.Close()
			t.Errorf("Start with settings %q succeeded, want an error", settings)
		}
	}
}

func TestReplicationConnection(t *testing.T) {
	t.Parallel()
	c := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, c.URL+"&replication=database")
	if err != nil {
		t.Fatalf("replication connection: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll(); err != nil {
		t.Fatalf("IDENTIFY_SYSTEM: %v", err)
	}
}

func TestStopRestartKeepsData(t *testing.T) {
	t.Parallel()
	c := New(t)
	ctx := context.Background()
	if c.External() {
		if err := c.Stop(ctx, "immediate"); !errors.Is(err, ErrExternalServer) {
			t.Fatalf("Stop on an external server: %v, want ErrExternalServer", err)
		}
		t.Skipf("%s points at an existing server, which pgtest does not stop", DatabaseURLEnv)
	}
	conn := connect(t, c.URL)
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before')"); err != nil {
		t.Fatal(err)
	}
	port := c.Port
	if err := c.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Port != port {
		t.Fatalf("restarted on port %d, want %d", c.Port, port)
	}
	// Another process's free-port probe holding the port for a moment
	// while the server is down: Restart waits it out.
	if err := c.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(time.Second, func() { ln.Close() })
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("Restart while the port was held a second: %v", err)
	}
	// Restart of a running server restarts it.
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := connect(t, c.URL).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "before" {
		t.Fatalf("after restart: %q, %v; want the row written before", v, err)
	}
	if err := c.Stop(ctx, "slow"); err == nil {
		t.Fatal("Stop with an unknown mode succeeded")
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	t.Parallel()
	c, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := c.srv.postmasterPID()
	if err != nil || pid == 0 {
		t.Fatalf("postmaster pid %d, %v", pid, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory after Close: %v, want it gone", err)
	}
	if _, err := os.Stat(c.srv.root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory after Close: %v, want it gone", err)
	}
	if alive(pid) {
		t.Errorf("postmaster %d still runs after Close", pid)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Restart(context.Background()); err == nil {
		t.Error("Restart after Close succeeded")
	}
}

func TestDatabases(t *testing.T) {
	t.Parallel()
	c := New(t)
	ctx := context.Background()
	url, err := c.CreateDatabase(ctx, "other db")
	if err != nil {
		t.Fatal(err)
	}
	if url != c.DatabaseURL("other db") {
		t.Errorf("CreateDatabase returned %q, DatabaseURL %q", url, c.DatabaseURL("other db"))
	}
	var name string
	if err := connect(t, url).QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil || name != "other db" {
		t.Fatalf("connected to %q (%v), want other db", name, err)
	}
	if !c.External() {
		// Removed with the cluster; an external server's is not, so
		// only a throwaway cluster gets a fixed name.
		return
	}
	if err := dropDatabase(ctx, c.serverURL, "other db"); err != nil {
		t.Fatal(err)
	}
}

func TestNewDatabase(t *testing.T) {
	t.Parallel()
	var urls []string
	t.Run("create", func(t *testing.T) {
		a, b := NewDatabase(t), NewDatabase(t)
		if a == b {
			t.Fatalf("two NewDatabase calls returned the same URL %s", a)
		}
		for _, url := range []string{a, b} {
			conn := connect(t, url)
			if got := show(t, conn, "wal_level"); got != "logical" {
				t.Errorf("wal_level = %q, want logical", got)
			}
			// A slot left behind must not stop the database from
			// being dropped.
			if _, err := conn.Exec(context.Background(),
				"SELECT pg_create_logical_replication_slot('left_' || substr(md5(current_database()), 1, 8), 'pgoutput')"); err != nil {
				t.Fatal(err)
			}
		}
		urls = []string{a, b}
	})

	admin := os.Getenv(DatabaseURLEnv)
	if admin == "" {
		admin = shared.cluster.URL
	}
	conn := connect(t, admin)
	for _, url := range urls {
		name := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
		var exists bool
		if err := conn.QueryRow(context.Background(),
			"SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Errorf("database %s still exists after its test ended", name)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	dirs := []string{"9.6", "17", "15", "notaversion", "10"}
	best := ""
	for _, d := range dirs {
		if best == "" || compareVersions(d, best) > 0 {
			best = d
		}
	}
	if best != "17" {
		t.Fatalf("highest version %q, want 17", best)
	}
}

func TestDatabaseName(t *testing.T) {
	name := databaseName(t)
	if !strings.HasPrefix(name, "pgtest_testdatabasename_") || len(name) > 63 {
		t.Fatalf("databaseName = %q", name)
	}
	long := databaseName(&namedTB{TB: t, name: strings.Repeat("Sub/Test-Ñame ", 20)})
	if len(long) > 63 {
		t.Fatalf("databaseName of a long test name is %d bytes: %q", len(long), long)
	}
}

type namedTB struct {
	testing.TB
	name string
}

func (n *namedTB) Name() string { return n.name }

// helperEnv makes the test binary, run again as a child, start a cluster,
// print its directory and postmaster pid, and exit without closing it: what
// a crashed demo or a timed-out test does.
const helperEnv = "PGTEST_HELPER_PROCESS"

func helperProcess() {
	c, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pid, _ := c.srv.postmasterPID()
	fmt.Printf("%s %d\n", c.srv.root, pid)
	os.Exit(0)
}

func TestWatchdogCleansUpAfterExit(t *testing.T) {
	t.Parallel()
	if os.Getenv(DatabaseURLEnv) != "" {
		t.Skipf("%s is set: no cluster is started", DatabaseURLEnv)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	var root string
	var pid int
	if _, err := fmt.Sscan(string(out), &root, &pid); err != nil {
		t.Fatalf("helper printed %q: %v", out, err)
	}
	if !strings.HasPrefix(filepath.Base(root), "pgtest-") {
		t.Fatalf("helper printed directory %q", root)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, statErr := os.Stat(root)
		if errors.Is(statErr, os.ErrNotExist) && !alive(pid) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	os.RemoveAll(root)
	t.Fatalf("30 s after the process exited, postmaster %d alive: %v; directory %s exists", pid, alive(pid), root)
}

// A synchronous standby receives every commit, survives its primary's
// crash, and accepts writes once promoted.
func TestStandbyPromote(t *testing.T) {
	ctx := context.Background()
	primary := New(t)
	if primary.External() {
		t.Skip("a standby needs the throwaway cluster")
	}
	standby := NewStandby(t, primary, StandbyOptions{Slot: "standby_slot", Synchronous: true})
	pc := connect(t, primary.URL)
	if _, err := pc.Exec(ctx, "CREATE TABLE t (n int); INSERT INTO t SELECT generate_series(1, 100)"); err != nil {
		t.Fatal(err)
	}
	sc := connect(t, standby.URL)
	var inRecovery bool
	var n int
	// remote_apply is not asked for: the commit was flushed on the
	// standby before it returned, and is applied a moment later (until
	// then even the table is missing there).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := sc.QueryRow(ctx, "SELECT pg_is_in_recovery(), (SELECT count(*) FROM t)").Scan(&inRecovery, &n)
		if err == nil && n == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not apply the primary's commit within 30 s: %d rows, %v", n, err)
		}
	}
	if !inRecovery {
		t.Fatal("the standby is not in recovery")
	}
	var slotActive bool
	if err := pc.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = 'standby_slot'").Scan(&slotActive); err != nil || !slotActive {
		t.Fatalf("the standby's slot on the primary: active %t, %v", slotActive, err)
	}

	if err := primary.Stop(ctx, "immediate"); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	sc = connect(t, standby.URL)
	if _, err := sc.Exec(ctx, "INSERT INTO t VALUES (101)"); err != nil {
		t.Fatalf("writing to the promoted standby: %v", err)
	}
	if err := sc.QueryRow(ctx, "SELECT pg_is_in_recovery(), (SELECT count(*) FROM t)").Scan(&inRecovery, &n); err != nil {
		t.Fatal(err)
	}
	if inRecovery || n != 101 {
		t.Fatalf("after promotion: in recovery %t, %d rows, want false and 101", inRecovery, n)
	}
}
