// Package pulsartest starts Apache Pulsar for the tests: one standalone
// process (the broker, an embedded BookKeeper bookie and an embedded
// ZooKeeper in one JVM), run from the jars .ci/install-pulsar copies from Maven
// Central into a cache directory, on free loopback ports, with its data in
// the test's temporary directory. A test may kill it (SIGKILL) and start it
// again on the same ports and data.
package pulsartest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

const (
	// Version is the release .ci/pulsar/pom.xml installs.
	Version = "4.0.7"
	// DirEnv names the directory .ci/install-pulsar installed into. Unset,
	// the module's .cache/pulsar is used, installed there on first use.
	DirEnv = "PGOUTBOX_PULSAR_DIR"
	// JavaEnv names the java binary to run it with (default: java on
	// PATH; Pulsar 4 needs Java 17 or later).
	JavaEnv = "PGOUTBOX_JAVA"
)

// readyTimeout bounds a start; seen: ready in 3 to 4 s on 2 idle cores.
const readyTimeout = 2 * time.Minute

// jvm are the JVM options: a small heap, the C1 compiler only (it starts
// faster), and the --add-opens and BookKeeper metadata drivers that
// Pulsar's own bin/pulsar passes. Seen: about 300 MB resident when idle,
// 430 MB after some traffic.
var jvm = []string{"-Xms128m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m", "-XX:TieredStopAtLevel=1",
	"-XX:+UseSerialGC", "-XX:-UsePerfData", "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true",
	"-Dio.netty.tryReflectionSetAccessible=true", "-Dlog4j.shutdownHookEnabled=false",
	"--add-opens", "java.base/java.io=ALL-UNNAMED", "--add-opens", "java.base/java.util.zip=ALL-UNNAMED",
	"--add-opens", "java.base/java.nio=ALL-UNNAMED", "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
	"--add-opens", "java.base/sun.net=ALL-UNNAMED", "--add-opens", "java.management/sun.management=ALL-UNNAMED",
	"-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
	"-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver"}

// standaloneConf is the broker's and the bookie's configuration (both read
// the same file); the rest are Pulsar's defaults. Ports and directories are
// added per server.
const standaloneConf = `clusterName=standalone
bindAddress=127.0.0.1
advertisedAddress=127.0.0.1
# The bookie binds the loopback interface only, on the port it is given:
# a restart finds its ledgers under the same address. (With the RocksDB
# metadata store, it takes a random port unless allowEphemeralPorts is on.)
listeningInterface=lo
allowEphemeralPorts=true
allowLoopback=true
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
loadManagerClassName=org.apache.pulsar.broker.loadbalance.NoopLoadManager
loadBalancerEnabled=false
allowAutoTopicCreation=true
allowAutoTopicCreationType=non-partitioned
# Kept for the test to read, however long it idles.
brokerDeleteInactiveTopicsEnabled=false
webSocketServiceEnabled=false
managedLedgerCacheSizeMB=32
ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage
dbStorage_writeCacheMaxSizeMb=16
dbStorage_readAheadCacheMaxSizeMb=16
dbStorage_rocksDB_blockCacheSize=16777216
# An acknowledged message is in the bookie's journal, not yet on disk.
journalSyncData=false
journalMaxGroupWaitMSec=1
diskUsageThreshold=0.99
diskUsageWarnThreshold=0.99
`

// log4j2 prints to standard output, which goes to Dir/pulsar.log.
const log4j2 = `<Configuration status="warn">
  <Appenders>
    <Console name="console" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{HH:mm:ss.SSS} %-5p [%t] %c{1} - %m%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="console"/></Root>
  </Loggers>
</Configuration>
`

// Server is a Pulsar standalone process. Its methods fail the test it was
// started for: call them from that test's goroutine.
type Server struct {
	// Dir holds standalone.conf, log4j2.xml, pulsar.log, the JVM's
	// temporary files (Dir/tmp) and, in Dir/data, the bookie's ledgers
	// and ZooKeeper's metadata.
	Dir string
	// Started is how long the last start took, from the JVM's start to
	// the default namespace public/default existing.
	Started time.Duration

	// CAFile is the PEM certificate of a server started by StartWithTLS,
	// its own CA: its name is pulsar.test, not its address, so that a
	// client checking the name refuses it.
	CAFile string
	// Token is the superuser's token (subject admin) of a server started
	// by StartWithTokens, which the server's own Client and admin calls
	// use; "" for a server without authentication.
	Token string

	t                           testing.TB
	java, jars                  string
	brokerPort, webPort, bk, zk int
	secret                      []byte        // the tokens' HMAC key; nil without authentication
	tlsPort                     int           // the TLS port of a server started by StartWithTLS; 0 without
	p                           *proc.Process // nil when not running
	logFrom                     int64         // pulsar.log's size when the last start began
}

