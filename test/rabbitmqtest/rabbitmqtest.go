// Package rabbitmqtest starts a real RabbitMQ (Debian's rabbitmq-server)
// for the tests, on free ports with its data in a directory of the test's,
// and its own epmd, so that tests running at once share nothing; a test
// may kill it (SIGKILL) and start it again on the same ports and data.
package rabbitmqtest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// ServerEnv names another rabbitmq-server script to run (its directory
// must hold rabbitmq-env as Debian's does); unset, Debian's.
const ServerEnv = "PGOUTBOX_RABBITMQ_SERVER"

// defaultServer is the script Debian's /usr/sbin/rabbitmq-server wraps:
// run directly, as the rabbitmq user, it takes the environment given.
const defaultServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// readyTimeout bounds a start; seen: about 7 s on 2 idle cores.
const readyTimeout = 90 * time.Second

// Options are a server's settings beyond the defaults.
type Options struct {
	// MaxMessageSize is the largest message the server accepts
	// (max_message_size; 0: RabbitMQ's default, 128 MiB).
	MaxMessageSize int
	// User and Password replace guest/guest as the only user.
	User, Password string
	// TLS adds a TLS listener with ca's server certificate (TLSURL).
	TLS *tlstest.CA
	// Streams enables the stream plugin and its listener (StreamURL).
	Streams bool
}

// Server is a rabbitmq-server process. Its methods fail the test it was
// started for: call them from that test's goroutine.
type Server struct {
	// URL is amqp://user:password@127.0.0.1:PORT/, the same across
	// restarts.
	URL string
	// TLSURL is amqps://user:password@127.0.0.1:PORT/ with Options.TLS.
	TLSURL string
	// StreamURL is rabbitmq-stream://user:password@127.0.0.1:PORT/%2f
	// with Options.Streams; StreamTLSURL rabbitmq-stream+tls:// with
	// Options.TLS too.
	StreamURL, StreamTLSURL string
	// StreamPort is the stream listener's port.
	StreamPort int

	t      testing.TB
	bin    string
	dir    string
	ports  struct{ amqp, dist, epmd, tls, stream, streamTLS int }
	cred   *syscall.Credential
	opts   Options
	epmd   *proc.Process
	server *proc.Process // nil when not running
	logs   []string      // the output of the processes that ended
	// started tells a server that has run: its ports stay its own.
	started bool
}

// Start starts a server on free ports with its data under the test's
// directory and waits until it accepts AMQP connections. It is killed
// when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := os.Getenv(ServerEnv)
	if bin == "" {
		bin = defaultServer
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("rabbitmqtest: no rabbitmq-server at %s: apt-get install rabbitmq-server (.ci/run does), or set %s", bin, ServerEnv)
	}
	if opts.User == "" {
		opts.User, opts.Password = "guest", "guest"
	}
	s := &Server{t: t, bin: bin, opts: opts}
	var err error
	if s.cred, err = credential(); err != nil {
		t.Fatal(err)
	}
	s.dir, err = os.MkdirTemp("", "rabbitmqtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop()
		os.RemoveAll(s.dir)
	})
	if err := own(s.cred, s.dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*int{&s.ports.amqp, &s.ports.dist, &s.ports.epmd, &s.ports.tls, &s.ports.stream, &s.ports.streamTLS} {
		if *p, err = freeport.Port(); err != nil {
			t.Fatal(err)
		}
	}
	s.URL, s.TLSURL, s.StreamURL, s.StreamTLSURL = urls(s.opts, s.ports.amqp, s.ports.tls, s.ports.stream, s.ports.streamTLS)
	s.StreamPort = s.ports.stream
	if err := s.writeConfig(); err != nil {
		t.Fatal(err)
	}
	s.Start()
	return s
}

