// Package pgcluster runs throwaway PostgreSQL clusters from the PostgreSQL
// binaries installed on the machine, for tests, `pgoutbox demo` and
// `pgoutbox bench`.
//
// A cluster lives in its own temporary directory, listens on a free loopback
// port with trust authentication, and has wal_level=logical unless asked
// otherwise. When the process runs as root, which PostgreSQL refuses, the
// server runs as the "postgres" user.
//
// Close stops the server and removes the directory. So that no server
// outlives its process when Close is never reached (a crash, a SIGKILL, a
// test binary that times out), each cluster also has a watchdog: a small
// shell process that waits for the end of a pipe whose other end only this
// process holds. When the process exits, however it exits, the pipe closes
// and the watchdog stops the server (immediate mode) and removes the
// directory. Close ends the watchdog first.
//
// For tests, New gives a test its own cluster and NewDatabase gives it a
// fresh database on one cluster shared by the test binary.
// PGOUTBOX_TEST_DATABASE_URL points both at an existing server instead.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Options configure a cluster. The zero value is a test cluster.
type Options struct {
	// WALLevel is the wal_level setting; default "logical".
	WALLevel string
	// Settings are extra server settings, name to value, applied after the
	// defaults, so they can override them. For example
	// {"max_slot_wal_keep_size": "1MB"}.
	Settings map[string]string
	// BinDir holds initdb, pg_ctl and postgres. Default: the directory in
	// PGOUTBOX_PG_BINDIR, else the highest version in
	// /usr/lib/postgresql/*/bin, else the directory of initdb on PATH.
	BinDir string
	// Fsync keeps fsync and full_page_writes on, for benchmarks whose
	// numbers must mean something. By default both are off, which is
	// safe for a throwaway cluster that never survives an OS crash.
	// synchronous_commit stays on either way, so commits behave as in
	// production.
	Fsync bool
	// Logger receives the cluster's lifecycle events; default: discarded.
	Logger *slog.Logger
}

// ErrExternalServer is returned by Stop and Restart of a Cluster from New
// when PGOUTBOX_TEST_DATABASE_URL points the tests at an existing server,
// which pgtest must not stop. Tests that need them skip in that case only.
var ErrExternalServer = errors.New("pgcluster: stopping and restarting need a throwaway cluster, but " +
	DatabaseURLEnv + " points the tests at an existing server")

// Cluster is a throwaway PostgreSQL cluster, or, from New with
// PGOUTBOX_TEST_DATABASE_URL set, a database on an existing server.
type Cluster struct {
	// URL connects as the superuser "postgres" to the database "postgres",
	// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable. With an
	// external server, it names the database created for the test.
	URL string
	// Port is the TCP port on 127.0.0.1, the same across restarts.
	Port int
	// Dir is the data directory; empty with an external server.
	Dir string

	root    string // holds Dir, the socket directory and the server log
	sockDir string
	logFile string
	binDir  string
	opts    Options
	cred    *syscall.Credential // the postgres user's, when running as root
	logger  *slog.Logger

	mu       sync.Mutex // serializes Stop, Restart and Close
	closed   bool
	watchdog *watchdog

	// With an external server: the URL of the server as given, and the
	// database created for this Cluster, dropped by Close.
	serverURL string
	database  string
}

// stopTimeout bounds how long Close waits for the server to stop, since it
// runs without a context.
const stopTimeout = time.Minute

// Start initializes a new cluster in a fresh temporary directory and starts
// it on a free port. On failure nothing is left running or on disk, and the
// error includes the end of the server log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.WALLevel == "" {
		opts.WALLevel = "logical"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	binDir, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	cred, err := Credential()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: creating the cluster directory: %w", err)
	}
	c := &Cluster{
		Dir:     filepath.Join(root, "data"),
		root:    root,
		sockDir: filepath.Join(root, "sock"),
		logFile: filepath.Join(root, "server.log"),
		binDir:  binDir,
		opts:    opts,
		cred:    cred,
		logger:  opts.Logger,
	}
	if err := c.init(ctx); err != nil {
		if cerr := c.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	c.logger.Info("postgres cluster started", "url", c.URL, "dir", c.Dir, "bin_dir", binDir)
	return c, nil
}

func (c *Cluster) init(ctx context.Context) error {
	// Checked first: a bad setting should not cost an initdb.
	config, err := c.config()
	if err != nil {
		return err
	}
	if err := c.prepareDirs(); err != nil {
		return err
	}
	// The watchdog comes first so that even a server left half-started by
	// a failure below is stopped if this process dies before Close.
	w, err := startWatchdog(c)
	if err != nil {
		return err
	}
	c.watchdog = w
	if err := c.initdb(ctx); err != nil {
		return err
	}
	if err := c.writeConfig(config); err != nil {
		return err
	}
	return c.startOnFreePort(ctx)
}