// Start starts Pulsar standalone on free loopback ports, its data in the
// test's temporary directory, and waits until it serves public/default. It
// is killed when the test ends; its log is logged if the test failed.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil, false)
}

// StartWithTokens is Start with token authentication: the broker takes a
// client whose JWT (HS256) TokenFor signed, and refuses any other.
func StartWithTokens(t testing.TB) *Server {
	t.Helper()
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	return start(t, secret, false)
}

// TokenFor is a token of subject the server takes: a JWT signed with its
// key (HS256), as Pulsar's "pulsar tokens create" makes.
func (s *Server) TokenFor(subject string) string { return jwt(s.secret, subject) }

// jwt is an HS256 JWT of subject, signed with key.
func jwt(key []byte, subject string) string {
	enc := base64.RawURLEncoding
	unsigned := enc.EncodeToString([]byte(`{"alg":"HS256"}`)) + "." + enc.EncodeToString([]byte(`{"sub":"`+subject+`"}`))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(unsigned))
	return unsigned + "." + enc.EncodeToString(mac.Sum(nil))
}

// StartWithTLS is Start with a TLS port beside the plain one
// (ServiceURLTLS), its certificate self-signed (CAFile).
func StartWithTLS(t testing.TB) *Server {
	t.Helper()
	return start(t, nil, true)
}