// credential is the rabbitmq user's when running as root (the server's
// scripts expect it), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("rabbitmq")
	if err != nil {
		return nil, fmt.Errorf("rabbitmqtest: running as root and found no rabbitmq user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// own hands path to the user the server runs as (cred; nil: the test's).
func own(cred *syscall.Credential, path string) error {
	if cred == nil {
		return nil
	}
	return os.Chown(path, int(cred.Uid), int(cred.Gid))
}

func (s *Server) writeConfig() error {
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\n", s.ports.amqp)
	if s.opts.MaxMessageSize > 0 {
		conf += fmt.Sprintf("max_message_size = %d\n", s.opts.MaxMessageSize)
	}
	if s.opts.User != "guest" {
		conf += fmt.Sprintf("default_user = %s\ndefault_pass = %s\n", s.opts.User, s.opts.Password)
	}
	plugins := "[].\n"
	if s.opts.Streams {
		// The advertised address is the one clients are sent to for a
		// stream's leader.
		conf += fmt.Sprintf("stream.listeners.tcp.default = 127.0.0.1:%d\nstream.advertised_host = 127.0.0.1\nstream.advertised_port = %d\n", s.ports.stream, s.ports.stream)
		plugins = "[rabbitmq_stream].\n"
	}
	files := map[string]string{"rabbitmq.conf": conf, "enabled_plugins": plugins}
	if ca := s.opts.TLS; ca != nil {
		der, err := x509.MarshalPKCS8PrivateKey(ca.Server.PrivateKey)
		if err != nil {
			return err
		}
		files["server.pem"] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Server.Certificate[0]}))
		files["server-key.pem"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		files["rabbitmq.conf"] += fmt.Sprintf("listeners.ssl.default = 127.0.0.1:%d\nssl_options.certfile = %s\nssl_options.keyfile = %s\nssl_options.verify = verify_none\nssl_options.fail_if_no_peer_cert = false\n",
			s.ports.tls, filepath.Join(s.dir, "server.pem"), filepath.Join(s.dir, "server-key.pem"))
		if s.opts.Streams {
			files["rabbitmq.conf"] += fmt.Sprintf("stream.listeners.ssl.default = 127.0.0.1:%d\n", s.ports.streamTLS)
		}
	}
	for name, text := range files {
		path := filepath.Join(s.dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return err
		}
		if err := own(s.cred, path); err != nil {
			return err
		}
	}
	return nil
}

// Start starts the server again, on the same ports and data. The test
// fails if it is running.
func (s *Server) Start() {
	s.t.Helper()
	if s.server != nil {
		s.t.Fatalf("rabbitmqtest: the server on %s is already running", s.Addr())
	}
	if s.epmd == nil {
		// An epmd of its own, which ends with the test: the server would
		// start one as a daemon that outlives it.
		p, err := proc.StartAs(s.cred, "epmd", "epmd", []string{"-port", strconv.Itoa(s.ports.epmd)}, nil)
		if err != nil {
			s.t.Fatalf("rabbitmqtest: %v", err)
		}
		s.epmd = p
	}
	env := s.env()
	// A node has been seen to stall in its database's start on a machine
	// loaded by many tests at once, and to start at once when started
	// again: one more try before the test fails.
	for try := 1; ; try++ {
		p, err := proc.StartAs(s.cred, "rabbitmq-server", s.bin, nil, env)
		if err != nil {
			s.t.Fatalf("rabbitmqtest: %v", err)
		}
		err = s.waitReady(p)
		if err == nil {
			s.server, s.started = p, true
			return
		}
		p.Kill()
		if !s.started && try < 3 && strings.Contains(p.Output(), "eaddrinuse") {
			// A port freeport found free was taken by another test
			// process before the server bound it: new ones, once.
			s.t.Logf("rabbitmqtest: a port was taken before the server bound it; starting it on others")
			if err := s.newPorts(); err != nil {
				s.t.Fatal(err)
			}
			env = s.env()
			continue
		}
		if try >= 2 {
			s.t.Fatalf("rabbitmqtest: %v; its output:\n%s", err, p.Output())
		}
		s.t.Logf("rabbitmqtest: %v; starting it again", err)
	}
}

