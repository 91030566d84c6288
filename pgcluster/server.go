package pgcluster

import (
	"context"
	"errors"
	"fmt"
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

// prepareDirs creates the socket directory and, when the server runs as
// another user, hands the cluster directory to it: initdb must create the
// data directory inside, and the server writes its log and socket there.
func (c *Cluster) prepareDirs() error {
	if err := os.Chmod(c.root, 0o755); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := os.Mkdir(c.sockDir, 0o755); err != nil {
		return fmt.Errorf("pgcluster: creating the socket directory: %w", err)
	}
	if c.cred == nil {
		return nil
	}
	for _, dir := range []string{c.root, c.sockDir} {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: giving %s to the postgres user: %w", dir, err)
		}
	}
	return checkTraversable(filepath.Dir(c.root), c.cred)
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
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	// A working directory the postgres user can read; root's home is not.
	cmd.Dir = c.root
	cmd.Env = serverEnv()
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
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

func (c *Cluster) initdb(ctx context.Context) error {
	// --no-sync: a throwaway cluster need not survive an OS crash, and
	// it saves most of initdb's time.
	cmd := c.command(ctx, "initdb", "-D", c.Dir, "-U", "postgres", "-A", "trust",
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
func (c *Cluster) config() (string, error) {
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": c.sockDir,
		"wal_level":               c.opts.WALLevel,
		"max_replication_slots":   "20",
		"max_wal_senders":         "20",
	}
	if !c.opts.Fsync {
		settings["fsync"] = "off"
		settings["full_page_writes"] = "off"
	}
	for name, value := range c.opts.Settings {
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
func (c *Cluster) writeConfig(config string) error {
	f, err := os.OpenFile(filepath.Join(c.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
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
// something takes the chosen one before the server binds it.
func (c *Cluster) startOnFreePort(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		err = c.pgctlStart(ctx, port)
		if err == nil {
			// Set once: Restart reuses them, and tests read them
			// from other goroutines.
			c.Port = port
			c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
			return nil
		}
		if attempt == startAttempts || !errors.Is(err, errPortInUse) {
			return err
		}
		c.logger.Debug("port taken before postgres bound it; retrying", "port", port, "attempt", attempt)
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
func (c *Cluster) pgctlStart(ctx context.Context, port int) error {
	offset := c.logSize()
	cmd := c.command(ctx, "pg_ctl", "start", "-D", c.Dir, "-l", c.logFile, "-w", "-t", pgctlWaitSeconds,
		"-o", "-p "+strconv.Itoa(port))
	out, err := cmd.CombinedOutput()
	if err != nil {
		log := c.logSince(offset)
		err = fmt.Errorf("pgcluster: pg_ctl start on port %d: %w\n%s\nserver log (%s):\n%s",
			port, err, strings.TrimSpace(string(out)), c.logFile, log)
		if strings.Contains(log, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return err
	}
	return nil
}

func (c *Cluster) pgctlStop(ctx context.Context, mode string) error {
	offset := c.logSize()
	cmd := c.command(ctx, "pg_ctl", "stop", "-D", c.Dir, "-m", mode, "-w", "-t", pgctlWaitSeconds)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: pg_ctl stop -m %s: %w\n%s\nserver log (%s):\n%s",
			mode, err, strings.TrimSpace(string(out)), c.logFile, c.logSince(offset))
	}
	return nil
}

func (c *Cluster) logSize() int64 {
	fi, err := os.Stat(c.logFile)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince returns the last lines the server logged after offset, to explain
// a failure without repeating earlier runs.
func (c *Cluster) logSince(offset int64) string {
	b, err := os.ReadFile(c.logFile)
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

func startWatchdog(c *Cluster) (*watchdog, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, fmt.Errorf("pgcluster: starting the watchdog: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgtest-watchdog",
		filepath.Join(c.binDir, "pg_ctl"), c.Dir, c.root)
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
