package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pgoutbox/pgoutbox/freeport"
)

// BinDirEnv names the environment variable that chooses the PostgreSQL
// binaries when Options.BinDir is empty.
const BinDirEnv = "PGOUTBOX_PG_BINDIR"

const (
	// startAttempts bounds the retries when another process takes the
	// free port between choosing it and the server binding it.
	startAttempts = 5
	// pgctlWaitSeconds is pg_ctl's -t: crash recovery after an immediate
	// stop can take a while on a slow disk.
	pgctlWaitSeconds = "120"
	logTailLines     = 40
)

// errPortInUse marks a start that failed because the port was taken.
var errPortInUse = errors.New("port already in use")

// findBinDir returns the directory holding initdb, pg_ctl and postgres.
func findBinDir(explicit string) (string, error) {
	if explicit != "" {
		return checkBinDir(explicit, "Options.BinDir")
	}
	if env := os.Getenv(BinDirEnv); env != "" {
		return checkBinDir(env, BinDirEnv)
	}
	// Debian and Ubuntu keep each major version apart and put none of
	// these on PATH.
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		slices.SortFunc(dirs, func(a, b string) int {
			return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a)))
		})
		for _, dir := range dirs {
			if d, err := checkBinDir(dir, dir); err == nil {
				return d, nil
			}
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return checkBinDir(filepath.Dir(p), "PATH")
	}
	return "", fmt.Errorf("pgcluster: no PostgreSQL server binaries (initdb, pg_ctl, postgres) found in %s, /usr/lib/postgresql/*/bin or PATH; "+
		"install them (Debian: apt-get install postgresql-15) or set %s", BinDirEnv, BinDirEnv)
}

func checkBinDir(dir, source string) (string, error) {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("pgcluster: %s names %s, which lacks %s: %w", source, dir, name, err)
		}
	}
	return dir, nil
}

// compareVersions orders major version directory names such as "9.6", "15"
// and "17" numerically; names that are not versions sort first.
func compareVersions(a, b string) int {
	parse := func(s string) []int {
		var v []int
		for _, part := range strings.Split(s, ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				return nil
			}
			v = append(v, n)
		}
		return v
	}
	return slices.Compare(parse(a), parse(b))
}

// Credential returns the credential to run PostgreSQL's servers and tools
// with (PgBouncer too): nil as an ordinary user, the postgres user's when
// root, because initdb, postgres and pgbouncer refuse to run as root.
func Credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, which PostgreSQL refuses, and found no postgres user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: postgres user id %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: postgres group id %q: %w", u.Gid, err)
	}
	// An empty Groups list drops root's supplementary groups.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// server is a cluster's server on disk: its directory (the data directory,
// the socket directory and the log), the binaries it runs, the user it
// runs as, and the watchdog that stops it when this process dies. Its
// methods run initdb and pg_ctl; Cluster is the API over it.
type server struct {
	dir     string // the data directory
	root    string // holds dir, the socket directory and the server log
	sockDir string
	logFile string
	binDir  string
	opts    Options
	cred    *syscall.Credential // the postgres user's, when running as root
	logger  *slog.Logger

	watchdog *watchdog
}

// newServer is the server of a cluster in root, run from binDir as cred.
func newServer(root, binDir string, opts Options, cred *syscall.Credential) *server {
	return &server{dir: filepath.Join(root, "data"), root: root, sockDir: filepath.Join(root, "sock"),
		logFile: filepath.Join(root, "server.log"), binDir: binDir, opts: opts, cred: cred, logger: opts.Logger}
}

// prepareDirs creates the socket directory and, when the server runs as
// another user, hands the cluster directory to it: initdb must create the
// data directory inside, and the server writes its log and socket there.
func (s *server) prepareDirs() error {
	if err := os.Chmod(s.root, 0o755); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := os.Mkdir(s.sockDir, 0o755); err != nil {
		return fmt.Errorf("pgcluster: creating the socket directory: %w", err)
	}
	if s.cred == nil {
		return nil
	}
	for _, dir := range []string{s.root, s.sockDir} {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: giving %s to the postgres user: %w", dir, err)
		}
	}
	return checkTraversable(filepath.Dir(s.root), s.cred)
}

