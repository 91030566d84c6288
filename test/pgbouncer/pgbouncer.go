// Package pgbouncer runs PgBouncer (Debian's pgbouncer package) in front of
// a test's PostgreSQL, for the tests about connection poolers. It starts the
// real program, as the postgres user when the tests run as root (PgBouncer
// refuses root, as PostgreSQL does), on a free loopback port, and stops it
// when the test ends or the test binary dies.
package pgbouncer

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pgcluster"
	"github.com/pgoutbox/pgoutbox/proc"
)

// BinEnv names the environment variable that points at another pgbouncer
// binary than Debian's /usr/sbin/pgbouncer or the one on PATH.
const BinEnv = "PGOUTBOX_PGBOUNCER"

// Pool modes, as pool_mode names them.
const (
	Session     = "session"
	Transaction = "transaction"
	Statement   = "statement"
)

// Options configure a PgBouncer. The zero value pools transactions.
type Options struct {
	// PoolMode is session, transaction (default) or statement.
	PoolMode string
	// PoolSize is default_pool_size: server connections per database and
	// user (default 10).
	PoolSize int
}

// Bouncer is a running PgBouncer.
type Bouncer struct {
	// URL is the server URL it was started for with PgBouncer's address
	// in place of the server's: the same database and user, pooled.
	URL  string
	Port int

	proc *proc.Process
	dir  string
}

// Start runs PgBouncer in front of the server of serverURL (a postgres://
// URL of a server on 127.0.0.1 that trusts its clients, as pgcluster's
// do), and returns once it accepts connections. Every database of that
// server is reachable through it by name.
func Start(t testing.TB, serverURL string, opts Options) *Bouncer {
	t.Helper()
	if opts.PoolMode == "" {
		opts.PoolMode = Transaction
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 10
	}
	bin, err := findBin()
	if err != nil {
		t.Fatal(err)
	}
	server, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("pgbouncer: server URL: %v", err)
	}
	user := server.User.Username()
	cred, err := pgcluster.Credential()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	b := &Bouncer{dir: dir}
	t.Cleanup(func() {
		if b.proc != nil {
			b.proc.Kill()
		}
	})
	// Another process may take the free port before PgBouncer binds it.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		ini := filepath.Join(dir, "pgbouncer.ini")
		if err := writeConfig(ini, dir, server, user, port, opts); err != nil {
			t.Fatal(err)
		}
		if cred != nil {
			for _, f := range []string{ini, filepath.Join(dir, "users.txt")} {
				if err := os.Chown(f, int(cred.Uid), int(cred.Gid)); err != nil {
					t.Fatal(err)
				}
			}
		}
		p, err := proc.StartAs(cred, "pgbouncer", bin, []string{ini}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b.proc, b.Port = p, port
		u := *server
		u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		b.URL = u.String()
		err = b.awaitReady(15 * time.Second)
		if err == nil {
			return b
		}
		p.Kill()
		b.proc = nil
		if attempt == 3 || !strings.Contains(p.Output()+b.log(), "Address already in use") {
			t.Fatalf("pgbouncer did not start: %v\noutput:\n%s\nlog:\n%s", err, p.Output(), b.log())
		}
	}
}

func (b *Bouncer) log() string {
	out, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	return string(out)
}

// awaitReady connects through PgBouncer until a query answers.
func (b *Bouncer) awaitReady(timeout time.Duration) error {
	return b.proc.Await(timeout, 50*time.Millisecond, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, b.URL+"&default_query_exec_mode=simple_protocol")
		if err != nil {
			return fmt.Errorf("through port %d: %w", b.Port, err)
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "SELECT 1")
		return err
	})
}

// writeConfig writes the ini file and the users file beside it. Every
// database of the server is served by name (the "*" entry); the server
// trusts its local clients, so PgBouncer needs no password either.
func writeConfig(ini, dir string, server *url.URL, user string, port int, opts Options) error {
	host, serverPort := server.Hostname(), server.Port()
	if serverPort == "" {
		serverPort = "5432"
	}
	users := filepath.Join(dir, "users.txt")
	if err := os.WriteFile(users, fmt.Appendf(nil, "%q \"\"\n", user), 0o644); err != nil {
		return err
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 500
logfile = %s
pidfile =
admin_users = %s
`, host, serverPort, port, users, opts.PoolMode, opts.PoolSize, filepath.Join(dir, "pgbouncer.log"), user)
	return os.WriteFile(ini, []byte(conf), 0o644)
}

func findBin() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("pgbouncer: no pgbouncer binary in /usr/sbin or PATH; install it (Debian: apt-get install pgbouncer; .ci/run does) or set %s", BinEnv)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
