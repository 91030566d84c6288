package kafkatest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/faultproxy"
	"github.com/pgoutbox/pgoutbox/test/testbin"
	"github.com/pgoutbox/pgoutbox/test/tlstest"
)

// Apache Kafka itself, started from its jars (.ci/install-kafka puts them
// in a cache directory): one process that is both broker and controller
// (KRaft), on free loopback ports, with its data in a directory of its own.
// Shared gives every test of a package one such broker (topics are deleted
// when each test ends); Start gives a test a broker of its own, which it may
// kill, restart on its data, or configure differently.

const (
	// Version is the Apache Kafka release the tests run against; the Makefile's
	// KAFKA_VERSION and compose/docker-compose.yml name the same.
	Version = "4.4.0"
	// DirEnv names the directory .ci/install-kafka installed Version into
	// (make sets it from KAFKA_DIR). Unset, the module's .cache/kafka is
	// used, installed there on first use.
	DirEnv = "PGOUTBOX_KAFKA_DIR"
	// JavaEnv names the java binary to run the broker with (default: java on
	// PATH).
	JavaEnv = "PGOUTBOX_JAVA"
)

// SCRAM users, created when the storage is formatted. The password of each
// is the same for SCRAM-SHA-256 and SCRAM-SHA-512, and for PLAIN.
const (
	// User may do everything (a super user).
	User     = "relay"
	Password = "Relay-Kafka-Pass-7"
	// LimitedUser has no ACL: it may connect, and is refused everything
	// else unless a test grants it.
	LimitedUser     = "limited"
	LimitedPassword = "Limited-Kafka-Pass-3"
)

// Settings are the broker's settings that differ from Kafka's defaults,
// for a one-node cluster that starts and answers quickly. Listeners, ports
// and directories are added per broker. compose/docker-compose.yml uses the
// same.
var Settings = map[string]string{
	"num.partitions":                                   "3",
	"default.replication.factor":                       "1",
	"offsets.topic.replication.factor":                 "1",
	"offsets.topic.num.partitions":                     "3",
	"transaction.state.log.replication.factor":         "1",
	"transaction.state.log.min.isr":                    "1",
	"transaction.state.log.num.partitions":             "3",
	"share.coordinator.state.topic.replication.factor": "1",
	"share.coordinator.state.topic.min.isr":            "1",
	"group.initial.rebalance.delay.ms":                 "0",
	// How often the coordinator looks for transactions past their timeout
	// (default 10 s): a hung transaction is aborted at most this long
	// after its timeout.
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
	"auto.create.topics.enable":                                   "true",
	// A broker killed with SIGKILL and started again is refused
	// (DUPLICATE_BROKER_REGISTRATION) until its old registration's session
	// expires: 9 s by default, measured 12 s from restart to serving.
	"broker.heartbeat.interval.ms": "500",
	"broker.session.timeout.ms":    "3000",
}

// Options configure a broker of a test's own (Start).
type Options struct {
	// Config adds broker settings or overrides Settings, for instance
	// "message.max.bytes" or "auto.create.topics.enable".
	Config map[string]string
	// Secure adds the listeners with authentication: SASL_SSL
	// (SCRAM-SHA-256 and -512 over TLS, certificate from Broker.CA) and
	// SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256 and -512), the users above,
	// and the StandardAuthorizer (User and the plaintext listeners'
	// ANONYMOUS are super users).
	Secure bool
	// Proxied adds a plaintext listener reached through a fault proxy
	// (Broker.Proxy): the broker advertises the proxy's address on it, so
	// that every connection a client makes crosses the proxy.
	Proxied bool
	// MTLS adds an SSL listener that requires a client certificate
	// signed by Broker.CA (Broker.MTLS; auth.go).
	MTLS bool
	// OAuth adds a SASL_PLAINTEXT listener taking OAUTHBEARER tokens that
	// the issuer signs (Broker.OAuth; auth.go).
	OAuth *Issuer
	// Port is the plaintext listener's port (0: a free one).
	Port int
	// JVMOptions replace the test default (a small heap, the C1 compiler
	// only: it starts a second faster and keeps up with the tests' loads).
	JVMOptions []string
}

