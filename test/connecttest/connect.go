// Package connecttest runs Kafka Connect standalone with Debezium's
// PostgreSQL connector and its outbox router, from the jars
// .ci/install-debezium puts in a cache directory, for the differential
// corpus (test/compat): one worker per test package, on a free port, with
// its configuration, offsets and log in a directory of its own; connectors
// are added and removed through its REST API, as a Kafka Connect user adds
// them.
package connecttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

const (
	// DirEnv names the directory .ci/install-debezium installed into
	// (make sets it from DEBEZIUM_DIR). Unset, the module's
	// .cache/debezium is used, installed there on first use.
	DirEnv = "PGOUTBOX_DEBEZIUM_DIR"
	// JavaEnv names the java binary (default: java on PATH).
	JavaEnv = "PGOUTBOX_JAVA"
	// DebeziumVersion is the release .ci/debezium/plugin.pom.xml installs.
	DebeziumVersion = "3.6.1.Final"
)

// Options configure a worker.
type Options struct {
	// Brokers are the Kafka bootstrap servers the worker produces to.
	Brokers []string
	// Worker adds worker properties or overrides the defaults.
	Worker map[string]string
	// JVMOptions replace the default (a 512 MiB heap, the C1 compiler
	// only).
	JVMOptions []string
	// Plugins are more plugin.path entries, after Debezium's: Apicurio's
	// converters (registrytest.PluginDir), say.
	Plugins []string
	// ClassPath are more worker classpath entries, after Kafka's: jars
	// every plugin sees, as Debezium's CloudEventsConverter must see the
	// AvroConverter it builds itself.
	ClassPath []string
}

// defaultJVM: measured on 2 cores, the C1 compiler alone brings the REST
// API up sooner than tiered compilation, and the corpus's few hundred
// records never need C2.
var defaultJVM = []string{"-Xms128m", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
	"-Xshare:auto", "-XX:-UsePerfData", "-Djava.awt.headless=true"}

// tracing configures OpenTelemetry's SDK (in the plugin directory) as a user
// who traces does, without exporters: Debezium's router then injects a
// row's trace context (tracing.span.context.field) into its record.
var tracing = []string{"-Dotel.java.global-autoconfigure.enabled=true", "-Dotel.service.name=kafka-connect",
	"-Dotel.traces.exporter=none", "-Dotel.metrics.exporter=none", "-Dotel.logs.exporter=none"}

// log4j: the worker's and Debezium's INFO lines (what a connector did,
// each line naming its connector and task),
// without the clients' chatter and a line per REST request.
const log4j = `rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %X{connector.context}%m (%c)%n
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.common.name = org.apache.kafka.common
logger.common.level = WARN
logger.rest.name = org.apache.kafka.connect.runtime.rest
logger.rest.level = WARN
`

// Worker is a running Kafka Connect standalone worker.
type Worker struct {
	// URL is the REST API's base, http://127.0.0.1:PORT.
	URL string
	// Dir holds worker.properties, the offsets file and connect.log.
	Dir string
	// Started is how long the worker took from the JVM's start to its
	// REST API answering.
	Started time.Duration

	p  *proc.Process
	mu sync.Mutex
}

// readyTimeout bounds the worker's start; seen: 3.5 s on 2 idle cores.
const readyTimeout = 2 * time.Minute

// Start starts a worker for the test; it is stopped when the test ends, and
// its directory removed unless the test failed, when its path is logged
// with the end of connect.log.
func Start(t testing.TB, opts Options) *Worker {
	t.Helper()
	// The REST port, free when picked, may be bound by another process
	// before the JVM binds it seconds later: a new port then.
	var (
		w   *Worker
		err error
	)
	for attempt := 1; attempt <= 3; attempt++ {
		if w, err = start(opts); !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err != nil {
		t.Fatalf("connecttest: %v", err)
	}
	t.Cleanup(func() {
		w.p.Kill()
		if t.Failed() {
			t.Logf("connecttest: Kafka Connect's configuration and log kept in %s; its log ends:\n%s", w.Dir, w.LogTail(8192))
			return
		}
		os.RemoveAll(w.Dir)
	})
	return w
}

func start(opts Options) (*Worker, error) {
	java, dir, err := install()
	if err != nil {
		return nil, err
	}
	wdir, err := os.MkdirTemp("", "pgoutbox-connect-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(wdir)
		}
	}()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := map[string]string{
		"bootstrap.servers": strings.Join(opts.Brokers, ","),
		// Kafka's connect-standalone.properties: a connector that names
		// no converter gets JSON with schemas for keys and values (and
		// SimpleHeaderConverter, Connect's default, for headers).
		"key.converter":                     "org.apache.kafka.connect.json.JsonConverter",
		"value.converter":                   "org.apache.kafka.connect.json.JsonConverter",
		"offset.storage.file.filename":      filepath.Join(wdir, "offsets.dat"),
		"offset.flush.interval.ms":          "200",
		"plugin.path":                       strings.Join(append([]string{filepath.Join(dir, "plugins")}, opts.Plugins...), ","),
		"plugin.discovery":                  "service_load", // 4.5 s to the first change against 8.6 s with hybrid_warn's scan
		"listeners":                         "http://127.0.0.1:" + strconv.Itoa(port),
		"rest.advertised.host.name":         "127.0.0.1",
		"task.shutdown.graceful.timeout.ms": "5000",
	}
	if len(opts.Plugins) > 0 {
		// Apicurio's converters have no service manifests, which
		// service_load needs: the worker scans, as by default.
		conf["plugin.discovery"] = "hybrid_warn"
	}
	maps.Copy(conf, opts.Worker)
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		fmt.Fprintf(&sb, "%s=%s\n", k, conf[k])
	}
	props := filepath.Join(wdir, "worker.properties")
	if err := os.WriteFile(props, []byte(sb.String()), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(wdir, "log4j2.properties"), []byte(log4j), 0o644); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(wdir, "connect.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	jvm := opts.JVMOptions
	if jvm == nil {
		jvm = defaultJVM
	}
	args := append(append(slices.Clone(jvm), tracing...), "-Dlog4j2.configurationFile="+filepath.Join(wdir, "log4j2.properties"),
		"-cp", strings.Join(append([]string{filepath.Join(dir, "runtime", "*")}, opts.ClassPath...), ":"), "org.apache.kafka.connect.cli.ConnectStandalone", props)
	begin := time.Now()
	p, err := proc.Start("kafka-connect", java, args, nil, log)
	if err != nil {
		return nil, err
	}
	w := &Worker{URL: "http://127.0.0.1:" + strconv.Itoa(port), Dir: wdir, p: p}
	if err := w.waitReady(); err != nil {
		p.Kill()
		tail := w.LogTail(8192)
		if strings.Contains(tail, "Failed to bind to /127.0.0.1:"+strconv.Itoa(port)) {
			return nil, fmt.Errorf("%w: Kafka Connect in %s: %v", errPortTaken, wdir, err)
		}
		return nil, fmt.Errorf("Kafka Connect in %s did not start: %v\n%s", wdir, err, tail)
	}
	w.Started = time.Since(begin)
	ok = true
	return w, nil
}