// checkTraversable makes sure the postgres user can reach dir, to fail with
// a clear message rather than initdb's "permission denied" when TMPDIR is
// somewhere like /root.
func checkTraversable(dir string, cred *syscall.Credential) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		m := fi.Mode().Perm()
		ok := m&0o001 != 0
		if st, isUnix := fi.Sys().(*syscall.Stat_t); isUnix {
			ok = ok || (st.Uid == cred.Uid && m&0o100 != 0) || (st.Gid == cred.Gid && m&0o010 != 0)
		}
		if !ok {
			return fmt.Errorf("pgcluster: the postgres user cannot reach %s: %s has mode %v; set TMPDIR to a directory it can reach", dir, d, m)
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

// command prepares a PostgreSQL program to run as the server's user.
func (s *server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, name), args...)
	// A working directory the postgres user can read; root's home is not.
	cmd.Dir = s.root
	cmd.Env = serverEnv()
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	// pg_ctl's output is captured through a pipe; should a child ever
	// keep it open, give up on it rather than hang.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// serverEnv is this process's environment without the PG* variables, which
// pg_ctl and postgres would otherwise honour (PGDATA, PGPORT, PGOPTIONS...).
func serverEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
}

func (s *server) initdb(ctx context.Context) error {
	// --no-sync: a throwaway cluster need not survive an OS crash, and
	// it saves most of initdb's time.
	cmd := s.command(ctx, "initdb", "-D", s.dir, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: initdb: %w\n%s", err, out)
	}
	return nil
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// config returns the lines to append to postgresql.conf, where a later line
// wins over an earlier one. Settings go in the file rather than on the
// command line because pg_ctl hands -o to a shell, and quoting arbitrary
// values for it is fragile; the file also keeps them across Restart.
func (s *server) config() (string, error) {
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": s.sockDir,
		"wal_level":               s.opts.WALLevel,
		"max_replication_slots":   "20",
		"max_wal_senders":         "20",
	}
	if !s.opts.Fsync {
		settings["fsync"] = "off"
		settings["full_page_writes"] = "off"
	}
	for name, value := range s.opts.Settings {
		if !settingName.MatchString(name) {
			return "", fmt.Errorf("pgcluster: invalid setting name %q", name)
		}
		if strings.EqualFold(name, "port") {
			return "", errors.New("pgcluster: the port setting is chosen by pgtest; read Cluster.Port")
		}
		if strings.ContainsAny(value, "\n\r") {
			return "", fmt.Errorf("pgcluster: setting %s: value contains a line break", name)
		}
		settings[name] = value
	}

	var b strings.Builder
	b.WriteString("\n# pgtest\n")
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		// Every value may be quoted, whatever its type; inside quotes
		// the configuration parser reads '' and backslash escapes.
		v := strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(settings[name])
		fmt.Fprintf(&b, "%s = '%s'\n", name, v)
	}
	return b.String(), nil
}

// writeConfig appends config to postgresql.conf.
func (s *server) writeConfig(config string) error {
	f, err := os.OpenFile(filepath.Join(s.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: opening postgresql.conf: %w", err)
	}
	if _, err := f.WriteString(config); err != nil {
		f.Close()
		return fmt.Errorf("pgcluster: writing postgresql.conf: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pgcluster: writing postgresql.conf: %w", err)
	}
	return nil
}

// startOnFreePort starts the server on a free port, choosing another if
// something takes the chosen one before the server binds it, and returns
// the port.
func (s *server) startOnFreePort(ctx context.Context) (int, error) {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		err = s.pgctlStart(ctx, port)
		if err == nil {
			return port, nil
		}
		if attempt == startAttempts || !errors.Is(err, errPortInUse) {
			return 0, err
		}
		s.logger.Debug("port taken before postgres bound it; retrying", "port", port, "attempt", attempt)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// outside the range the kernel gives outgoing connections, so that a
// restart on it finds it free (package freeport).
func freePort() (int, error) {
	port, err := freeport.Port()
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %w", err)
	}
	return port, nil
}

// pgctlStart starts the server on port and waits until it accepts
// connections.
func (s *server) pgctlStart(ctx context.Context, port int) error {
	offset := s.logSize()
	cmd := s.command(ctx, "pg_ctl", "start", "-D", s.dir, "-l", s.logFile, "-w", "-t", pgctlWaitSeconds,
		"-o", "-p "+strconv.Itoa(port))
	out, err := cmd.CombinedOutput()
	if err != nil {
		log := s.logSince(offset)
		err = fmt.Errorf("pgcluster: pg_ctl start on port %d: %w\n%s\nserver log (%s):\n%s",
			port, err, strings.TrimSpace(string(out)), s.logFile, log)
		if strings.Contains(log, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return err
	}
	return nil
}

func (s *server) pgctlStop(ctx context.Context, mode string) error {
	offset := s.logSize()
	cmd := s.command(ctx, "pg_ctl", "stop", "-D", s.dir, "-m", mode, "-w", "-t", pgctlWaitSeconds)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: pg_ctl stop -m %s: %w\n%s\nserver log (%s):\n%s",
			mode, err, strings.TrimSpace(string(out)), s.logFile, s.logSince(offset))
	}
	return nil
}