// newPorts moves a server that has not started yet to other ports: its
// epmd too, and its configuration.
func (s *Server) newPorts() error {
	if s.epmd != nil {
		s.epmd.Kill()
		s.epmd = nil
	}
	for _, p := range []*int{&s.ports.amqp, &s.ports.dist, &s.ports.epmd, &s.ports.tls, &s.ports.stream, &s.ports.streamTLS} {
		var err error
		if *p, err = freeport.Port(); err != nil {
			return err
		}
	}
	s.URL, s.TLSURL, s.StreamURL, s.StreamTLSURL = urls(s.opts, s.ports.amqp, s.ports.tls, s.ports.stream, s.ports.streamTLS)
	s.StreamPort = s.ports.stream
	if err := s.writeConfig(); err != nil {
		return err
	}
	p, err := proc.StartAs(s.cred, "epmd", "epmd", []string{"-port", strconv.Itoa(s.ports.epmd)}, nil)
	if err != nil {
		return err
	}
	s.epmd = p
	return nil
}

// urls are a server's URL, TLSURL, StreamURL and StreamTLSURL on its
// ports, as its options ask for them.
func urls(o Options, amqpPort, tlsPort, streamPort, streamTLSPort int) (url, tlsURL, streamURL, streamTLSURL string) {
	url = fmt.Sprintf("amqp://%s:%s@127.0.0.1:%d/", o.User, o.Password, amqpPort)
	if o.TLS != nil {
		tlsURL = fmt.Sprintf("amqps://%s:%s@127.0.0.1:%d/", o.User, o.Password, tlsPort)
	}
	if o.Streams {
		streamURL = fmt.Sprintf("rabbitmq-stream://%s:%s@127.0.0.1:%d/%%2f", o.User, o.Password, streamPort)
		if o.TLS != nil {
			streamTLSURL = fmt.Sprintf("rabbitmq-stream+tls://%s:%s@127.0.0.1:%d/%%2f", o.User, o.Password, streamTLSPort)
		}
	}
	return url, tlsURL, streamURL, streamTLSURL
}

// waitReady waits until the server accepts an AMQP connection, or exits.
func (s *Server) waitReady(p *proc.Process) error {
	return p.Await(readyTimeout, 100*time.Millisecond, func(context.Context) error {
		c, err := amqp.DialConfig(s.URL, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err != nil {
			return err
		}
		if err := c.Close(); err != nil || !s.opts.Streams {
			return err
		}
		return streamReady(s.StreamURL, s.ports.stream)
	})
}

// Kill sends SIGKILL and waits for the exit: the messages the server
// confirmed survive. Definitions (exchanges, queues, bindings) reach its
// disk a moment after they are declared (Mnesia logs them in the
// background): declare them a second or more before a kill.
func (s *Server) Kill() {
	s.t.Helper()
	if s.server == nil {
		s.t.Fatalf("rabbitmqtest: cannot kill the server on %s: not running", s.Addr())
	}
	s.server.Kill()
	s.logs = append(s.logs, s.server.Output())
	s.server = nil
}

func (s *Server) stop() {
	if s.server != nil {
		s.server.Kill()
		s.server = nil
	}
	if s.epmd != nil {
		s.epmd.Kill()
		s.epmd = nil
	}
}

// Log is the end of what the server printed, across its restarts.
func (s *Server) Log() string {
	out := strings.Join(s.logs, "\n--- restarted ---\n")
	if s.server != nil {
		out += "\n--- running ---\n" + s.server.Output()
	}
	return out
}

// Addr is the server's AMQP host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.ports.amqp) }

// Channel is a channel on a connection of its own, closed when the test
// ends.
func (s *Server) Channel() *amqp.Channel {
	s.t.Helper()
	c, err := amqp.Dial(s.URL)
	if err != nil {
		s.t.Fatalf("rabbitmqtest: connect: %v", err)
	}
	s.t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		s.t.Fatalf("rabbitmqtest: channel: %v", err)
	}
	return ch
}

