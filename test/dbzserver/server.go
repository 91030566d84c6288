// Package dbzserver runs Debezium Server 3.6.1 itself, from the
// distribution .ci/install-debezium-server unpacks into a cache directory,
// for the NATS corpus (test/natscompat): each run in a directory of its
// own, holding its application.properties, its offsets and its log, on a
// free HTTP port, started with the distribution's run.sh under Java 21 or
// later, as a Debezium Server user starts it.
package dbzserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/freeport"
	"github.com/pgoutbox/pgoutbox/proc"
	"github.com/pgoutbox/pgoutbox/test/testbin"
)

const (
	// DirEnv names the directory .ci/install-debezium-server installed
	// into (make sets it from DEBEZIUM_SERVER_DIR). Unset, the module's
	// .cache/debezium-server is used, installed there on first use.
	DirEnv = "PGOUTBOX_DEBEZIUM_SERVER_DIR"
	// JavaHomeEnv names a JDK of Java 21 or later to run it with; unset,
	// the newest Temurin or OpenJDK 21+ under /usr/lib/jvm.
	JavaHomeEnv = "PGOUTBOX_DEBEZIUM_SERVER_JAVA_HOME"
	// Version is the release .ci/debezium-server/pom.xml installs.
	Version = "3.6.1.Final"
)

// readyTimeout bounds the start; seen: about 3 s on 2 idle cores.
const readyTimeout = 2 * time.Minute

// Server is a running Debezium Server.
type Server struct {
	// Dir holds config/application.properties, offsets.dat and
	// server.log.
	Dir string
	// Started is how long it took from the JVM's start to answering
	// /q/health/ready.
	Started time.Duration

	port int
	p    *proc.Process
}

// Start runs Debezium Server with props as its application.properties,
// with quarkus.http.port and (unless props sets it) the offsets file
// added. It is stopped when the test ends; its directory is kept, and its
// path and the end of its log logged, when the test failed.
func Start(t testing.TB, props string) *Server {
	t.Helper()
	return StartEnv(t, props, nil)
}

// StartEnv is Start with env (NAME=value) added to its environment,
// where Debezium Server reads its configuration too.
func StartEnv(t testing.TB, props string, env []string) *Server {
	t.Helper()
	return StartYAML(t, props, "", env)
}

// StartYAML is StartEnv with yaml as its config/application.yaml beside
// the properties, where Debezium Server reads its configuration too.
func StartYAML(t testing.TB, props, yaml string, env []string) *Server {
	t.Helper()
	s, err := startEnv(props, yaml, "", env)
	if err != nil {
		t.Fatalf("dbzserver: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("dbzserver: Debezium Server's configuration and log kept in %s; its log ends:\n%s", s.Dir, s.LogTail(8192))
			return
		}
		os.RemoveAll(s.Dir)
	})
	return s
}

// Launch runs Debezium Server with props, as Start does, with javaOpts
// as its JVM's options instead of the tests' (empty: the tests'); the
// caller stops it and removes Dir.
func Launch(props, javaOpts string) (*Server, error) { return startWith(props, javaOpts) }

func startWith(props, javaOpts string) (*Server, error) { return startEnv(props, "", javaOpts, nil) }

func startEnv(props, yaml, javaOpts string, extraEnv []string) (*Server, error) {
	in, err := testbin.Install("Debezium Server "+Version, "debezium-server", "install-debezium-server", "PGOUTBOX_JAVA", DirEnv, "debezium-server")
	if err != nil {
		return nil, err
	}
	javaHome, err := javaHome()
	if err != nil {
		return nil, err
	}
	dist := filepath.Join(in.Dir, "debezium-server")
	dir, err := os.MkdirTemp("", "pgoutbox-dbzserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	if err := s.layout(dist, props, yaml); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	begin := time.Now()
	// --add-opens: Quarkus's thread-local reset wants it from Java 24 on,
	// and says so with a stack trace.
	if javaOpts == "" {
		javaOpts = "-Xms128m -Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
	}
	env := append([]string{"JAVA_HOME=" + javaHome, "JAVA_OPTS=" + javaOpts + " --add-opens=java.base/java.lang=ALL-UNNAMED"}, extraEnv...)
	// run.sh reads lib/ and config/ from the directory it runs in.
	s.p, err = proc.Start("debezium-server", "/bin/bash", []string{"-c", `cd "$1" && exec ./run.sh`, "run", dir}, env, log)
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(); err != nil {
		s.p.Kill()
		return nil, fmt.Errorf("Debezium Server in %s did not start: %v\n%s", dir, err, s.LogTail(8192))
	}
	s.Started = time.Since(begin)
	return s, nil
}

// layout makes dir a copy of the distribution by links, with a config
// directory of its own.
func (s *Server) layout(dist, props, yaml string) error {
	entries, err := os.ReadDir(dist)
	if err != nil {
		return fmt.Errorf("the distribution in %s: %w", dist, err)
	}
	for _, e := range entries {
		if e.Name() == "config" {
			continue
		}
		if err := os.Symlink(filepath.Join(dist, e.Name()), filepath.Join(s.Dir, e.Name())); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "config"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(dist, "config", "lib"), filepath.Join(s.Dir, "config", "lib")); err != nil {
		return err
	}
	port, err := freeport.Port()
	if err != nil {
		return err
	}
	s.port = port
	text := strings.TrimRight(props, "\n") + "\nquarkus.http.port=" + strconv.Itoa(port) + "\n"
	if !strings.Contains(props, "offset.storage.file.filename") {
		text += "debezium.source.offset.storage.file.filename=" + filepath.Join(s.Dir, "offsets.dat") + "\n"
	}
	if yaml != "" {
		if err := os.WriteFile(filepath.Join(s.Dir, "config", "application.yaml"), []byte(yaml), 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(s.Dir, "config", "application.properties"), []byte(text), 0o600)
}

// waitReady waits until Quarkus answers its readiness check.
func (s *Server) waitReady() error {
	return s.p.Await(readyTimeout, 200*time.Millisecond, proc.HTTPOK("http://127.0.0.1:"+strconv.Itoa(s.port)+"/q/health/ready"))
}

// Exited is closed when the process ends: Debezium Server stops when its
// sink fails a batch.
func (s *Server) Exited() <-chan struct{} { return s.p.Exited() }

// PID is its JVM's process id (run.sh execs java).
func (s *Server) PID() int { return s.p.PID() }

// Err says why it exited.
func (s *Server) Err() error { return s.p.Err() }

// Stop stops the server (SIGTERM, then SIGKILL after 30 s).
func (s *Server) Stop() {
	if s.p != nil {
		_ = s.p.Stop(30 * time.Second)
	}
}

// LogTail is the end of its log, at most n bytes.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// javaHome is JavaHomeEnv's JDK, else the newest JDK of Java 21 or later
// under /usr/lib/jvm.
func javaHome() (string, error) {
	if h := os.Getenv(JavaHomeEnv); h != "" {
		return h, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/jvm/*")
	best, bestVersion := "", 0
	for _, d := range dirs {
		out, err := exec.Command(filepath.Join(d, "bin", "java"), "-XshowSettings:properties", "-version").CombinedOutput()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			v, ok := strings.CutPrefix(strings.TrimSpace(line), "java.specification.version = ")
			if !ok {
				continue
			}
			if n, err := strconv.Atoi(v); err == nil && n >= 21 && n > bestVersion {
				best, bestVersion = d, n
			}
		}
	}
	if best == "" {
		return "", fmt.Errorf("Debezium Server %s needs Java 21 or later: none under /usr/lib/jvm; set %s", Version, JavaHomeEnv)
	}
	return best, nil
}
