package pgcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TB is what the test helpers need of a test: testing.TB satisfies it. The
// helpers take it instead of testing.TB so that this package, which
// pgoutbox demo and bench use, does not link the testing package.
type TB interface {
	Helper()
	Name() string
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
}

// DatabaseURLEnv names the environment variable that points New and
// NewDatabase at an existing server instead of starting clusters. Its value
// is a postgres:// URL whose user may create and drop databases.
const DatabaseURLEnv = "PGOUTBOX_TEST_DATABASE_URL"

// setupTimeout bounds starting a cluster or creating a database for a test.
const setupTimeout = 2 * time.Minute

// New starts a cluster for the test, closed when the test ends. It takes at
// most one Options.
//
// With PGOUTBOX_TEST_DATABASE_URL set it starts nothing: the Cluster's URL
// names a fresh database on that server, dropped when the test ends, opts
// are ignored, Dir is empty, and Stop and Restart return ErrExternalServer.
// A test that needs them, or a setting the server may not have, skips when
// Cluster.External reports true, and only then.
func New(t TB, opts ...Options) *Cluster {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("pgcluster.New: got %d Options, want at most one", len(opts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	var (
		c   *Cluster
		err error
	)
	if server := os.Getenv(DatabaseURLEnv); server != "" {
		c, err = newExternal(ctx, server, databaseName(t))
	} else {
		var o Options
		if len(opts) == 1 {
			o = opts[0]
		}
		c, err = Start(ctx, o)
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return c
}

// parseServerURL checks the value of DatabaseURLEnv: a URL, because the
// URLs of other databases are made by replacing its path.
func parseServerURL(server string) (*url.URL, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("pgcluster: %s must be a postgres:// URL, got %q", DatabaseURLEnv, server)
	}
	return u, nil
}

func newExternal(ctx context.Context, server, db string) (*Cluster, error) {
	u, err := parseServerURL(server)
	if err != nil {
		return nil, err
	}
	port := 5432
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("pgcluster: %s has port %q: %w", DatabaseURLEnv, p, err)
		}
	}
	if err := createDatabase(ctx, server, db); err != nil {
		return nil, err
	}
	c := &Cluster{
		Port:      port,
		serverURL: server,
		database:  db,
		logger:    slog.New(slog.DiscardHandler),
	}
	c.URL = c.DatabaseURL(db)
	return c, nil
}

// shared is the cluster NewDatabase creates databases on, started by the
// first call.
var shared struct {
	once    sync.Once
	mu      sync.Mutex
	cluster *Cluster
	err     error
}

// NewDatabase returns the URL of a fresh database, dropped when the test
// ends, on a cluster shared by every test of the test binary (or on the
// server of PGOUTBOX_TEST_DATABASE_URL). It is much cheaper than New: one
// CREATE DATABASE instead of initdb and a server start. Use New for tests
// that stop the server, need other settings, or would disturb other tests
// (filling the WAL, changing server settings).
//
// The shared cluster is started on first use and lives until the test
// binary exits: Main closes it, and without Main its watchdog stops it and
// removes its directory as soon as the process has exited.
func NewDatabase(t TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	admin := os.Getenv(DatabaseURLEnv)
	if admin != "" {
		if _, err := parseServerURL(admin); err != nil {
			t.Fatalf("%v", err)
		}
	} else {
		shared.once.Do(func() {
			c, err := Start(ctx, Options{})
			shared.mu.Lock()
			shared.cluster, shared.err = c, err
			shared.mu.Unlock()
		})
		shared.mu.Lock()
		c, err := shared.cluster, shared.err
		shared.mu.Unlock()
		if err != nil {
			t.Fatalf("pgcluster: starting the shared cluster: %v", err)
		}
		if c == nil {
			t.Fatal("pgcluster: NewDatabase after Main closed the shared cluster")
		}
		admin = c.URL
	}

	name := databaseName(t)
	if err := createDatabase(ctx, admin, name); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := dropDatabase(ctx, admin, name); err != nil {
			t.Errorf("%v", err)
		}
	})
	return withDatabase(admin, name)
}

// Main runs the tests and then closes the cluster NewDatabase shared, so
// that it is gone when the test binary exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgcluster.Main(m) }
func Main(m interface{ Run() int }) {
	code := m.Run()
	if err := closeShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func closeShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil {
		return nil
	}
	err := shared.cluster.Close()
	shared.cluster = nil
	return err
}

// databaseName makes a database name that says which test it belongs to
// and is unique across test binaries sharing one server.
func databaseName(t TB) string {
	var b strings.Builder
	b.WriteString("pgtest_")
	underscore := true
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 47 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			underscore = false
		} else if !underscore {
			b.WriteByte('_')
			underscore = true
		}
	}
	if !underscore {
		b.WriteByte('_')
	}
	var random [4]byte
	_, _ = rand.Read(random[:]) // crypto/rand.Read never fails on supported platforms
	b.WriteString(hex.EncodeToString(random[:]))
	return b.String() // at most 56 bytes, under PostgreSQL's 63
}
