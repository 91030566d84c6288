// Package rocketmqtest starts Apache RocketMQ for the tests: a name server
// and one broker, each its own JVM, run from the jars .ci/install-rocketmq
// copies from Maven Central into a cache directory, on free loopback
// ports, with their data in the test's temporary directory. A test may
// kill the broker (SIGKILL), stop it (SIGSTOP) and start it again on the
// same ports and store.
//
// What the harness relies on, as seen with 5.3.3 on Java 17:
//
//   - Maven Central serves 5.3.3 and 5.2.0 whole, not 5.3.2 (it lacks
//     rocketmq-namesrv's jar).
//   - Both startups exit at once unless ROCKETMQ_HOME or
//     -Drocketmq.home.dir is set, though they read nothing from it. Their
//     logging configuration is the first rmq.*.logback.xml on the class
//     path, the broker's also for the name server, writing under ~/logs:
//     -Drmq.logback.configurationFile replaces it (standard output here),
//     and -Duser.home keeps whatever else defaults to the home directory
//     in the test's directory.
//   - The broker binds listenPort and listenPort-2 (the "fast" or VIP
//     channel) on bindAddress, and listenPort+1 (HA) on every interface:
//     all three are picked free. The name server binds only its
//     listenPort.
//   - The broker's first registration with the name server goes only to
//     name servers a scan of its has found answering, mostly none yet; the
//     next is 10 s later. A change of its brokerPermission (to what it
//     is) registers it at once, and rewrites broker.conf with every
//     setting, which a restart writes anew.
//   - It acknowledges a message once it is in the commit log, and puts it
//     into its topic's consume queue (what max offsets and pulls read) a
//     moment later: Messages first waits for dispatchBehindBytes of the
//     runtime information to be 0. That information fails for about a
//     second after a start, and scans the whole timer wheel (175 ms) when
//     there is one: the broker runs without (timerWheelEnable=false: a
//     message with TIMER_DELIVER_MS is refused; delay levels work).
//   - It refuses writes once the disk is fuller than
//     diskSpaceWarningLevelRatio (90 % by default): the tests' is 99.
//     diskMaxUsedSpaceRatio is capped at 95 whatever the file says.
//   - A start (name server, then broker, until the broker is routed and
//     answers) takes about 3 s on 2 cores; a restart of the broker after
//     SIGKILL about 2 s, with everything it acknowledged. Resident memory
//     after a few messages: about 130 MB for the name server, 160 MB for
//     the broker.
//   - With ACL (StartWithACL) it refuses every request not signed by a
//     user it knows, answering NO_PERMISSION with a remark that says why;
//     the name server checks nothing. A start takes about as long.
//   - It adds CLUSTER, MSG_REGION and TRACE_ON to every message's
//     properties, and stores a batch as separate messages, one queue
//     offset each, in the queue the batch was sent to. A topic created by
//     a first send (through TBW102, 8 queues) gets the producer's queue
//     count (the Go client's default: 4).
//
// And of Apache's Go client (github.com/apache/rocketmq-client-go/v2),
// which the tests use to produce and Messages to read:
//
//   - It logs to standard error by default: the first Start silences it.
//   - Producers and consumers with the same instance name (default: the
//     process ID) share one client, which refuses a second name server
//     ("GetOrNewRocketMQClient faild"): give each its own
//     (producer.WithInstanceName, consumer.WithInstance).
//   - A pull of a queue with nothing new is held by the broker for up to
//     20 s (long polling): Messages asks each queue's max offset first
//     and pulls only below it.
//   - Its admin's CreateTopic ignores the broker's answer: CreateTopic
//     here sends the request itself and checks the answer.
//   - Message.WithProperty drops a property whose value is empty. Bodies
//     over 4 KiB are compressed (zlib) unless
//     WithCompressMsgBodyOverHowmuch says otherwise. A batch's messages
//     get no UNIQ_KEY: their ID is the broker's (its address and the
//     commit log offset). A consumer's messages get MIN_OFFSET and
//     MAX_OFFSET properties added: Messages decodes the stored ones
//     itself.
package rocketmqtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

const (
	// Version is the release .ci/rocketmq/pom.xml installs.
	Version = "5.3.3"
	// DirEnv names the directory .ci/install-rocketmq installed into.
	// Unset, the module's .cache/rocketmq is used, installed there on
	// first use.
	DirEnv = "PGOUTBOX_ROCKETMQ_DIR"
	// JavaEnv names the java binary to run it with (default: java on
	// PATH; RocketMQ 5 runs on Java 8 or later).
	JavaEnv = "PGOUTBOX_JAVA"

	// Cluster and broker names of the one broker.
	clusterName = "DefaultCluster"
	brokerName  = "broker-a"
)