// defaultJVM are the JVM options for tests; measured on 2 cores: ready in
// about 2.2 s against 3.2 s with the C2 compiler too.
var defaultJVM = []string{"-Xms256m", "-Xmx768m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
	"-Xshare:auto", "-XX:-UsePerfData", "-Djava.awt.headless=true"}

// ScriptJVM are the options Kafka's own kafka-server-start.sh and
// kafka-run-class.sh start a broker with (a 1 GiB heap, G1 with 20 ms
// pauses, both compilers): what a benchmark runs, for a broker costs the
// machine as it does in production. The tests' C1-only broker costs more:
// at 4,000 events/s on 2 cores it left the machine 12 to 16% idle against
// 22 to 24%, and the relay's p99 was 7.6 to 15.0 ms against 2.7 to 3.1.
var ScriptJVM = []string{"-Xms1G", "-Xmx1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"}

// Broker is an Apache Kafka broker started by the harness, or one named by
// BrokersEnv (External).
type Broker struct {
	// Brokers are the bootstrap addresses of the plaintext listener.
	Brokers []string
	// SASLSSL are those of the SASL_SSL listener (Options.Secure), whose
	// certificate CA signed; SASLPlaintext those of SASL_PLAINTEXT.
	SASLSSL, SASLPlaintext []string
	CA                     *tlstest.CA
	// Proxied are the bootstrap addresses of the listener behind Proxy
	// (Options.Proxied).
	Proxied []string
	Proxy   *faultproxy.Proxy
	// listening are every listener's own addresses, which a start waits
	// for: a listener whose port was taken fails the broker after its
	// first listener already serves.
	listening []string
	// MTLS and OAuth are the bootstrap addresses of the listeners of
	// Options.MTLS and Options.OAuth.
	MTLS, OAuth []string
	// Dir holds the broker's configuration, its log (broker.log) and, in
	// Dir/data, its data. Empty for an external broker.
	Dir string
	// ID is the node's node.id (1 for a broker on its own).
	ID int32
	// Controller is the address of a controller's listener (a node of
	// StartCluster's quorum); empty for a node that is a broker only.
	Controller string

	external bool
	shared   bool
	t        testing.TB // the test a private broker belongs to
	java     string
	jars     string
	jvm      []string
	// disk is the small disk the node's data lies on (ClusterOptions.Disk);
	// nil for the machine's.
	disk *disk
	mu   sync.Mutex
	p    *proc.Process // nil when not running
}

// DataDir is where the broker keeps its logs and metadata.
func (b *Broker) DataDir() string {
	if b.Dir == "" {
		return ""
	}
	return filepath.Join(b.Dir, "data")
}

// External tells a broker named by BrokersEnv: it cannot be killed,
// restarted or reconfigured, and has only a plaintext listener.
func (b *Broker) External() bool { return b.external }

var shared struct {
	mu     sync.Mutex
	broker *Broker
	err    error
}

// Shared returns the package's Apache Kafka, started by the first call
// with Secure and Proxied listeners and stopped by Main (or, without Main,
// killed with the test binary), or the Kafka BrokersEnv names. Topics a
// test creates are deleted when it ends, so that the next test starts
// without them; tests of a package do not run in parallel on it. A test
// must not kill, restart or reconfigure it: Start gives a broker of its
// own for that.
func Shared(t testing.TB) *Broker {
	t.Helper()
	var b *Broker
	if env := os.Getenv(BrokersEnv); env != "" {
		brokers := splitBrokers(env)
		if len(brokers) == 0 {
			t.Fatalf("kafkatest: %s=%q names no broker", BrokersEnv, env)
		}
		b = &Broker{Brokers: brokers, external: true}
	} else {
		b = sharedLocal(t)
	}
	deleteNewTopics(t, b.Brokers)
	return b
}