func (s *server) logSize() int64 {
	fi, err := os.Stat(s.logFile)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince returns the last lines the server logged after offset, to explain
// a failure without repeating earlier runs.
func (s *server) logSince(offset int64) string {
	b, err := os.ReadFile(s.logFile)
	if err != nil {
		return fmt.Sprintf("(cannot read the server log: %v)", err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	lines := strings.Split(strings.TrimRight(string(b[offset:]), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}

// watchdog stops the server and removes its directory when this process
// exits without Close; see the package documentation.
type watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File // the write end; only this process holds it
}

// watchdogScript blocks until its stdin reaches end of file, which happens
// when the last holder of the pipe's write end, this process, exits.
// Arguments: pg_ctl, data directory, cluster directory.
const watchdogScript = `read -r line
if [ -f "$2/postmaster.pid" ]; then "$1" stop -D "$2" -m immediate -w -t 60 >/dev/null 2>&1; fi
rm -rf "$3"`

func startWatchdog(c *server) (*watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, fmt.Errorf("pgcluster: starting the watchdog: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgtest-watchdog",
		filepath.Join(c.binDir, "pg_ctl"), c.dir, c.root)
	cmd.Stdin = r
	cmd.Dir = "/"
	cmd.Env = serverEnv()
	// Its own process group keeps it out of reach of a Ctrl-C meant for
	// this process, so it survives to clean up after it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("pgcluster: starting the watchdog: %w", err)
	}
	wd := &watchdog{cmd: cmd, pipe: w}
	watchdogs.Store(wd, struct{}{})
	return wd, nil
}

// watchdogs keeps every running watchdog reachable: were a Cluster dropped
// without Close, the garbage collector would otherwise close the pipe and
// the watchdog would stop a server someone may still be using through its
// URL.
var watchdogs sync.Map // *watchdog -> struct{}

// stop ends the watchdog without letting it clean up: Close does that.
func (w *watchdog) stop() error {
	// Kill before closing the pipe, which would set it off.
	if err := w.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgcluster: stopping the watchdog: %w", err)
	}
	_ = w.cmd.Wait() // "signal: killed", as intended
	watchdogs.Delete(w)
	return w.pipe.Close()
}

// stopForGood stops the server if it runs, falling back to SIGKILL of the
// postmaster if pg_ctl fails, so that Close never leaves a server behind.
func (s *server) stopForGood(ctx context.Context) error {
	pid, err := s.postmasterPID()
	if err != nil || pid == 0 {
		return err // not started, or stopped already
	}
	stopErr := s.pgctlStop(ctx, "immediate")
	if stopErr == nil {
		// pg_ctl returns once postmaster.pid is gone, which the
		// postmaster removes just before it exits; wait for the exit so
		// that Close leaves no process behind.
		waitExit(ctx, pid)
		return nil
	}
	if alive(pid) {
		// Backends exit on their own once the postmaster is gone.
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return errors.Join(stopErr, fmt.Errorf("pgcluster: killing postmaster %d: %w", pid, err))
		}
	}
	return nil
}

// postmasterPID reads the first line of postmaster.pid; 0 if there is none.
func (s *server) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgcluster: reading postmaster.pid: %w", err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(string(line))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: postmaster.pid starts with %q: %w", line, err)
	}
	return pid, nil
}

// running asks pg_ctl whether the server runs: it also answers correctly
// after the postmaster was killed and left a stale postmaster.pid.
func (s *server) running(ctx context.Context) (bool, error) {
	cmd := s.command(ctx, "pg_ctl", "status", "-D", s.dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return true, nil
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() == 3 { // documented: not running
		return false, nil
	}
	return false, fmt.Errorf("pgcluster: pg_ctl status: %w\n%s", err, out)
}

// alive reports whether process pid exists and has not exited: a zombie
// waiting for init to reap it counts as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // no /proc: trust kill
	}
	// The state follows the command name, which is in parentheses and
	// may itself contain them.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// waitExit waits, briefly, until process pid has exited.
func waitExit(ctx context.Context, pid int) {
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
}