// readyTimeout bounds a start of either process.
const readyTimeout = 2 * time.Minute

// jvm are the options of both JVMs: a small heap (the broker's commit log
// and queues are mapped files, outside it), the C1 compiler only (it
// starts faster).
var jvm = []string{"-Xms64m", "-XX:MaxDirectMemorySize=128m", "-XX:TieredStopAtLevel=1",
	"-XX:+UseSerialGC", "-XX:-UsePerfData", "-XX:-OmitStackTraceInFastThrow",
	"-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true"}

// namesrvConf is the name server's configuration; the port and paths are
// added per server.
const namesrvConf = `bindAddress=127.0.0.1
`

// brokerConf is the broker's configuration; ports and paths are added per
// server. The rest are RocketMQ's defaults (asynchronous flush: what the
// broker acknowledged is in the page cache, which survives a SIGKILL).
const brokerConf = `brokerClusterName=` + clusterName + `
brokerName=` + brokerName + `
brokerId=0
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
# Commit log files of 64 MiB rather than 1 GiB.
mappedFileSizeCommitLog=67108864
# No timer wheel (messages delivered at a time, TIMER_DELIVER_MS; delay
# levels work without it): its file is 37 MiB, and the runtime
# information (see dispatched) scans it whole, 175 ms a time.
timerWheelEnable=false
# The disks the tests run on may be nearly full.
diskMaxUsedSpaceRatio=99
diskSpaceWarningLevelRatio=99
diskSpaceCleanForciblyRatio=99
`

// logback prints to standard output, which goes to the process's log
// file; the statistics' minutely lines and a line for each connection are
// left out.
const logback = `<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5p [%t] %c - %m%n</pattern></encoder>
  </appender>
  <logger name="RocketmqStats" level="WARN"/>
  <logger name="RocketmqWaterMark" level="WARN"/>
  <logger name="RocketmqBrokerMetrics" level="WARN"/>
  <logger name="RocketmqTraffic" level="WARN"/>
  <logger name="RocketmqRemoting" level="WARN"/>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
`

// Server is a name server and a broker. Its methods fail the test it was
// started for: call them from that test's goroutine.
type Server struct {
	// Dir holds the configuration files, namesrv.log and broker.log, the
	// broker's store (Dir/store) and the JVMs' home and temporary
	// directories.
	Dir string
	// Started is how long the last start took: for Start, from the name
	// server's JVM's start until the name server routes to the broker and
	// the broker answers; for Restart, the broker's alone.
	Started time.Duration

	t                  testing.TB
	java, jars         string
	nsPort, brokerPort int
	namesrv, broker    *proc.Process // nil when not running
	// admin is the super user of a broker with ACL (StartWithACL), who
	// signs the harness's requests and Messages' reads; zero otherwise.
	admin credentials
}

// credentials are an access key and its secret key.
type credentials struct{ accessKey, secretKey string }

// Start starts a name server and a broker on free loopback ports, the
// broker's store in the test's temporary directory, and waits until the
// broker is registered with the name server and answers. Both are killed
// when the test ends; their logs are logged if the test failed.
func Start(t testing.TB) *Server {
	t.Helper()
	return launch(t, credentials{})
}