// SharedLocal is Shared without BrokersEnv: always the harness's own
// broker, for tests that need its SASL, TLS or proxied listeners.
func SharedLocal(t testing.TB) *Broker {
	t.Helper()
	b := sharedLocal(t)
	deleteNewTopics(t, b.Brokers)
	return b
}

func sharedLocal(t testing.TB) *Broker {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.broker == nil && shared.err == nil {
		shared.broker, shared.err = start(Options{Secure: true, Proxied: true})
		if shared.broker != nil {
			shared.broker.shared = true
		}
	}
	if shared.err != nil {
		t.Fatalf("kafkatest: the shared Apache Kafka: %v", shared.err)
	}
	return shared.broker
}

// Main runs the tests, then stops the broker Shared started. Wrap the
// package's TestMain runner with it:
//
//	func TestMain(m *testing.M) { pgcluster.Main(kafkatest.Main(m)) }
func Main(m interface{ Run() int }) interface{ Run() int } { return mainRunner{m} }

type mainRunner struct{ m interface{ Run() int } }

func (r mainRunner) Run() int {
	code := r.m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if b := shared.broker; b != nil {
		b.close()
		shared.broker = nil
	}
	return code
}

// Start starts an Apache Kafka broker for the test, stopped and removed
// when the test ends. Unlike Shared's, the test may Kill, Stop and Start
// it.
func Start(t testing.TB, opts Options) *Broker {
	t.Helper()
	b, err := start(opts)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	b.t = t
	t.Cleanup(b.close)
	return b
}

// Launch starts a broker outside any test (make kafka-run); Close stops
// it and removes its data.
func Launch(opts Options) (*Broker, error) { return start(opts) }

// Close kills the broker and removes its directory.
func (b *Broker) Close() { b.close() }

// listener is one of a broker's listeners.
type listener struct {
	name, protocol string
	port           int
	advertised     string // host:port; the listener's own address when empty
}

// start starts a broker, again on other ports when one it picked was
// taken before the broker bound it (freeport picks a port free a moment
// before: another test process may bind it meanwhile).
func start(opts Options) (*Broker, error) {
	b, err := startOnce(opts)
	for try := 1; err != nil && opts.Port == 0 && strings.Contains(err.Error(), "Address already in use") && try < 3; try++ {
		b, err = startOnce(opts)
	}
	return b, err
}