// ServiceURLTLS is the TLS port's URL, pulsar+ssl://127.0.0.1:PORT.
func (s *Server) ServiceURLTLS() string {
	return "pulsar+ssl://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// selfSigned writes a self-signed certificate for the name pulsar.test
// and its PKCS #8 key into dir.
func selfSigned(dir string) (cert, key string, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pulsar.test"},
		DNSNames: []string{"pulsar.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return "", "", err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	return cert, key, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600)
}

func start(t testing.TB, secret []byte, withTLS bool) *Server {
	t.Helper()
	java, jars := install(t)
	// TempDir first: cleanups run last-in first-out, so the server is
	// killed before its directory is removed.
	s := &Server{Dir: t.TempDir(), t: t, java: java, jars: jars, secret: secret}
	if secret != nil {
		s.Token = s.TokenFor("admin")
	}
	if withTLS {
		var err error
		if s.CAFile, _, err = selfSigned(s.Dir); err != nil {
			t.Fatal(err)
		}
		s.tlsPort = -1 // picked with the others
	}
	t.Cleanup(func() {
		if s.p != nil {
			s.p.Kill() // at once: its data is thrown away
			s.p = nil
		}
		if t.Failed() {
			t.Logf("pulsartest: Pulsar's log (%s) ends:\n%s", filepath.Join(s.Dir, "pulsar.log"), s.LogTail(16384))
		}
	})
	if err := os.WriteFile(filepath.Join(s.Dir, "log4j2.xml"), []byte(log4j2), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	// The ports were free a moment before: another process may take one
	// before Pulsar binds it. Then again, elsewhere.
	for try := 0; try < 3; try++ {
		if err = s.pickPorts(); err != nil {
			break
		}
		if err = s.run(); err == nil || !strings.Contains(err.Error(), "Address already in use") {
			break
		}
		os.RemoveAll(filepath.Join(s.Dir, "data"))
	}
	if err != nil {
		t.Fatalf("pulsartest: %v", err)
	}
	return s
}

// install runs .ci/install-pulsar, once per test binary: at once when the
// cache holds the jars.
func install(t testing.TB) (java, jars string) {
	t.Helper()
	in, err := testbin.Install("Apache Pulsar "+Version, "pulsar", "install-pulsar", JavaEnv, DirEnv, "pulsar")
	if err != nil {
		t.Fatalf("pulsartest: %v", err)
	}
	return in.Java, filepath.Join(in.Dir, "lib", "*")
}

func (s *Server) pickPorts() error {
	var err error
	for _, p := range []*int{&s.brokerPort, &s.webPort, &s.bk, &s.zk} {
		if *p, err = freeport.Port(); err != nil {
			return err
		}
	}
	if s.tlsPort != 0 {
		s.tlsPort, err = freeport.Port()
	}
	return err
}

// run writes the configuration for the server's ports and starts the
// process, waiting until it serves.
func (s *Server) run() error {
	conf := standaloneConf + fmt.Sprintf("brokerServicePort=%d\nwebServicePort=%d\n", s.brokerPort, s.webPort)
	if s.tlsPort != 0 {
		conf += fmt.Sprintf("brokerServicePortTls=%d\ntlsCertificateFilePath=%s\ntlsKeyFilePath=%s\n",
			s.tlsPort, s.CAFile, filepath.Join(s.Dir, "key.pem"))
	}
	if s.secret != nil {
		conf += "authenticationEnabled=true\n" +
			"authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n" +
			"tokenSecretKey=data:;base64," + base64.StdEncoding.EncodeToString(s.secret) + "\n" +
			"superUserRoles=admin\nauthorizationEnabled=false\n" +
			"brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n" +
			"brokerClientAuthenticationParameters=token:" + s.Token + "\n"
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "standalone.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(s.Dir, "pulsar.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	if fi, err := log.Stat(); err == nil {
		s.logFrom = fi.Size()
	}
	data := filepath.Join(s.Dir, "data")
	// RocksDB and Netty unpack native libraries (13 MB a start) into the
	// JVM's temporary directory, removed at exit but not after SIGKILL:
	// the server's own directory goes with the test.
	tmp := filepath.Join(s.Dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	args := append(append([]string(nil), jvm...), "-Djava.io.tmpdir="+tmp,
		"-Dlog4j.configurationFile="+filepath.Join(s.Dir, "log4j2.xml"),
		"-cp", s.jars, "org.apache.pulsar.PulsarStandaloneStarter",
		"--config", filepath.Join(s.Dir, "standalone.conf"),
		// No functions worker, no stream storage (state for functions):
		// neither is needed to produce and consume, and both cost time.
		"--no-functions-worker", "--no-stream-storage",
		"--zookeeper-port", strconv.Itoa(s.zk),
		"--zookeeper-dir", filepath.Join(data, "zookeeper"),
		"--bookkeeper-dir", filepath.Join(data, "bookkeeper"),
		"--bookkeeper-port", strconv.Itoa(s.bk))
	begin := time.Now()
	// ZooKeeper rather than the default RocksDB metadata store: after a
	// SIGKILL, a restart on RocksDB left the bookie's registration in a
	// loop of create and delete (lock invalidated) in about one restart in
	// three, and no topic could be read; on ZooKeeper, none in dozens.
	p, err := proc.Start("pulsar", s.java, args, []string{"PULSAR_STANDALONE_USE_ZOOKEEPER=1"}, log)
	if err != nil {
		return err
	}
	// The starter creates public/default once the broker runs: before, a
	// producer on a short topic name is refused.
	err = p.Await(readyTimeout, 100*time.Millisecond, func(ctx context.Context) error {
		if err := s.adminOK(ctx, "/admin/v2/namespaces/public/default"); err != nil {
			return err
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.brokerAddr())
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		p.Kill()
		return fmt.Errorf("Apache Pulsar in %s did not start: %v\n%s", s.Dir, err, s.LogTail(8192))
	}
	s.Started = time.Since(begin)
	s.p = p
	return nil
}

// adminOK asks the admin API for path, with the superuser's token when
// the server takes tokens: nil for a 2xx answer.
func (s *Server) adminOK(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.AdminURL()+path, nil)
	if err != nil {
		return err
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return nil
}

func (s *Server) brokerAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.brokerPort))
}

// ServiceURL is the binary protocol's URL, pulsar://127.0.0.1:PORT, the
// same across restarts.
func (s *Server) ServiceURL() string { return "pulsar://" + s.brokerAddr() }

// AdminURL is the admin REST API's base URL, http://127.0.0.1:PORT.
func (s *Server) AdminURL() string { return "http://127.0.0.1:" + strconv.Itoa(s.webPort) }

// Kill sends SIGKILL and waits for the exit: what the bookie acknowledged
// is in its journal, which the OS has, so it survives.
func (s *Server) Kill() {
	s.t.Helper()
	if s.p == nil {
		s.t.Fatalf("pulsartest: cannot kill Pulsar on %s: not running", s.ServiceURL())
	}
	s.p.Kill()
	s.p = nil
}

// Restart starts the server again after Kill, on the same ports and data.
func (s *Server) Restart() {
	s.t.Helper()
	if s.p != nil {
		s.t.Fatalf("pulsartest: Pulsar on %s is already running", s.ServiceURL())
	}
	if err := s.run(); err != nil {
		s.t.Fatalf("pulsartest: restarting: %v", err)
	}
}

// LedgerLost tells whether Pulsar, since it last started, failed to
// open a ledger of its own ("Error while recovering ledger"). Seen after
// a SIGKILL under load, rarely: the bookie's last entry of the topic's
// ledger failed its digest ("Mac mismatch"), and with one bookie there is
// no copy to recover from, so no client can read or write the topic
// again. A test of a client learns nothing from such a server.
func (s *Server) LedgerLost() bool {
	b, err := os.ReadFile(filepath.Join(s.Dir, "pulsar.log"))
	if err != nil || int64(len(b)) < s.logFrom {
		return false
	}
	return strings.Contains(string(b[s.logFrom:]), "Error while recovering ledger")
}

// Read is Messages returning the error rather than failing the test.
func (s *Server) Read(topic string) ([]Message, error) { return s.messages(topic) }

// LogTail is the end of the server's log, at most n bytes, across its
// restarts.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "pulsar.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Client is a client of the server, closed when the test ends. It logs
// nothing: the client's own log would drown the test's.
func (s *Server) Client() pulsar.Client {
	s.t.Helper()
	opts := pulsar.ClientOptions{
		URL:              s.ServiceURL(),
		OperationTimeout: 30 * time.Second,
		Logger:           pulsarlog.DefaultNopLogger(),
	}
	if s.Token != "" {
		opts.Authentication = pulsar.NewAuthenticationToken(s.Token)
	}
	c, err := pulsar.NewClient(opts)
	if err != nil {
		s.t.Fatalf("pulsartest: client: %v", err)
	}
	s.t.Cleanup(c.Close)
	return c
}

// Message is a stored message as a reader reads it.
type Message struct {
	ID          pulsar.MessageID
	Key         string
	Properties  map[string]string
	Payload     []byte
	PublishTime time.Time
	EventTime   time.Time // zero when the producer set none
	Producer    string
}

// Messages reads every message of topic (a short name such as "orders",
// in public/default, or a full one; not a partitioned topic) in order,
// from the earliest, up to the last one stored when it is called. A topic
// that does not exist is created (auto-creation is on), empty.
func (s *Server) Messages(topic string) []Message {
	s.t.Helper()
	out, err := s.messages(topic)
	if err != nil {
		s.t.Fatalf("pulsartest: reading %s: %v", topic, err)
	}
	return out
}

func (s *Server) messages(topic string) ([]Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := s.Client().CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// The reader's HasNext swallows errors (as "nothing more"): ask for
	// the last ID, which says them, and read up to it.
	last, err := r.GetLastMessageID()
	if err != nil {
		return nil, fmt.Errorf("last message ID: %w", err)
	}
	if last.EntryID() < 0 {
		return nil, nil // empty
	}
	var out []Message
	for {
		m, err := r.Next(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w after %d messages, before the last one stored (%v)", err, len(out), last)
			}
			return out, err
		}
		out = append(out, Message{ID: m.ID(), Key: m.Key(), Properties: m.Properties(), Payload: m.Payload(),
			PublishTime: m.PublishTime(), EventTime: m.EventTime(), Producer: m.ProducerName()})
		if reached(m.ID(), last) {
			return out, nil
		}
	}
}

// reached tells whether id is last or after it. Messages a producer
// batched share an entry; of such, the last message of the batch ends the
// read whether or not the broker numbered the last ID within it.
func reached(id, last pulsar.MessageID) bool {
	if id.LedgerID() != last.LedgerID() {
		return id.LedgerID() > last.LedgerID()
	}
	if id.EntryID() != last.EntryID() {
		return id.EntryID() > last.EntryID()
	}
	if last.BatchIdx() >= 0 && id.BatchIdx() >= last.BatchIdx() {
		return true
	}
	return id.BatchSize() <= 1 || id.BatchIdx() >= id.BatchSize()-1
}