// DatabaseURL returns the URL of database db on the same server, as the same
// user.
func (c *Cluster) DatabaseURL(db string) string {
	if c.serverURL != "" {
		return withDatabase(c.serverURL, db)
	}
	return withDatabase(c.URL, db)
}

// withDatabase returns base with its database replaced by db. base is a URL
// made here, or the external server's, checked by New.
func withDatabase(base, db string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(fmt.Sprintf("pgcluster: parsing %q: %v", base, err))
	}
	u.Path = "/" + db
	u.RawPath = ""
	return u.String()
}

// CreateDatabase creates database name on the server and returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	admin := c.URL
	if c.serverURL != "" {
		admin = c.serverURL
	}
	if err := createDatabase(ctx, admin, name); err != nil {
		return "", err
	}
	return c.DatabaseURL(name), nil
}

// External reports whether the Cluster is a database on an existing server
// (PGOUTBOX_TEST_DATABASE_URL), which cannot be stopped or restarted.
func (c *Cluster) External() bool { return c.serverURL != "" }

// Stop stops the server with pg_ctl's mode "fast" (disconnect clients, clean
// shutdown), "immediate" (no shutdown checkpoint: recovery runs on the next
// start, as after a crash) or "smart". The data is kept for Restart.
func (c *Cluster) Stop(ctx context.Context, mode string) error {
	switch mode {
	case "fast", "immediate", "smart":
	default:
		return fmt.Errorf("pgcluster: unknown stop mode %q, want fast, immediate or smart", mode)
	}
	if c.External() {
		return ErrExternalServer
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("pgcluster: Stop on a closed cluster")
	}
	if err := c.pgctlStop(ctx, mode); err != nil {
		return err
	}
	c.logger.Info("postgres cluster stopped", "port", c.Port, "mode", mode)
	return nil
}

// Restart starts the server again on the same port, with the same data and
// settings. A running server is stopped (fast) first.
func (c *Cluster) Restart(ctx context.Context) error {
	if c.External() {
		return ErrExternalServer
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("pgcluster: Restart on a closed cluster")
	}
	running, err := c.running(ctx)
	if err != nil {
		return err
	}
	if running {
		if err := c.pgctlStop(ctx, "fast"); err != nil {
			return err
		}
	}
	if err := c.pgctlStart(ctx, c.Port); err != nil {
		return err
	}
	c.logger.Info("postgres cluster restarted", "port", c.Port)
	return nil
}

// Close stops the server (immediate mode) and removes its directory; with
// an external server it drops the database. Calling it again does nothing.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true

	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if c.External() {
		return dropDatabase(ctx, c.serverURL, c.database)
	}

	var errs []error
	// The watchdog goes first: once the directory is removed, its name
	// could be reused by another cluster, which the watchdog must not
	// remove when this process exits.
	if c.watchdog != nil {
		if err := c.watchdog.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.stopForGood(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.root); err != nil {
		errs = append(errs, fmt.Errorf("pgcluster: removing %s: %w", c.root, err))
	}
	if len(errs) == 0 {
		c.logger.Info("postgres cluster closed", "port", c.Port)
	}
	return errors.Join(errs...)
}

// stopForGood stops the server if it runs, falling back to SIGKILL of the
// postmaster if pg_ctl fails, so that Close never leaves a server behind.
func (c *Cluster) stopForGood(ctx context.Context) error {
	pid, err := c.postmasterPID()
	if err != nil || pid == 0 {
		return err // not started, or stopped already
	}
	stopErr := c.pgctlStop(ctx, "immediate")
	if stopErr == nil {
		// pg_ctl returns once postmaster.pid is gone, which the
		// postmaster removes just before it exits; wait for the exit so
		// that Close leaves no process behind.
		waitExit(ctx, pid)
		return nil
	}
	if alive(pid) {
		// Backends exit on their own once the postmaster is gone.
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return errors.Join(stopErr, fmt.Errorf("pgcluster: killing postmaster %d: %w", pid, err))
		}
	}
	return nil
}

// postmasterPID reads the first line of postmaster.pid; 0 if there is none.
func (c *Cluster) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgcluster: reading postmaster.pid: %w", err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(string(line))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: postmaster.pid starts with %q: %w", line, err)
	}
	return pid, nil
}

// alive reports whether process pid exists and has not exited: a zombie
// waiting for init to reap it counts as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // no /proc: trust kill
	}
	// The state follows the command name, which is in parentheses and
	// may itself contain them.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// waitExit waits, briefly, until process pid has exited.
func waitExit(ctx context.Context, pid int) {
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// running asks pg_ctl whether the server runs: it also answers correctly
// after the postmaster was killed and left a stale postmaster.pid.
func (c *Cluster) running(ctx context.Context) (bool, error) {
	cmd := c.command(ctx, "pg_ctl", "status", "-D", c.Dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return true, nil
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() == 3 { // documented: not running
		return false, nil
	}
	return false, fmt.Errorf("pgcluster: pg_ctl status: %w\n%s", err, out)
}