func startOnce(opts Options) (*Broker, error) {
	java, jars, err := install()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgoutbox-kafka-")
	if err != nil {
		return nil, err
	}
	b := &Broker{Dir: dir, ID: 1, java: java, jars: jars, jvm: opts.JVMOptions}
	if b.jvm == nil {
		b.jvm = defaultJVM
	}
	ok := false
	defer func() {
		if !ok {
			b.close()
		}
	}()
	// The directory goes with the test binary however it ends.
	if err := testbin.RemoveAtExit(dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	if opts.Port != 0 {
		ports[0] = opts.Port
	}
	ls := []listener{{name: "PLAINTEXT", protocol: "PLAINTEXT", port: ports[0]}, {name: "CONTROLLER", protocol: "PLAINTEXT", port: ports[1]}}
	if opts.Secure {
		ls = append(ls, listener{name: "SASL_SSL", protocol: "SASL_SSL", port: ports[2]},
			listener{name: "SASL_PLAINTEXT", protocol: "SASL_PLAINTEXT", port: ports[3]})
	}
	if opts.Proxied {
		target := "127.0.0.1:" + strconv.Itoa(ports[4])
		if b.Proxy, err = faultproxy.Forward(target); err != nil {
			return nil, err
		}
		ls = append(ls, listener{name: "PROXIED", protocol: "PLAINTEXT", port: ports[4], advertised: b.Proxy.Addr()})
		b.Proxied = []string{b.Proxy.Addr()}
	}
	authLs, err := b.authListeners(opts)
	if err != nil {
		return nil, err
	}
	ls = append(ls, authLs...)
	conf := maps.Clone(Settings)
	var names, protocols, advertised []string
	for _, l := range ls {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(l.port))
		names = append(names, l.name+"://"+addr)
		b.listening = append(b.listening, addr)
		protocols = append(protocols, l.name+":"+l.protocol)
		if l.name != "CONTROLLER" {
			a := addr
			if l.advertised != "" {
				a = l.advertised
			}
			advertised = append(advertised, l.name+"://"+a)
		}
		switch l.name {
		case "PLAINTEXT":
			b.Brokers = []string{addr}
		case "SASL_SSL":
			b.SASLSSL = []string{addr}
		case "SASL_PLAINTEXT":
			b.SASLPlaintext = []string{addr}
		}
	}
	conf["process.roles"] = "broker,controller"
	conf["node.id"] = "1"
	conf["controller.quorum.voters"] = "1@127.0.0.1:" + strconv.Itoa(ports[1])
	conf["controller.listener.names"] = "CONTROLLER"
	conf["inter.broker.listener.name"] = "PLAINTEXT"
	conf["listeners"] = strings.Join(names, ",")
	conf["advertised.listeners"] = strings.Join(advertised, ",")
	conf["listener.security.protocol.map"] = strings.Join(protocols, ",")
	conf["log.dirs"] = b.DataDir()
	if opts.Secure {
		if err := b.secure(conf); err != nil {
			return nil, err
		}
	}
	if err := b.authSettings(opts, conf); err != nil {
		return nil, err
	}
	if err := b.writeConfig(conf, opts.Config); err != nil {
		return nil, err
	}
	if err := b.format(opts.Secure); err != nil {
		return nil, err
	}
	if err := b.run(); err != nil {
		return nil, err
	}
	ok = true
	return b, nil
}

// secure adds the SASL listeners' settings and the authorizer to conf.
func (b *Broker) secure(conf map[string]string) error {
	if b.CA == nil { // a cluster's brokers share one
		b.CA = tlstest.New(nopTB{})
	}
	key, err := x509.MarshalPKCS8PrivateKey(b.CA.Server.PrivateKey)
	if err != nil {
		return err
	}
	var pemData []byte
	pemData = append(pemData, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})...)
	for _, der := range b.CA.Server.Certificate {
		pemData = append(pemData, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	keystore := filepath.Join(b.Dir, "broker.pem")
	if err := os.WriteFile(keystore, pemData, 0o600); err != nil {
		return err
	}
	const scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	plain := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s" user_%s="%s";`,
		User, Password, LimitedUser, LimitedPassword)
	for _, l := range []string{"sasl_ssl", "sasl_plaintext"} {
		conf["listener.name."+l+".scram-sha-256.sasl.jaas.config"] = scram
		conf["listener.name."+l+".scram-sha-512.sasl.jaas.config"] = scram
	}
	conf["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = plain
	conf["listener.name.sasl_ssl.sasl.enabled.mechanisms"] = "SCRAM-SHA-256,SCRAM-SHA-512"
	conf["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
	conf["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
	conf["listener.name.sasl_ssl.ssl.keystore.type"] = "PEM"
	conf["listener.name.sasl_ssl.ssl.keystore.location"] = keystore
	conf["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	conf["super.users"] = "User:ANONYMOUS;User:" + User
	return nil
}

// log4j sends the broker's warnings to its standard output (broker.log);
// its info lines cost CPU the tests need.
const log4j = `Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
`

// writeConfig writes the node's server.properties, conf with extra over
// it, and its log4j configuration.
func (b *Broker) writeConfig(conf, extra map[string]string) error {
	maps.Copy(conf, extra)
	if err := writeProperties(filepath.Join(b.Dir, "server.properties"), conf); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.Dir, "log4j2.yaml"), []byte(log4j), 0o644)
}

func writeProperties(path string, conf map[string]string) error {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		fmt.Fprintf(&sb, "%s=%s\n", k, conf[k])
	}
	return os.WriteFile(path, []byte(sb.String()), 0o600)
}

// clusterID is the cluster id every node's storage is formatted with.
const clusterID = "pgoutbox-test-cluster1"

// format formats the storage (kafka-storage format), with the SCRAM users
// when secure.
func (b *Broker) format(secure bool) error {
	args := append(slices.Clone(b.jvm), "-cp", b.jars, "kafka.tools.StorageTool", "format",
		"--cluster-id", clusterID, "--config", filepath.Join(b.Dir, "server.properties"), "--ignore-formatted")
	if secure {
		for _, u := range [][2]string{{User, Password}, {LimitedUser, LimitedPassword}} {
			for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
				args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, u[0], u[1]))
			}
		}
	}
	bin, args := b.command(args)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("formatting Kafka's storage: %v\n%s", err, out)
	}
	return nil
}