// launch starts a name server and a broker, the broker with ACL when
// admin is set.
func launch(t testing.TB, admin credentials) *Server {
	t.Helper()
	java, jars := install(t)
	quietClient.Do(func() { rlog.SetLogger(quiet{}) })
	// TempDir first: cleanups run last-in first-out, so the processes are
	// killed before their directory is removed.
	s := &Server{Dir: t.TempDir(), t: t, java: java, jars: jars, admin: admin}
	t.Cleanup(func() {
		for _, p := range []**proc.Process{&s.broker, &s.namesrv} {
			if *p != nil {
				(*p).Kill() // at once: the data is thrown away
				*p = nil
			}
		}
		if t.Failed() {
			t.Logf("rocketmqtest: the logs (%s) end:\n%s", s.Dir, s.LogTail(16384))
		}
	})
	if err := os.WriteFile(filepath.Join(s.Dir, "logback.xml"), []byte(logback), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"home", "tmp"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	// The ports were free a moment before: another process may take one
	// before the JVM binds it. Then again, elsewhere.
	for try := 0; try < 3; try++ {
		if err = s.pickPorts(); err != nil {
			break
		}
		begin := time.Now()
		if err = s.runNamesrv(); err == nil {
			err = s.runBroker()
		}
		s.Started = time.Since(begin)
		if err == nil || !strings.Contains(err.Error(), "Address already in use") {
			break
		}
		for _, p := range []**proc.Process{&s.broker, &s.namesrv} {
			if *p != nil {
				(*p).Kill()
				*p = nil
			}
		}
		os.RemoveAll(filepath.Join(s.Dir, "store"))
	}
	if err != nil {
		t.Fatalf("rocketmqtest: %v", err)
	}
	return s
}

// The broker's super user on a server with ACL, as whom the harness
// creates topics, reads routes' offsets and reads messages.
const (
	AdminAccessKey = "rocketmqtest_admin"
	adminSecretKey = "rocketmqtest-admin-secret"
)

// StartWithACL is Start with the broker's access control on: every
// request to it must be signed (the Java client's AclClientRPCHook), and
// accessKey with secretKey is a user who may send to every topic (and so
// have the broker create one at its first message) and do nothing else.
// CreateTopic, Queues and Messages sign their requests as a super user,
// AdminAccessKey. The name server checks nothing.
//
// RocketMQ 5.3.3 has only ACL 2.0 (its acl module, ACL 1.0's
// plain_acl.yml and aclEnable, is gone; plain_acl.yml is only read to
// migrate it): authenticationEnabled and authorizationEnabled in
// broker.conf, users and their policies in a RocksDB under the store's
// config directory. The super user is initAuthenticationUser; the user
// and its policy (Topic:*, Pub, Allow) are created by the super user's
// requests, as mqadmin createUser and createAcl send them. Its
// DefaultAuthenticationProvider checks ACL 1.0's signatures (AccessKey
// and Signature among the header's fields). A refused request is
// answered NO_PERMISSION (16), the remark saying why: "check signature
// failed." for a wrong secret key, "username cannot be null." for a
// request without AccessKey, "User:NAME is not found." for an unknown
// one, "User:NAME has no permission to access Topic:T from IP, no
// matched policies." for what the user may not do.
func StartWithACL(t testing.TB, accessKey, secretKey string) *Server {
	t.Helper()
	if accessKey == "" || secretKey == "" || accessKey == AdminAccessKey {
		t.Fatalf("rocketmqtest: StartWithACL needs an access key other than %s, and a secret key", AdminAccessKey)
	}
	s := launch(t, credentials{AdminAccessKey, adminSecretKey})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// UserInfo and AclInfo, as mqadmin sends them.
	user, err := json.Marshal(map[string]string{"username": accessKey, "password": secretKey, "userType": "Normal"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.invoke(ctx, s.BrokerAddr(), codeAuthCreateUser, map[string]string{"username": accessKey}, user); err != nil {
		t.Fatalf("rocketmqtest: creating user %s: %v", accessKey, err)
	}
	type entry struct {
		Resource string   `json:"resource"`
		Actions  []string `json:"actions"`
		Decision string   `json:"decision"`
	}
	type policy struct {
		PolicyType string  `json:"policyType"`
		Entries    []entry `json:"entries"`
	}
	acl, err := json.Marshal(struct {
		Subject  string   `json:"subject"`
		Policies []policy `json:"policies"`
	}{"User:" + accessKey, []policy{{"Custom", []entry{{"Topic:*", []string{"Pub"}, "Allow"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.invoke(ctx, s.BrokerAddr(), codeAuthCreateACL, map[string]string{"subject": "User:" + accessKey}, acl); err != nil {
		t.Fatalf("rocketmqtest: granting user %s Pub on every topic: %v", accessKey, err)
	}
	return s
}

// aclConf is the broker's configuration of access control, admin its
// super user, also as whom it signs its own requests.
func aclConf(admin credentials) string {
	user, _ := json.Marshal(map[string]string{"username": admin.accessKey, "password": admin.secretKey})
	inner, _ := json.Marshal(map[string]string{"accessKey": admin.accessKey, "secretKey": admin.secretKey})
	return `authenticationEnabled=true
authenticationProvider=org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider
authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider
authorizationEnabled=true
authorizationProvider=org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider
authorizationMetadataProvider=org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider
initAuthenticationUser=` + string(user) + `
innerClientAuthenticationCredentials=` + string(inner) + "\n"
}

var quietClient sync.Once

// quiet is the Go client's logger: none.
type quiet struct{}

func (quiet) Debug(string, map[string]interface{})   {}
func (quiet) Info(string, map[string]interface{})    {}
func (quiet) Warning(string, map[string]interface{}) {}
func (quiet) Error(string, map[string]interface{})   {}
func (quiet) Fatal(msg string, fields map[string]interface{}) {
	panic(fmt.Sprintf("rocketmq client: %s %v", msg, fields))
}
func (quiet) Level(string)            {}
func (quiet) OutputPath(string) error { return nil }

// install runs .ci/install-rocketmq, once per test binary: at once when
// the cache holds the jars.
func install(t testing.TB) (java, jars string) {
	t.Helper()
	in, err := testbin.Install("Apache RocketMQ "+Version, "rocketmq", "install-rocketmq", JavaEnv, DirEnv, "rocketmq")
	if err != nil {
		t.Fatalf("rocketmqtest: %v", err)
	}
	return in.Java, filepath.Join(in.Dir, "lib", "*")
}

// pickPorts picks the name server's port and the broker's: one whose
// neighbours listenPort-2 and listenPort+1 are free too.
func (s *Server) pickPorts() error {
	var err error
	if s.nsPort, err = freeport.Port(); err != nil {
		return err
	}
	for range 100 {
		if s.brokerPort, err = freeport.Port(); err != nil {
			return err
		}
		if s.brokerPort-2 != s.nsPort && s.brokerPort+1 != s.nsPort &&
			free(s.brokerPort-2) && free(s.brokerPort+1) {
			return nil
		}
	}
	return errors.New("no free port whose neighbours -2 and +1 are free too")
}

// free tells whether port is free on every IPv4 interface (the broker's
// HA port listens on all of them).
func free(port int) bool {
	ln, err := net.Listen("tcp4", "0.0.0.0:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// NameServer is the name server's address, 127.0.0.1:PORT.
func (s *Server) NameServer() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.nsPort)) }

// BrokerAddr is the broker's address, 127.0.0.1:PORT, the same across
// restarts.
func (s *Server) BrokerAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.brokerPort))
}

// BrokerName is the broker's name, as routes and message queues name it.
func (s *Server) BrokerName() string { return brokerName }

// start starts a JVM running class with args, its output appended to
// Dir/log; heap is its -Xmx.
func (s *Server) start(name, heap, log, class string, args ...string) (*proc.Process, error) {
	f, err := os.OpenFile(filepath.Join(s.Dir, log), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	argv := append(append([]string(nil), jvm...), "-Xmx"+heap,
		"-Drocketmq.home.dir="+s.Dir, "-Duser.home="+filepath.Join(s.Dir, "home"),
		"-Djava.io.tmpdir="+filepath.Join(s.Dir, "tmp"),
		"-Drmq.logback.configurationFile="+filepath.Join(s.Dir, "logback.xml"),
		"-cp", s.jars, class)
	// Both streams, as the JVM writes them: a JVM that cannot start says
	// why on its standard error.
	p, err := proc.StartLogged(name, s.java, append(argv, args...), nil, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	go func() {
		<-p.Exited()
		f.Close()
	}()
	return p, nil
}

// runNamesrv writes the name server's configuration and starts it,
// waiting until it answers.
func (s *Server) runNamesrv() error {
	conf := filepath.Join(s.Dir, "namesrv.conf")
	text := namesrvConf + fmt.Sprintf("listenPort=%d\nkvConfigPath=%s\nconfigStorePath=%s\n", s.nsPort,
		filepath.Join(s.Dir, "namesrv", "kvConfig.json"), filepath.Join(s.Dir, "namesrv", "namesrv.properties"))
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return err
	}
	p, err := s.start("rocketmq name server", "128m", "namesrv.log", "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", conf)
	if err != nil {
		return err
	}
	err = p.Await(readyTimeout, 50*time.Millisecond, func(ctx context.Context) error {
		_, err := s.route(ctx, "TBW102") // not yet there: no broker
		if errors.Is(err, errNoTopic) {
			err = nil
		}
		return err
	})
	if err != nil {
		p.Kill()
		return fmt.Errorf("Apache RocketMQ's name server in %s did not start: %w\n%s", s.Dir, err, tail(filepath.Join(s.Dir, "namesrv.log"), 8192))
	}
	s.namesrv = p
	return nil
}

// runBroker writes the broker's configuration and starts it, waiting until
// the name server routes to it and it answers.
func (s *Server) runBroker() error {
	conf := filepath.Join(s.Dir, "broker.conf")
	store := filepath.Join(s.Dir, "store")
	text := brokerConf + fmt.Sprintf("listenPort=%d\nnamesrvAddr=%s\nstorePathRootDir=%s\nstorePathCommitLog=%s\n",
		s.brokerPort, s.NameServer(), store, filepath.Join(store, "commitlog"))
	if s.admin != (credentials{}) {
		text += aclConf(s.admin)
	}
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return err
	}
	p, err := s.start("rocketmq broker", "256m", "broker.log", "org.apache.rocketmq.broker.BrokerStartup", "-c", conf, "-n", s.NameServer())
	if err != nil {
		return err
	}
	var nudged time.Time
	err = p.Await(readyTimeout, 50*time.Millisecond, func(ctx context.Context) error {
		if _, err := s.maxOffset(ctx, "TBW102", 0); err != nil {
			return err
		}
		r, err := s.route(ctx, "TBW102")
		if err == nil && r.brokerAddr(brokerName) == s.BrokerAddr() {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("TBW102 is not routed to %s", s.BrokerAddr())
		}
		// The broker registers as it starts only with the name servers a
		// scan of its has found answering, mostly none yet, and then 10 s
		// later. A change of its permission (to what it is) registers it
		// at once.
		if time.Since(nudged) > 500*time.Millisecond {
			nudged = time.Now()
			if _, _, err := s.invoke(ctx, s.BrokerAddr(), codeUpdateBrokerConfig, nil, []byte("brokerPermission=6\n")); err != nil {
				return fmt.Errorf("registering: %w", err)
			}
		}
		return err
	})
	if err != nil {
		p.Kill()
		return fmt.Errorf("Apache RocketMQ's broker in %s did not start: %w\n%s", s.Dir, err, tail(filepath.Join(s.Dir, "broker.log"), 8192))
	}
	s.broker = p
	return nil
}

// Kill sends the broker SIGKILL and waits for the exit: what it
// acknowledged is in the page cache, which the OS has, so it survives.
// The name server runs on.
func (s *Server) Kill() {
	s.t.Helper()
	if s.broker == nil {
		s.t.Fatalf("rocketmqtest: cannot kill the broker on %s: not running", s.BrokerAddr())
	}
	s.broker.Kill()
	s.broker = nil
}

// Restart starts the broker again after Kill, on the same ports and
// store.
func (s *Server) Restart() {
	s.t.Helper()
	if s.broker != nil {
		s.t.Fatalf("rocketmqtest: the broker on %s is already running", s.BrokerAddr())
	}
	begin := time.Now()
	if err := s.runBroker(); err != nil {
		s.t.Fatalf("rocketmqtest: restarting: %v", err)
	}
	s.Started = time.Since(begin)
}

// Pause stops the broker (SIGSTOP): its connections stay open and
// unanswered until Resume.
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
}

// Resume continues the broker after Pause (SIGCONT).
func (s *Server) Resume() {
	s.t.Helper()
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.broker == nil {
		s.t.Fatalf("rocketmqtest: cannot signal the broker on %s: not running", s.BrokerAddr())
	}
	if err := syscall.Kill(s.broker.PID(), sig); err != nil {
		s.t.Fatalf("rocketmqtest: %v to the broker: %v", sig, err)
	}
}

// LogTail is the end of the broker's log and of the name server's, at
// most n bytes of each, across restarts.
func (s *Server) LogTail(n int) string {
	return "broker.log:\n" + tail(filepath.Join(s.Dir, "broker.log"), n) +
		"\nnamesrv.log:\n" + tail(filepath.Join(s.Dir, "namesrv.log"), n)
}

func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// CreateTopic creates topic on the broker with queues read and write
// queues (or changes an existing one's counts), and waits until the name
// server routes it so.
func (s *Server) CreateTopic(topic string, queues int) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := strconv.Itoa(queues)
	_, _, err := s.invoke(ctx, s.BrokerAddr(), codeUpdateAndCreateTopic, map[string]string{
		"topic": topic, "defaultTopic": "TBW102", "readQueueNums": n, "writeQueueNums": n,
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}, nil)
	if err != nil {
		s.t.Fatalf("rocketmqtest: creating topic %s: %v", topic, err)
	}
	for {
		got, err := s.queues(ctx, topic)
		if err == nil && got == queues {
			return
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("rocketmqtest: topic %s created, but the name server routes %d write queues (%v), not %d", topic, got, err, queues)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Queues is the number of write queues the name server routes for topic
// (on the one broker): 0 for a topic it does not know.
func (s *Server) Queues(topic string) int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := s.queues(ctx, topic)
	if err != nil {
		s.t.Fatalf("rocketmqtest: routes of %s: %v", topic, err)
	}
	return n
}

func (s *Server) queues(ctx context.Context, topic string) (int, error) {
	r, err := s.route(ctx, topic)
	if errors.Is(err, errNoTopic) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return r.queueData(brokerName).WriteQueueNums, nil
}

// Message is a stored message as a consumer pulls it.
type Message struct {
	Topic  string
	Queue  int
	Offset int64  // in the queue
	Keys   string // the KEYS property: keys separated by spaces
	Tags   string
	Body   []byte // uncompressed
	// Properties are the producer's own properties: System without the
	// names RocketMQ reserves (MessageConst's), such as KEYS, TAGS,
	// UNIQ_KEY, WAIT, CLUSTER.
	Properties map[string]string
	// System is every property as stored.
	System     map[string]string
	MsgID      string // the producer's UNIQ_KEY, else the broker's offset message ID
	BornHost   string // the producer's address, HOST:PORT
	Compressed bool   // the body was stored compressed
}

// systemProperties are the property names RocketMQ's MessageConst
// declares (5.3.3) for its own use; Java's Message refuses most of them as
// user properties.
var systemProperties = map[string]bool{}

func init() {
	for _, name := range strings.Fields(`KEYS TAGS WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID TRAN_MSG PGROUP
		MIN_OFFSET MAX_OFFSET BUYER_ID ORIGIN_MESSAGE_ID TRANSFER_FLAG CORRECTION_FLAG MQ2_FLAG RECONSUME_TIME
		MSG_REGION TRACE_ON UNIQ_KEY EXTEND_UNIQ_INFO MAX_RECONSUME_TIMES CONSUME_START_TIME INNER_NUM INNER_BASE
		CHECK_IMMUNITY_TIME_IN_SECONDS TRAN_PREPARED_QUEUE_OFFSET __transactionId__ TRANSACTION_CHECK_TIMES
		INSTANCE_ID CORRELATION_ID REPLY_TO_CLIENT TTL ARRIVE_TIME PUSH_REPLY_TIME CLUSTER MSG_TYPE POP_CK
		POP_CK_OFFSET 1ST_POP_TIME __SHARDINGKEY PROPERTY_FORWARD_QUEUE_ID REDIRECT INNER_MULTI_DISPATCH
		INNER_MULTI_QUEUE_OFFSET TRACE_CONTEXT TIMER_DELAY_SEC TIMER_DELIVER_MS __BORNHOST BORN_TIMESTAMP
		TIMER_ENQUEUE_MS TIMER_DEQUEUE_MS TIMER_ROLL_TIMES TIMER_OUT_MS TIMER_DEL_UNIQKEY TIMER_DELAY_LEVEL
		TIMER_DELAY_MS __CRC32# DLQ_ORIGIN_TOPIC DLQ_ORIGIN_MESSAGE_ID DUP_INFO`) {
		systemProperties[name] = true
	}
}

// Messages reads every message stored in every queue of topic, from
// offset 0 up to each queue's max offset when it is called, sorted by
// queue and offset; nil for a topic the name server does not know.
func (s *Server) Messages(topic string) []Message {
	s.t.Helper()
	out, err := s.messages(topic)
	if err != nil {
		s.t.Fatalf("rocketmqtest: reading %s: %v", topic, err)
	}
	return out
}

// readers numbers the pull consumers, each its own client.
var readers atomic.Int64

func (s *Server) messages(topic string) ([]Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := s.route(ctx, topic)
	if errors.Is(err, errNoTopic) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n := r.queueData(brokerName).ReadQueueNums
	if w := r.queueData(brokerName).WriteQueueNums; w > n {
		n = w
	}
	if err := s.dispatched(ctx); err != nil {
		return nil, err
	}
	max := make([]int64, n)
	empty := true
	for q := range max {
		if max[q], err = s.maxOffset(ctx, topic, q); err != nil {
			return nil, err
		}
		empty = empty && max[q] == 0
	}
	if empty {
		return nil, nil
	}
	opts := []consumer.Option{
		consumer.WithNameServer(primitive.NamesrvAddr{s.NameServer()}),
		consumer.WithGroupName("rocketmqtest_reader"),
		consumer.WithInstance(fmt.Sprintf("rocketmqtest-%d-%d", os.Getpid(), readers.Add(1))),
	}
	if s.admin != (credentials{}) {
		opts = append(opts, consumer.WithCredentials(primitive.Credentials{AccessKey: s.admin.accessKey, SecretKey: s.admin.secretKey}))
	}
	c, err := consumer.NewPullConsumer(opts...)
	if err != nil {
		return nil, err
	}
	if err := c.Assign(topic, nil); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	defer c.Shutdown()
	var out []Message
	for q := range max {
		mq := &primitive.MessageQueue{Topic: topic, BrokerName: brokerName, QueueId: q}
		for offset := int64(0); offset < max[q]; {
			res, err := c.PullFrom(ctx, mq, offset, 32)
			if err != nil {
				return nil, fmt.Errorf("queue %d at offset %d: %w", q, offset, err)
			}
			if res.Status == primitive.PullFound {
				// Decoded again from the body: the consumer's copies have
				// MIN_OFFSET and MAX_OFFSET added.
				for _, m := range primitive.DecodeMessage(res.GetBody()) {
					if m.QueueOffset >= max[q] {
						break
					}
					out = append(out, message(m, q))
				}
			}
			if res.NextBeginOffset <= offset {
				return nil, fmt.Errorf("queue %d at offset %d (of %d): pull status %v, next offset %d", q, offset, max[q], res.Status, res.NextBeginOffset)
			}
			offset = res.NextBeginOffset // also past the offsets before the first left, if some were removed
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Queue != out[j].Queue {
			return out[i].Queue < out[j].Queue
		}
		return out[i].Offset < out[j].Offset
	})
	return out, nil
}

func message(m *primitive.MessageExt, queue int) Message {
	all := m.GetProperties()
	user := map[string]string{}
	for k, v := range all {
		if !systemProperties[k] && !strings.HasPrefix(k, "__RMQ.TRANSIENT.") {
			user[k] = v
		}
	}
	return Message{Topic: m.Topic, Queue: queue, Offset: m.QueueOffset, Keys: m.GetKeys(), Tags: m.GetTags(),
		Body: m.Body, Properties: user, System: all, MsgID: m.MsgId, BornHost: m.BornHost,
		Compressed: m.SysFlag&primitive.FlagCompressed != 0}
}

// The remoting protocol's requests this package sends itself: the Go
// client's admin ignores the answer to a topic's creation, and has no
// call for a queue's max offset, a route without its cache, the broker's
// runtime information or its configuration, a user or an ACL.
const (
	codeUpdateAndCreateTopic = 17
	codeUpdateBrokerConfig   = 25
	codeGetBrokerRuntimeInfo = 28
	codeGetMaxOffset         = 30
	codeGetRouteInfo         = 105
	codeAuthCreateUser       = 3001
	codeAuthCreateACL        = 3006

	codeTopicNotExist = 17 // an answer's
)

var errNoTopic = errors.New("no such topic")

// command is a remoting command's header, JSON-serialized.
type command struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int               `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
	Serialize string            `json:"serializeTypeCurrentRPC"`
}

// invoke is the package's invoke, the request signed by the admin on a
// server with ACL.
func (s *Server) invoke(ctx context.Context, addr string, code int, fields map[string]string, body []byte) (map[string]string, []byte, error) {
	if s.admin != (credentials{}) {
		fields = sign(fields, body, s.admin)
	}
	return invoke(ctx, addr, code, fields, body)
}

// sign is fields with key's access key and signature added, as the Java
// client's AclClientRPCHook adds them: HMAC-SHA1 with the secret key of
// the fields' values in the order of their names (Java's TreeMap: the
// names here are ASCII), the access key's among them, then the body; in
// base64.
func sign(fields map[string]string, body []byte, key credentials) map[string]string {
	out := map[string]string{"AccessKey": key.accessKey}
	for k, v := range fields {
		out[k] = v
	}
	names := make([]string, 0, len(out))
	for k := range out {
		names = append(names, k)
	}
	sort.Strings(names)
	mac := hmac.New(sha1.New, []byte(key.secretKey))
	for _, k := range names {
		mac.Write([]byte(out[k]))
	}
	mac.Write(body)
	out["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return out
}

// invoke sends one request on a connection of its own and reads the
// answer: its header's fields and body, or an error for an answer other
// than success (errNoTopic for TOPIC_NOT_EXIST, else an *answerError).
func invoke(ctx context.Context, addr string, code int, fields map[string]string, body []byte) (map[string]string, []byte, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	// The Go client's version.
	header, err := json.Marshal(command{Code: code, Language: "GO", Version: 317, Opaque: 1, ExtFields: fields, Serialize: "JSON"})
	if err != nil {
		return nil, nil, err
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(header))) // JSON: serialization type 0
	if _, err := conn.Write(append(append(frame, header...), body...)); err != nil {
		return nil, nil, err
	}
	var size [8]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, nil, err
	}
	total, hlen := binary.BigEndian.Uint32(size[:4]), binary.BigEndian.Uint32(size[4:])
	if total < 4 || total > 64<<20 || hlen>>24 != 0 || hlen > total-4 {
		return nil, nil, fmt.Errorf("unexpected answer framing (length %d, header %#x)", total, hlen)
	}
	rest := make([]byte, total-4)
	if _, err := io.ReadFull(conn, rest); err != nil {
		return nil, nil, err
	}
	var resp command
	if err := json.Unmarshal(rest[:hlen], &resp); err != nil {
		return nil, nil, fmt.Errorf("answer's header: %w", err)
	}
	switch resp.Code {
	case 0:
		return resp.ExtFields, rest[hlen:], nil
	case codeTopicNotExist:
		return nil, nil, fmt.Errorf("%w: %s", errNoTopic, resp.Remark)
	default:
		return nil, nil, &answerError{request: code, code: resp.Code, remark: resp.Remark}
	}
}

// answerError is an answer other than success.
type answerError struct {
	request, code int
	remark        string
}

func (e *answerError) Error() string {
	return fmt.Sprintf("request %d answered %d: %s", e.request, e.code, e.remark)
}

// topicRoute is the name server's route of a topic.
type topicRoute struct {
	BrokerDatas []struct {
		BrokerName  string            `json:"brokerName"`
		BrokerAddrs map[string]string `json:"brokerAddrs"` // by broker ID; 0 is the master
	} `json:"brokerDatas"`
	QueueDatas []queueData `json:"queueDatas"`
}

type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
}

func (r *topicRoute) brokerAddr(broker string) string {
	for _, b := range r.BrokerDatas {
		if b.BrokerName == broker {
			return b.BrokerAddrs["0"]
		}
	}
	return ""
}

func (r *topicRoute) queueData(broker string) queueData {
	for _, q := range r.QueueDatas {
		if q.BrokerName == broker {
			return q
		}
	}
	return queueData{}
}

// route asks the name server for topic's route, in standard JSON (else
// the broker addresses' map has unquoted integer keys).
func (s *Server) route(ctx context.Context, topic string) (*topicRoute, error) {
	_, body, err := s.invoke(ctx, s.NameServer(), codeGetRouteInfo, map[string]string{"topic": topic, "acceptStandardJsonOnly": "true"}, nil)
	if err != nil {
		return nil, err
	}
	var r topicRoute
	if err := json.Unmarshal(bytes.TrimSpace(body), &r); err != nil {
		return nil, fmt.Errorf("route of %s: %w: %s", topic, err, body)
	}
	return &r, nil
}

// dispatched waits until the broker has put all of its commit log into
// the consume queues, which max offsets and pulls read: it does so a
// moment after it acknowledged a message. (Its runtime information, which
// says how far behind they are, fails for about a second after a start.)
func (s *Server) dispatched(ctx context.Context) error {
	for {
		_, body, err := s.invoke(ctx, s.BrokerAddr(), codeGetBrokerRuntimeInfo, nil, nil)
		behind := ""
		var answer *answerError
		switch {
		case errors.As(err, &answer):
		case err != nil:
			return fmt.Errorf("broker's runtime information: %w", err)
		default:
			var info struct {
				Table map[string]string `json:"table"`
			}
			if err := json.Unmarshal(body, &info); err != nil {
				return fmt.Errorf("broker's runtime information: %w", err)
			}
			var ok bool
			if behind, ok = info.Table["dispatchBehindBytes"]; !ok {
				return fmt.Errorf("broker's runtime information has no dispatchBehindBytes: %s", body)
			}
			if behind == "0" {
				return nil
			}
			err = fmt.Errorf("the consume queues are %s bytes behind the commit log", behind)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// maxOffset asks the broker for the offset after the last message its
// consume queue of topic lists (see dispatched).
func (s *Server) maxOffset(ctx context.Context, topic string, queue int) (int64, error) {
	fields, _, err := s.invoke(ctx, s.BrokerAddr(), codeGetMaxOffset,
		map[string]string{"topic": topic, "queueId": strconv.Itoa(queue)}, nil)
	if err != nil {
		return 0, fmt.Errorf("max offset of %s queue %d: %w", topic, queue, err)
	}
	off, err := strconv.ParseInt(fields["offset"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("max offset of %s queue %d: %w", topic, queue, err)
	}
	return off, nil
}
