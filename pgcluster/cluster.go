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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
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

	srv    *server // nil with an external server
	logger *slog.Logger

	mu     sync.Mutex // serializes Stop, Restart and Close
	closed bool

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
	srv := newServer(root, binDir, opts, cred)
	c := &Cluster{Dir: srv.dir, srv: srv, logger: opts.Logger}
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
	srv := c.srv
	// Checked first: a bad setting should not cost an initdb.
	config, err := srv.config()
	if err != nil {
		return err
	}
	if err := srv.prepareDirs(); err != nil {
		return err
	}
	// The watchdog comes first so that even a server left half-started by
	// a failure below is stopped if this process dies before Close.
	if srv.watchdog, err = startWatchdog(srv); err != nil {
		return err
	}
	if err := srv.initdb(ctx); err != nil {
		return err
	}
	if err := srv.writeConfig(config); err != nil {
		return err
	}
	return c.started(srv.startOnFreePort(ctx))
}

// started takes the port the server started on, or its failure.
func (c *Cluster) started(port int, err error) error {
	if err != nil {
		return err
	}
	// Set once: Restart reuses them, and tests read them from other
	// goroutines.
	c.Port = port
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return nil
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
	if err := c.srv.pgctlStop(ctx, mode); err != nil {
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
	running, err := c.srv.running(ctx)
	if err != nil {
		return err
	}
	if running {
		if err := c.srv.pgctlStop(ctx, "fast"); err != nil {
			return err
		}
	}
	// Another process's free-port probe (package freeport binds a port to
	// try it) may hold the port for a moment while the server is down:
	// the start is tried again for a few seconds before that is an error.
	for attempt := 1; ; attempt++ {
		err := c.srv.pgctlStart(ctx, c.Port)
		if err == nil {
			break
		}
		if attempt == restartAttempts || !errors.Is(err, errPortInUse) {
			return err
		}
		c.logger.Debug("port taken while the server was down; retrying", "port", c.Port, "attempt", attempt)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(300 * time.Millisecond):
		}
	}
	c.logger.Info("postgres cluster restarted", "port", c.Port)
	return nil
}

// restartAttempts bounds the starts Restart tries on its port.
const restartAttempts = 10

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
	srv := c.srv
	if srv.watchdog != nil {
		if err := srv.watchdog.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := srv.stopForGood(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(srv.root); err != nil {
		errs = append(errs, fmt.Errorf("pgcluster: removing %s: %w", srv.root, err))
	}
	if len(errs) == 0 {
		c.logger.Info("postgres cluster closed", "port", c.Port)
	}
	return errors.Join(errs...)
}