// command is how java runs with args for the node: in the mount namespace
// of its small disk when it has one.
func (b *Broker) command(args []string) (string, []string) {
	if b.disk == nil {
		return b.java, args
	}
	return "nsenter", append([]string{"--target", strconv.Itoa(b.disk.holder.PID()), "--mount", "--", b.java}, args...)
}

// readyTimeout bounds a start, from the JVM's start to the broker serving
// metadata; seen: 2-3 s on 2 idle cores, and over 90 s for a broker of a
// cluster restarted on 2 cores under a load average of 80.
const readyTimeout = 3 * time.Minute

// run starts the broker process and waits until it serves.
func (b *Broker) run() error {
	log, err := os.OpenFile(filepath.Join(b.Dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	bin, args := b.command(append(slices.Clone(b.jvm), "-Dlog4j2.configurationFile="+filepath.Join(b.Dir, "log4j2.yaml"),
		"-cp", b.jars, "kafka.Kafka", filepath.Join(b.Dir, "server.properties")))
	p, err := proc.Start("kafka", bin, args, nil, log)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if len(b.Brokers) == 0 {
		err = waitListening(ctx, b.Controller, p.Exited())
	} else {
		err = waitServing(ctx, b.Brokers, b.ID, p.Exited())
	}
	for _, addr := range b.listening {
		if err == nil {
			err = waitListening(ctx, addr, p.Exited())
		}
	}
	if err == nil {
		// A listener whose port another process took (its dial above
		// reaches that process) stops the broker about 0.7 s after the
		// others serve: give it that time, and start again elsewhere.
		select {
		case <-p.Exited():
			err = errors.New("it exited just after it started")
		case <-time.After(1500 * time.Millisecond):
		}
	}
	if err != nil {
		p.Kill()
		return fmt.Errorf("Apache Kafka in %s did not start: %v\n%s%s", b.Dir, err, b.logTail(), p.Output())
	}
	b.mu.Lock()
	b.p = p
	b.mu.Unlock()
	go func() {
		<-p.Exited()
		b.mu.Lock()
		unexpected := b.p == p
		b.mu.Unlock()
		if unexpected {
			// No test is told: say it where the test binary's output goes.
			fmt.Fprintf(os.Stderr, "kafkatest: Apache Kafka in %s exited by itself: %v\n%s%s\n", b.Dir, p.Err(), b.logTail(), p.Output())
		}
	}()
	return nil
}

// waitServing waits until the broker answers a metadata request listing
// itself (node id): it has registered with the controller and been
// unfenced, so it can lead partitions.
func waitServing(ctx context.Context, brokers []string, id int32, exited <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	return waitUntil(ctx, "serving", exited, func() error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		if err == nil && !slices.ContainsFunc(resp.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == id }) {
			err = fmt.Errorf("node %d not listed yet", id)
		}
		return err
	})
}