// waitReady waits until the REST API lists connectors: the herder has
// started (the server answers 404 before its resources are in place).
func (w *Worker) waitReady() error {
	return w.p.Await(readyTimeout, 100*time.Millisecond, func(ctx context.Context) error {
		var names []string
		return w.do(ctx, http.MethodGet, "/connectors", nil, &names)
	})
}

// Create adds a connector with config (its "config" object), as POST
// /connectors does; the worker starts its task.
func (w *Worker) Create(ctx context.Context, name string, config map[string]string) error {
	body, err := json.Marshal(map[string]any{"name": name, "config": config})
	if err != nil {
		return err
	}
	return w.do(ctx, http.MethodPost, "/connectors", body, nil)
}

// Delete removes a connector and stops its task.
func (w *Worker) Delete(ctx context.Context, name string) error {
	return w.do(ctx, http.MethodDelete, "/connectors/"+name, nil, nil)
}

// Status is a connector's state and its tasks' as the REST API reports
// them: RUNNING, FAILED, ...; Trace holds a failed task's stack trace.
type Status struct {
	Connector struct {
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"connector"`
	Tasks []struct {
		ID    int    `json:"id"`
		State string `json:"state"`
		Trace string `json:"trace"`
	} `json:"tasks"`
}

// Failed is the trace of the connector's or a task's failure, "" while
// none failed.
func (s Status) Failed() string {
	if s.Connector.State == "FAILED" {
		return s.Connector.Trace
	}
	for _, t := range s.Tasks {
		if t.State == "FAILED" {
			return t.Trace
		}
	}
	return ""
}

// Status returns the connector's status.
func (w *Worker) Status(ctx context.Context, name string) (Status, error) {
	var s Status
	err := w.do(ctx, http.MethodGet, "/connectors/"+name+"/status", nil, &s)
	return s, err
}

// Offsets are the connector's committed source offsets (GET
// /connectors/NAME/offsets), one map per source partition: Debezium's
// PostgreSQL connector keeps lsn, lsn_commit, txId... Connect commits an
// offset once the records before it are acknowledged, every
// offset.flush.interval.ms.
func (w *Worker) Offsets(ctx context.Context, name string) ([]map[string]any, error) {
	var resp struct {
		Offsets []struct {
			Offset map[string]any `json:"offset"`
		} `json:"offsets"`
	}
	if err := w.do(ctx, http.MethodGet, "/connectors/"+name+"/offsets", nil, &resp); err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, o := range resp.Offsets {
		out = append(out, o.Offset)
	}
	return out, nil
}

// do makes a REST call; a status over 299 is an error with the body.
func (w *Worker) do(ctx context.Context, method, path string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.URL+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode > 299 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: %w: %s", method, path, err, data)
		}
	}
	return nil
}

// Log is everything the worker logged.
func (w *Worker) Log() string {
	data, _ := os.ReadFile(filepath.Join(w.Dir, "connect.log"))
	return string(data)
}

// LogTail is the last n bytes of the worker's log.
func (w *Worker) LogTail(n int) string {
	s := w.Log()
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// LogOf is the lines of the worker's log that name the connector (its
// tasks log as "name-0" and with "connector=name"), for a case's failure.
func (w *Worker) LogOf(name string) string {
	var out []string
	for _, line := range strings.Split(w.Log(), "\n") {
		if strings.Contains(line, name) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// freePort is a port below the kernel's range for outgoing connections
// (package freeport), which no client's connection takes while the JVM
// starts.
func freePort() (int, error) { return freeport.Port() }

// errPortTaken: the worker's REST port was bound by another process
// before the worker bound it.
var errPortTaken = errors.New("the REST port was taken before Kafka Connect bound it")

// install finds java and the installed jars, installing them with
// .ci/install-debezium (Maven) into the module's .cache/debezium on first
// use when DirEnv is unset.
func install() (java, dir string, err error) {
	in, err := testbin.Install("Kafka Connect and Debezium "+DebeziumVersion, "debezium", "install-debezium", JavaEnv, DirEnv, "debezium")
	return in.Java, in.Dir, err
}