// Queue declares a durable queue bound to exchange (declared durable,
// of kind, when it is not "", the default exchange) with each of keys.
func (s *Server) Queue(name, exchange, kind string, keys ...string) {
	s.t.Helper()
	ch := s.Channel()
	defer ch.Close()
	if exchange != "" {
		if err := ch.ExchangeDeclare(exchange, kind, true, false, false, false, nil); err != nil {
			s.t.Fatalf("rabbitmqtest: exchange %s: %v", exchange, err)
		}
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		s.t.Fatalf("rabbitmqtest: queue %s: %v", name, err)
	}
	for _, k := range keys {
		if err := ch.QueueBind(name, k, exchange, false, nil); err != nil {
			s.t.Fatalf("rabbitmqtest: binding %s to %s with %q: %v", name, exchange, k, err)
		}
	}
}

// Count is how many messages queue holds; -1 while it cannot be asked
// (no such queue, the server restarting).
func (s *Server) Count(queue string) int {
	s.t.Helper()
	c, err := amqp.DialConfig(s.URL, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		return -1
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return -1
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return -1
	}
	return q.Messages
}

// Message is a message as a consumer receives it.
type Message struct {
	Exchange, RoutingKey string
	Body                 []byte
	Headers              amqp.Table
	DeliveryMode         uint8
	ContentType          string
	MessageID            string
}

// Drain takes every message queue holds, in order, acknowledging them:
// they are gone from the queue afterwards. None while there is no such
// queue.
func (s *Server) Drain(queue string) []Message {
	s.t.Helper()
	n := s.Count(queue)
	if n <= 0 {
		return nil
	}
	ch := s.Channel()
	defer ch.Close()
	// Acknowledged one by one: what arrives after the count stays queued
	// (requeued when the channel closes), in its place.
	deliveries, err := ch.Consume(queue, "rabbitmqtest", false, true, false, false, nil)
	if err != nil {
		s.t.Fatalf("rabbitmqtest: consume from %s: %v", queue, err)
	}
	out := make([]Message, 0, n)
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for len(out) < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				s.t.Fatalf("rabbitmqtest: %s: the consumer ended after %d of %d messages", queue, len(out), n)
			}
			if err := d.Ack(false); err != nil {
				s.t.Fatalf("rabbitmqtest: ack: %v", err)
			}
			out = append(out, Message{Exchange: d.Exchange, RoutingKey: d.RoutingKey, Body: d.Body, Headers: d.Headers,
				DeliveryMode: d.DeliveryMode, ContentType: d.ContentType, MessageID: d.MessageId})
		case <-timeout.C:
			s.t.Fatalf("rabbitmqtest: %s: %d of %d messages after a minute", queue, len(out), n)
		}
	}
	if err := ch.Cancel("rabbitmqtest", false); err != nil {
		s.t.Fatalf("rabbitmqtest: %v", err)
	}
	return out
}

// Await drains queue until it gave n messages or timeout passed, and
// returns what it gave.
func (s *Server) Await(queue string, n int, timeout time.Duration) []Message {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []Message
	for len(out) < n {
		if s.Count(queue) > 0 {
			out = append(out, s.Drain(queue)...)
			continue
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(100 * time.Millisecond):
		}
	}
	return out
}

// env is the server's environment: its directories and ports.
func (s *Server) env() []string {
	return []string{
		"HOME=" + s.dir, // the Erlang cookie
		"ERL_EPMD_PORT=" + strconv.Itoa(s.ports.epmd),
		"RABBITMQ_NODENAME=rabbit@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(s.ports.amqp),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(s.ports.dist),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(s.dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(s.dir, "log"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(s.dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(s.dir, "enabled_plugins"),
		"RABBITMQ_LOGS=-",
		// The script then execs the Erlang VM, so that the process
		// started is the server itself, which Kill kills.
		"RABBITMQ_ALLOW_INPUT=1",
		"RABBITMQ_SERVER_START_ARGS=-noinput",
	}
}