// waitListening waits until a controller accepts connections on addr.
func waitListening(ctx context.Context, addr string, exited <-chan struct{}) error {
	return waitUntil(ctx, "listening", exited, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// waitUntil tries ready every 100 ms until it succeeds, the process exits
// or ctx ends.
func waitUntil(ctx context.Context, what string, exited <-chan struct{}, ready func() error) error {
	for {
		last := ready()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("the process exited")
		case <-ctx.Done():
			return fmt.Errorf("not %s within %v: %v", what, readyTimeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logTail is the end of broker.log, for errors.
func (b *Broker) logTail() string {
	data, _ := os.ReadFile(filepath.Join(b.Dir, "broker.log"))
	if len(data) > 8192 {
		data = data[len(data)-8192:]
	}
	return string(data)
}

// Log is what the broker logged (warnings and errors).
func (b *Broker) Log() string {
	data, _ := os.ReadFile(filepath.Join(b.Dir, "broker.log"))
	return string(data)
}

// take checks that the test may verb the broker (a broker of its own)
// and returns its running process, which it no longer holds.
func (b *Broker) take(verb string) (*proc.Process, error) {
	if b.external || b.shared {
		return nil, fmt.Errorf("cannot %s a shared or external broker: use Start", verb)
	}
	b.mu.Lock()
	p := b.p
	b.p = nil
	b.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("%s: the broker in %s is not running", verb, b.Dir)
	}
	return p, nil
}

// Kill sends SIGKILL and waits for the exit: what the broker acknowledged
// and the kernel holds survives, nothing else is flushed.
func (b *Broker) Kill() {
	b.t.Helper()
	if err := b.kill(); err != nil {
		b.t.Fatalf("kafkatest: %v", err)
	}
}

func (b *Broker) kill() error {
	p, err := b.take("kill")
	if err != nil {
		return err
	}
	p.Kill()
	return nil
}

// kafkaStopTimeout bounds a controlled shutdown.
const kafkaStopTimeout = 60 * time.Second

// Stop sends SIGTERM and waits for the exit (a controlled shutdown; the
// JVM's exit status after SIGTERM is 143, not a failure). The test fails
// if the broker is still running after a minute.
func (b *Broker) Stop() {
	b.t.Helper()
	if err := b.stop(); err != nil {
		b.t.Fatalf("kafkatest: %v", err)
	}
}

func (b *Broker) stop() error {
	p, err := b.take("stop")
	if err != nil {
		return err
	}
	start := time.Now()
	_ = p.Stop(kafkaStopTimeout)
	if time.Since(start) >= kafkaStopTimeout {
		return fmt.Errorf("Kafka in %s did not stop within %v of SIGTERM", b.Dir, kafkaStopTimeout)
	}
	return nil
}

// Start starts the broker again on its data, on the same ports.
func (b *Broker) Start() {
	b.t.Helper()
	if err := b.restart(); err != nil {
		b.t.Fatalf("kafkatest: %v", err)
	}
}

func (b *Broker) restart() error {
	if b.external || b.shared {
		return errors.New("cannot start a shared or external broker again: use Start")
	}
	if b.Running() {
		return fmt.Errorf("the broker in %s is already running", b.Dir)
	}
	if err := b.run(); err != nil {
		return fmt.Errorf("restarting: %w", err)
	}
	return nil
}

// PID is the process id of the node's JVM (0: not running).
func (b *Broker) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return 0
	}
	return b.p.PID()
}

// Running tells whether the broker's process runs: started by the harness,
// not killed or stopped since, and not exited by itself (after its disk
// filled, say).
func (b *Broker) Running() bool {
	b.mu.Lock()
	p := b.p
	b.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

// close kills the broker and removes its directory.
func (b *Broker) close() {
	b.mu.Lock()
	p := b.p
	b.p = nil
	b.mu.Unlock()
	if p != nil {
		p.Kill() // at once: its data is thrown away
	}
	if b.disk != nil {
		b.disk.close()
	}
	if b.Proxy != nil {
		b.Proxy.Close()
	}
	if b.Dir != "" {
		os.RemoveAll(b.Dir)
	}
}

// SetConfig sets a cluster-wide broker setting that Kafka lets change
// while it runs (message.max.bytes, say) until the test ends, and waits
// until the broker reports it. The broker must be the test's own or
// SharedLocal's.
func (b *Broker) SetConfig(t testing.TB, key, value string) {
	t.Helper()
	if b.external {
		t.Fatalf("kafkatest: SetConfig %s on an external broker", key)
	}
	alter := func(op kadm.IncrementalOp, v *string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: v}})
		if err == nil {
			for _, r := range resp {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			return err
		}
		want := v
		for ctx.Err() == nil {
			rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
			if err == nil {
				for _, rc := range rcs {
					for _, c := range rc.Configs {
						if c.Key == key && (want == nil && c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || want != nil && c.Value != nil && *c.Value == *want) {
							return nil
						}
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("the broker does not report %s=%v within 20s", key, v)
	}
	if err := alter(kadm.SetConfig, &value); err != nil {
		t.Fatalf("kafkatest: setting %s=%s: %v", key, value, err)
	}
	t.Cleanup(func() {
		if err := alter(kadm.DeleteConfig, nil); err != nil {
			t.Errorf("kafkatest: restoring %s: %v", key, err)
		}
	})
}

// deleteNewTopics deletes, when the test ends, the topics created while
// it ran, and fails the test if they are not gone within 30 s.
func deleteNewTopics(t testing.TB, brokers []string) {
	t.Helper()
	before, err := topics(brokers)
	if err != nil {
		t.Fatalf("kafkatest: listing topics: %v", err)
	}
	t.Cleanup(func() {
		now, err := topics(brokers)
		if err != nil {
			t.Errorf("kafkatest: listing topics: %v", err)
			return
		}
		var gone []string
		for name := range now {
			if !before[name] {
				gone = append(gone, name)
			}
		}
		if len(gone) == 0 {
			return
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			t.Errorf("kafkatest: %v", err)
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm := kadm.NewClient(cl)
		resp, err := adm.DeleteTopics(ctx, gone...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Errorf("kafkatest: deleting the test's topics %v: %v", gone, err)
			return
		}
		// Deletion completes in the background; the next test must not
		// find the topics still there.
		for ctx.Err() == nil {
			left, err := topics(brokers)
			if err == nil && !slices.ContainsFunc(gone, func(n string) bool { return left[n] }) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("kafkatest: the test's topics %v are not deleted after 30s", gone)
	})
}

// topics lists the topics that are not Kafka's own.
func topics(brokers []string) (map[string]bool, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for name := range list {
		out[name] = true
	}
	return out, nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		// Outside the kernel's range for outgoing connections: a broker
		// restarted on its address finds the port free.
		ln, err := freeport.Listen()
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// install finds java and the jars of Version, installing them with
// .ci/install-kafka (Maven) into the module's .cache/kafka on first use
// when DirEnv is unset.
func install() (java, jars string, err error) {
	in, err := testbin.Install("Apache Kafka "+Version, "kafka", "install-kafka", JavaEnv, DirEnv, "kafka", Version)
	return in.Java, filepath.Join(in.Dir, "libs", "*"), err
}

// nopTB lets tlstest make the shared broker's CA outside any one test:
// its only failures are the crypto library's.
type nopTB struct{ testing.TB }

func (nopTB) Helper() {}
func (nopTB) Fatal(args ...any) {
	panic(fmt.Sprint(append([]any{"kafkatest: "}, args...)...))
}
