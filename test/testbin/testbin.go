// Package testbin builds this module's commands for tests that need to run
// them as separate processes: killing a process with SIGKILL, or checking
// what a binary prints and how it exits, cannot be done in-process.
//
// Each package is built at most once per test binary, however many tests ask
// for it, because linking takes about a second. The binaries live in one
// temporary directory per test binary, removed when the test binary exits:
// a small reaper process waits for the end of a pipe only the test binary
// holds, which closes however the test binary exits (even on a panic or a
// test timeout, where no cleanup code runs), and then removes the directory.
// Cleanup removes it at once, for a TestMain that wants that.
package testbin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// build is the outcome of building one package, shared by every caller.
type build struct {
	once sync.Once
	path string
	err  error
}

var (
	mu        sync.Mutex
	builds    = map[string]*build{}
	outDir    string  // created on the first build, removed by Cleanup
	dirReaper *reaper // removes outDir when the test binary exits
)

// Build builds the main package pkg (an import path such as
// "github.com/pgoutbox/pgoutbox/cmd/devbroker") and returns the path of the
// binary. A failed build fails the test with the compiler's output, and every
// later Build of the same package fails the same way without rebuilding.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	b, ok := builds[pkg]
	if !ok {
		b = &build{}
		builds[pkg] = b
	}
	mu.Unlock()

	b.once.Do(func() { b.path, b.err = goBuild(pkg) })
	if b.err != nil {
		t.Fatalf("testbin: %v", b.err)
	}
	return b.path
}

// Cleanup removes every binary built so far. It is meant for TestMain, after
// m.Run, when no test can still be running one of them.
func Cleanup() error {
	mu.Lock()
	defer mu.Unlock()
	if outDir == "" {
		return nil
	}
	dirReaper.stop()
	dirReaper = nil
	err := os.RemoveAll(outDir)
	outDir = ""
	builds = map[string]*build{}
	if err != nil {
		return fmt.Errorf("testbin: removing built binaries: %w", err)
	}
	return nil
}

func goBuild(pkg string) (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	goTool, err := findGo()
	if err != nil {
		return "", err
	}
	// Two packages may share a last element (cmd/x and tools/x), so the
	// directory keeps their binaries apart.
	pkgDir, err := os.MkdirTemp(dir, path.Base(pkg)+"-")
	if err != nil {
		return "", fmt.Errorf("creating a directory for %s: %w", pkg, err)
	}
	out := filepath.Join(pkgDir, path.Base(pkg))

	cmd := exec.Command(goTool, "build", "-o", out, pkg)
	// The package path resolves against the module of the test's working
	// directory, which go test sets to the package under test: inside this
	// module.
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, output.Bytes())
	}
	return out, nil
}

func binDir() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if outDir != "" {
		return outDir, nil
	}
	dir, err := os.MkdirTemp("", "pgoutbox-testbin-")
	if err != nil {
		return "", fmt.Errorf("creating the directory for built binaries: %w", err)
	}
	r, err := startReaper(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	outDir, dirReaper = dir, r
	return dir, nil
}

// RemoveAtExit removes dir when the test binary exits, however it exits,
// as it does with the built binaries: for the directories of servers a
// test package shares, which no test's cleanup removes.
func RemoveAtExit(dir string) error {
	r, err := startReaper(dir)
	if err != nil {
		return err
	}
	// Kept for good: were its pipe collected, the finalizer would close it
	// and the reaper would remove dir at once.
	mu.Lock()
	exitReapers = append(exitReapers, r)
	mu.Unlock()
	return nil
}

var exitReapers []*reaper

// reaper is a shell process that removes a directory once its stdin, a pipe
// whose write end only this process holds, reaches end of file.
type reaper struct {
	cmd  *exec.Cmd
	pipe *os.File
}

func startReaper(dir string) (*reaper, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, fmt.Errorf("starting the reaper of %s: %w", dir, err)
	}
	cmd := exec.Command("/bin/sh", "-c", `read -r line; rm -rf "$1"`, "testbin-reaper", dir)
	cmd.Stdin = r
	cmd.Dir = "/"
	// Its own process group keeps it out of reach of a Ctrl-C meant for
	// the test binary, so it survives to clean up after it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the reaper of %s: %w", dir, err)
	}
	return &reaper{cmd: cmd, pipe: w}, nil
}

// stop ends the reaper without letting it remove anything.
func (r *reaper) stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait() // "signal: killed", as intended
	_ = r.pipe.Close()
}

// findGo prefers the go tool of the toolchain that built the test binary, so
// the command under test is built by the same Go version as the test itself.
func findGo() (string, error) {
	name := "go"
	if runtime.GOOS == "windows" {
		name = "go.exe"
	}
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("finding the go tool (neither GOROOT/bin nor PATH has it): %w", err)
	}
	return p, nil
}

// ModuleRoot is the directory of this module's go.mod, found upwards from
// the working directory (go test runs in the package's directory): where
// the harnesses find .ci's install scripts and the .cache they install into.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(data, []byte("module github.com/pgoutbox/pgoutbox\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testbin: not inside the pgoutbox module")
		}
		dir = parent
	}
}

// Installed is what Install found: the java binary, and the cache
// directory a .ci install script filled.
type Installed struct {
	Java, Dir string
}

// installs are Install's outcomes by script, once per test binary.
var installs sync.Map // string -> func() (Installed, error)

// Install finds java (javaEnv's value, else java on PATH) and runs the
// install script .ci/<script> with args and the cache directory last:
// dirEnv's value, else the module's .cache/<cache>. The scripts return at
// once when the cache holds what they install; each runs once per test
// binary. what names it in errors, and makeTarget the command that
// installs it by hand.
func Install(what, makeTarget, script, javaEnv, dirEnv, cache string, args ...string) (Installed, error) {
	once, _ := installs.LoadOrStore(script, sync.OnceValues(func() (Installed, error) {
		return install(what, makeTarget, script, javaEnv, dirEnv, cache, args...)
	}))
	return once.(func() (Installed, error))()
}

func install(what, makeTarget, script, javaEnv, dirEnv, cache string, args ...string) (Installed, error) {
	java := os.Getenv(javaEnv)
	if java == "" {
		var err error
		if java, err = exec.LookPath("java"); err != nil {
			return Installed{}, fmt.Errorf("no java on PATH: %s needs Java 17 or later (Debian: apt-get install openjdk-17-jre-headless), or set %s", what, javaEnv)
		}
	}
	root, err := ModuleRoot()
	if err != nil {
		return Installed{}, err
	}
	dir := os.Getenv(dirEnv)
	if dir == "" {
		dir = filepath.Join(root, ".cache", cache)
	}
	cmd := exec.Command(filepath.Join(root, ".ci", script), append(args, dir)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Installed{}, fmt.Errorf("installing %s into %s (make %s): %v\n%s", what, dir, makeTarget, err, out)
	}
	return Installed{Java: java, Dir: dir}, nil
}
