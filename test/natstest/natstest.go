// Package natstest starts a real NATS server with JetStream (Debian's
// nats-server, or the binary PGOUTBOX_NATS_SERVER names) for the tests,
// on a free port with its storage in the test's directory; a test may
// kill it (SIGKILL) and start it again on the same port and data.
package natstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// Server is a nats-server process with JetStream. Its methods fail the
// test it was started for: call them from that test's goroutine.
type Server struct {
	// URL is nats://127.0.0.1:PORT, the same across restarts.
	URL string

	t       testing.TB
	bin     string
	dir     string // the JetStream store
	port    int
	extra   []string
	opts    []nats.Option // what a client needs: the server's user, its CA
	process *proc.Process // nil when not running
	logs    []string      // the output of the processes that ended
}

// Binary is the nats-server to run: PGOUTBOX_NATS_SERVER, else the one on
// PATH or in /usr/sbin (Debian's nats-server package). The test fails with
// how to install it when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("PGOUTBOX_NATS_SERVER"); b != "" {
		return b
	}
	if b, err := exec.LookPath("nats-server"); err == nil {
		return b
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	t.Fatal("natstest: no nats-server: apt-get install nats-server (.ci/run does), or set PGOUTBOX_NATS_SERVER")
	return ""
}

// Start starts a server with JetStream on a free port, its store under
// the test's directory, and waits until it answers; extra flags go to
// every start. It is killed when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, extra)
}

// StartWithUser is Start for a server that requires user and password.
func StartWithUser(t testing.TB, user, password string) *Server {
	t.Helper()
	return start(t, []string{"--user", user, "--pass", password}, nats.UserInfo(user, password))
}

// StartTLS is Start for a server that requires TLS, with the certificate
// ca signed for 127.0.0.1.
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
	return start(t, []string{"--tls", "--tlscert", cert, "--tlskey", key},
		nats.Secure(&tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}))
}

func start(t testing.TB, extra []string, opts ...nats.Option) *Server {
	s := &Server{t: t, bin: Binary(t), dir: filepath.Join(t.TempDir(), "jetstream"), extra: extra, opts: opts}
	t.Cleanup(func() {
		if s.process != nil {
			s.process.Kill()
			s.process = nil
		}
	})
	s.Start()
	return s
}

// StoreDir is where the server keeps its streams.
func (s *Server) StoreDir() string { return s.dir }

// Start starts the server again, on the same port and store. The test
// fails if it is running.
func (s *Server) Start() {
	s.t.Helper()
	if s.process != nil {
		s.t.Fatalf("natstest: the server on %s is already running", s.URL)
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if s.port == 0 || attempt > 0 && s.URL == "" {
			if s.port, err = freeport.Port(); err != nil {
				s.t.Fatalf("natstest: %v", err)
			}
		}
		args := append([]string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-sd", s.dir}, s.extra...)
		var p *proc.Process
		if p, err = proc.Start("nats-server", s.bin, args, nil, nil); err != nil {
			break
		}
		if err = waitReady(p, s.port, s.opts...); err == nil {
			s.process, s.URL = p, fmt.Sprintf("nats://127.0.0.1:%d", s.port)
			return
		}
		p.Kill()
		if !strings.Contains(p.Output(), "address already in use") {
			err = fmt.Errorf("%w; its output:\n%s", err, p.Output())
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("natstest: starting nats-server: %v", err)
}

// waitReady waits until the server accepts connections with JetStream
// ready, or exits.
func waitReady(p *proc.Process, port int, opts ...nats.Option) error {
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	return p.Await(30*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		nc, err := nats.Connect(url, append(opts, nats.Timeout(time.Second))...)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx)
		return err
	})
}

// Kill sends SIGKILL and waits for the process to exit: only what the
// server wrote before it acknowledged survives.
func (s *Server) Kill() {
	s.t.Helper()
	if s.process == nil {
		s.t.Fatalf("natstest: cannot kill the server on %s: not running", s.URL)
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

// Connect is a client connection, closed when the test ends.
func (s *Server) Connect() (*nats.Conn, jetstream.JetStream) {
	s.t.Helper()
	// Replies on four tokens, which a stream over *.*.* does not store.
	nc, err := nats.Connect(s.URL, append(slices.Clone(s.opts), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.CustomInboxPrefix("_INBOX.natstest"))...)
	if err != nil {
		s.t.Fatalf("natstest: connect: %v", err)
	}
	s.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatalf("natstest: %v", err)
	}
	return nc, js
}

// CreateStream creates a stream over subjects with file storage, which
// survives a kill.
func (s *Server) CreateStream(name string, subjects ...string) jetstream.Stream {
	s.t.Helper()
	_, js := s.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage})
	if err != nil {
		s.t.Fatalf("natstest: creating stream %s: %v", name, err)
	}
	return st
}

// Count is how many messages stream holds; 0 while there is no such
// stream.
func (s *Server) Count(name string) uint64 {
	s.t.Helper()
	_, js := s.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		return 0
	}
	return st.CachedInfo().State.Msgs
}

// Message is a stored message as a consumer reads it.
type Message struct {
	Seq     uint64
	Subject string
	Data    []byte
	Header  nats.Header
}

// Messages reads every message of stream in order, from its first; none
// while there is no such stream.
func (s *Server) Messages(name string) []Message {
	s.t.Helper()
	_, js := s.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		s.t.Fatalf("natstest: stream %s: %v", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		s.t.Fatalf("natstest: stream %s: %v", name, err)
	}
	var out []Message
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			if strings.Contains(err.Error(), "not found") {
				continue // deleted
			}
			s.t.Fatalf("natstest: %s message %d: %v", name, seq, err)
		}
		out = append(out, Message{Seq: m.Sequence, Subject: m.Subject, Data: m.Data, Header: m.Header})
	}
	return out
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }
