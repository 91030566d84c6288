// Package redistest starts a real Redis server (Debian's redis-server, or
// the binary PGOUTBOX_REDIS_SERVER names) for the tests, on a free port
// with its data in the test's directory, its append-only file written
// with appendfsync always, so that what it acknowledged survives a kill;
// a test may kill it (SIGKILL) and start it again on the same port and
// data, and start a replica of it.
package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// Server is a redis-server process. Its methods fail the test it was
// started for: call them from that test's goroutine.
type Server struct {
	// Addr is 127.0.0.1:PORT, the same across restarts.
	Addr string

	t       testing.TB
	bin     string
	dir     string
	port    int
	args    []string
	pass    string
	process *proc.Process
	logs    []string
	client  *redis.Client
	tls     *tls.Config // a client's, for a server that speaks only TLS
}

// Binary is the redis-server to run: PGOUTBOX_REDIS_SERVER, else the one
// on PATH or in /usr/bin (Debian's redis-server package). The test fails
// with how to install it when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("PGOUTBOX_REDIS_SERVER"); b != "" {
		return b
	}
	if b, err := exec.LookPath("redis-server"); err == nil {
		return b
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	t.Fatal("redistest: no redis-server: apt-get install redis-server (.ci/install-deps does), or set PGOUTBOX_REDIS_SERVER")
	return ""
}

// Start starts a server on a free port with its data under the test's
// directory, and waits until it answers; extra are redis-server options
// for every start ("--maxmemory", "10mb"). It is killed when the test
// ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, nil, extra)
}

// StartTLS is Start for a server that speaks only TLS, with the
// certificate ca signed for 127.0.0.1.
func StartTLS(t testing.TB, ca *tlstest.CA) *Server {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	der, err := x509.MarshalPKCS8PrivateKey(ca.Server.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Server.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12},
		[]string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca.WritePEM(t, dir), "--tls-auth-clients", "no"})
}

func start(t testing.TB, tlsConfig *tls.Config, extra []string) *Server {
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), args: extra, tls: tlsConfig}
	for i := 0; i+1 < len(extra); i++ {
		if extra[i] == "--requirepass" {
			s.pass = extra[i+1]
		}
	}
	t.Cleanup(func() {
		if s.process != nil {
			s.process.Kill()
			s.process = nil
		}
	})
	s.Start()
	return s
}

// StartReplica starts a replica of primary, and waits until it is in
// sync.
func StartReplica(t testing.TB, primary *Server) *Server {
	t.Helper()
	r := Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := r.Client().Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the replica did not sync within 30 s: %v %s", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dir is where the server keeps its data.
func (s *Server) Dir() string { return s.dir }

// Start starts the server again, on the same port and data. The test
// fails if it is running.
func (s *Server) Start() {
	s.t.Helper()
	if s.process != nil {
		s.t.Fatalf("redistest: the server on %s is already running", s.Addr)
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if s.port == 0 || attempt > 0 && s.Addr == "" {
			if s.port, err = freeport.Port(); err != nil {
				s.t.Fatalf("redistest: %v", err)
			}
		}
		ports := []string{"--port", strconv.Itoa(s.port)}
		if s.tls != nil {
			ports = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
		}
		args := append(append(ports, "--bind", "127.0.0.1", "--dir", s.dir,
			"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no", "--daemonize", "no",
			"--logfile", ""), s.args...)
		var p *proc.Process
		if p, err = proc.Start("redis-server", s.bin, args, nil, nil); err != nil {
			break
		}
		if err = s.waitReady(p); err == nil {
			s.process, s.Addr = p, fmt.Sprintf("127.0.0.1:%d", s.port)
			return
		}
		p.Kill()
		if !strings.Contains(p.Output(), "Address already in use") {
			err = fmt.Errorf("%w; its output:\n%s", err, p.Output())
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("redistest: starting redis-server: %v", err)
}

// waitReady waits until the server answers PING with its data loaded, or
// exits.
func (s *Server) waitReady(p *proc.Process) error {
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), Password: s.pass, Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, DialTimeout: time.Second, TLSConfig: s.tls})
	defer c.Close()
	return p.Await(30*time.Second, 50*time.Millisecond, func(ctx context.Context) error { return c.Ping(ctx).Err() })
}

// Kill sends SIGKILL and waits for the process to exit: only what the
// server wrote to its append-only file survives.
func (s *Server) Kill() {
	s.t.Helper()
	if s.process == nil {
		s.t.Fatalf("redistest: cannot kill the server on %s: not running", s.Addr)
	}
	s.process.Kill()
	s.logs = append(s.logs, s.process.Output())
	s.process = nil
}

// Log is what the server printed, across its restarts.
func (s *Server) Log() string {
	out := strings.Join(s.logs, "\n--- restarted ---\n")
	if s.process != nil {
		out += "\n--- running ---\n" + s.process.Output()
	}
	return out
}

// Client is a client of the server, closed when the test ends; it
// reconnects after a restart.
func (s *Server) Client() *redis.Client {
	if s.client == nil {
		s.client = redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.pass, Protocol: 2, DisableIdentity: true,
			ReadTimeout: 30 * time.Second, TLSConfig: s.tls})
		c := s.client
		s.t.Cleanup(func() { c.Close() })
	}
	return s.client
}

// Entry is a stream entry as XRANGE returns it: its id, and its fields
// and values in order.
type Entry struct {
	ID     string
	Fields []string // name, value, name, value, ...
}

// Get is the value of the entry's field name, "" when it has none.
func (e Entry) Get(name string) string {
	for i := 0; i+1 < len(e.Fields); i += 2 {
		if e.Fields[i] == name {
			return e.Fields[i+1]
		}
	}
	return ""
}

// Entries reads every entry of stream in order; none while there is no
// such key.
func (s *Server) Entries(stream string) []Entry {
	s.t.Helper()
	return entries(s.t, s.Client(), stream)
}

func entries(t testing.TB, c *redis.Client, stream string) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := c.Do(ctx, "xrange", stream, "-", "+").Slice()
	if err != nil {
		t.Fatalf("redistest: XRANGE %s: %v", stream, err)
	}
	out := make([]Entry, 0, len(raw))
	for _, r := range raw {
		pair, _ := r.([]any)
		if len(pair) != 2 {
			t.Fatalf("redistest: XRANGE %s: an entry %v", stream, r)
		}
		e := Entry{ID: fmt.Sprint(pair[0])}
		fields, _ := pair[1].([]any)
		for _, f := range fields {
			e.Fields = append(e.Fields, fmt.Sprint(f))
		}
		out = append(out, e)
	}
	return out
}

// Count is how many entries stream holds.
func (s *Server) Count(stream string) int64 {
	s.t.Helper()
	n, err := s.Client().XLen(context.Background(), stream).Result()
	if err != nil {
		return 0
	}
	return n
}
