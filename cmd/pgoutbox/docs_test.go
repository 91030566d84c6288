package main

import (
	"bufio"
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/pgoutbox/pgoutbox/test/promtest"
)

// The README and docs/ describe this binary; these tests keep them honest
// about what exists: the files and sections they link to, and the flags
// and environment variables they name.

// repoRoot is the repository, two levels above this package.
const repoRoot = "../.."

// docFiles are the user docs: the README, docs/ and the monitoring README.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(repoRoot, "README.md")}
	for _, pattern := range []string{"docs/*.md", "monitoring/*.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	return files
}

// mdText is a markdown file split into its prose (outside fenced code
// blocks, with inline code spans kept) and its headings' anchors.
type mdText struct {
	prose   []string // lines outside fenced blocks, by line number - 1 ("" inside one)
	anchors map[string]bool
}

func readMarkdown(t *testing.T, path string) mdText {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := mdText{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			md.prose = append(md.prose, "")
			continue
		}
		if fenced {
			md.prose = append(md.prose, "")
			continue
		}
		md.prose = append(md.prose, line)
		if h, ok := heading(line); ok {
			a := anchor(h)
			if n := seen[a]; n > 0 {
				md.anchors[a+"-"+strconv.Itoa(n)] = true
			} else {
				md.anchors[a] = true
			}
			seen[a]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return md
}

// heading returns an ATX heading's text.
func heading(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, "#")
	level := len(line) - len(trimmed)
	if level == 0 || level > 6 || !strings.HasPrefix(trimmed, " ") {
		return "", false
	}
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(trimmed), "#")), true
}

// anchor is the fragment GitHub gives a heading: lower case, punctuation
// other than '-' and '_' dropped, spaces as '-'.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// TestDocLinksResolve checks every relative link in the README, docs/ and
// monitoring/: the file exists, and a #fragment names a heading of it.
func TestDocLinksResolve(t *testing.T) {
	parsed := map[string]mdText{}
	doc := func(path string) mdText {
		if md, ok := parsed[path]; ok {
			return md
		}
		md := readMarkdown(t, path)
		parsed[path] = md
		return md
	}
	links := 0
	for _, file := range docFiles(t) {
		for i, line := range doc(file).prose {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, frag, _ := strings.Cut(target, "#")
				where := strings.TrimPrefix(file, repoRoot+"/")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", where, i+1, target)
					continue
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link to %s: a fragment of a file that is not markdown", where, i+1, target)
					continue
				}
				if !doc(dest).anchors[frag] {
					t.Errorf("%s:%d: link to %s: %s has no heading #%s", where, i+1, target, filepath.Base(dest), frag)
				}
			}
		}
	}
	if links < 50 {
		t.Errorf("only %d relative links found: is the link pattern still right?", links)
	}
}

func TestAnchor(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Exactly once: the position topic and the transactional id", "exactly-once-the-position-topic-and-the-transactional-id"},
		{"Results on 16 cores, and on 2 of the same machine's cores", "results-on-16-cores-and-on-2-of-the-same-machines-cores"},
		{"Column mapping (your table, unchanged)", "column-mapping-your-table-unchanged"},
		{"Results of the version before `--procs` on a 2-core machine", "results-of-the-version-before---procs-on-a-2-core-machine"},
		{"Exactly once, for read_committed consumers", "exactly-once-for-read_committed-consumers"},
	} {
		if got := anchor(c.heading); got != c.want {
			t.Errorf("anchor(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// Every alert's runbook_url names a section of docs/operations.md.
func TestRunbooksExist(t *testing.T) {
	const base = "https://github.com/pgoutbox/pgoutbox/blob/main/docs/operations.md#"
	rules, err := promtest.ReadRules(filepath.Join(repoRoot, "monitoring", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	ops := readMarkdown(t, filepath.Join(repoRoot, "docs", "operations.md"))
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			url := r.Annotations["runbook_url"]
			frag, ok := strings.CutPrefix(url, base)
			if !ok || !ops.anchors[frag] {
				t.Errorf("%s: runbook_url %q names no section of docs/operations.md", r.Alert, url)
			}
		}
	}
	if n == 0 {
		t.Error("no alerts read")
	}
}

// commands are pgoutbox's commands that take flags, as given on the
// command line.
var commands = [][]string{
	{"migrate"}, {"slot", "create"}, {"slot", "status"}, {"slot", "drop"}, {"run"}, {"status"},
	{"dlq", "list"}, {"dlq", "replay"}, {"dlq", "skip"}, {"demo"}, {"bench"}, {"bench", "floor"},
}

// helpFlag is a flag's line in -h output: "  -name type".
var helpFlag = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)

// commandFlags returns each command's flags, read from its -h output, the
// devbroker's included (built and run, as the docs describe it too).
func commandFlags(t *testing.T) map[string][]string {
	t.Helper()
	flags := map[string][]string{}
	for _, c := range commands {
		var stdout, stderr strings.Builder
		if code := run(context.Background(), append(c, "-h"), &stdout, &stderr); code != 0 {
			t.Fatalf("pgoutbox %s -h: exit %d\n%s", strings.Join(c, " "), code, stderr.String())
		}
		for _, m := range helpFlag.FindAllStringSubmatch(stdout.String(), -1) {
			flags[strings.Join(c, " ")] = append(flags[strings.Join(c, " ")], m[1])
		}
	}
	bin := filepath.Join(t.TempDir(), "devbroker")
	if out, err := osexec.Command("go", "build", "-o", bin, "../devbroker").CombinedOutput(); err != nil {
		t.Fatalf("go build devbroker: %v\n%s", err, out)
	}
	out, _ := osexec.Command(bin, "-h").CombinedOutput() // the flag package's -h exits 0 or 2
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags["devbroker"] = append(flags["devbroker"], m[1])
	}
	if len(flags["run"]) < 40 || len(flags["devbroker"]) < 3 {
		t.Fatalf("flags read from -h: %v", flags)
	}
	return flags
}

var (
	// docFlag is a --flag in the docs; a trailing '-' with '*' after it
	// (--column-*) names every flag with that prefix.
	docFlag = regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])--([a-z][a-z0-9-]*)(\*)?`)
	docEnv  = regexp.MustCompile(`\bPGOUTBOX_[A-Z0-9_]*[A-Z0-9]\b`)
	// ownCommand starts a command line of pgoutbox or the devbroker,
	// after environment assignments.
	ownCommand = regexp.MustCompile(`^\s*(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\./)?(?:bin/)?(?:pgoutbox|devbroker)\b`)
)

// docMentions returns the --flags and PGOUTBOX_ names the docs mention,
// each with where. In code blocks only the lines of pgoutbox's and the
// devbroker's command lines count (continuations included, and lines of
// flags alone): a docker or psql command line has flags of its own.
func docMentions(t *testing.T) (flags, envs map[string][]string) {
	t.Helper()
	flags, envs = map[string][]string{}, map[string][]string{}
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		where := strings.TrimPrefix(file, repoRoot+"/")
		fenced, ours, continued := false, false, false
		for i, line := range strings.Split(string(b), "\n") {
			at := where + ":" + strconv.Itoa(i+1)
			for _, m := range docEnv.FindAllString(line, -1) {
				envs[m] = append(envs[m], at)
			}
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced, continued = !fenced, false
				continue
			}
			if fenced {
				if !continued {
					trimmed := strings.TrimSpace(line)
					ours = ownCommand.MatchString(line) || strings.HasPrefix(trimmed, "--")
				}
				continued = strings.HasSuffix(strings.TrimSpace(line), `\`)
				if !ours {
					continue
				}
			}
			for _, m := range docFlag.FindAllStringSubmatch(line, -1) {
				name := m[1]
				if m[2] == "*" {
					name += "*"
				}
				flags[name] = append(flags[name], at)
			}
		}
	}
	return flags, envs
}

// TestDocumentedFlagsExist: every flag the README and docs name is a flag
// of a pgoutbox command or of the devbroker, every PGOUTBOX_ variable they
// name is a flag's or one the code reads, and every flag of run is named
// in them.
func TestDocumentedFlagsExist(t *testing.T) {
	byCommand := commandFlags(t)
	all := map[string]bool{}
	for _, fs := range byCommand {
		for _, f := range fs {
			all[f] = true
		}
	}
	flags, envs := docMentions(t)
	for name, at := range flags {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			found := false
			for f := range all {
				found = found || strings.HasPrefix(f, prefix)
			}
			if !found {
				t.Errorf("--%s (%s): no flag starts with --%s", name, strings.Join(at, ", "), prefix)
			}
			continue
		}
		if !all[name] {
			t.Errorf("--%s (%s) is no flag of pgoutbox or the devbroker", name, strings.Join(at, ", "))
		}
	}
	for _, f := range byCommand["run"] {
		if len(flags[f]) == 0 {
			t.Errorf("run's flag --%s is named in no doc (README.md, docs/)", f)
		}
	}

	flagEnv := map[string]bool{}
	for f := range all {
		flagEnv[envName(f)] = true
	}
	code := readCode(t)
	for name, at := range envs {
		if !flagEnv[name] && !strings.Contains(code, name) {
			t.Errorf("%s (%s) is neither a flag's variable nor read by the code", name, strings.Join(at, ", "))
		}
	}
	if len(flags) < 60 || len(envs) < 3 {
		t.Errorf("only %d flags and %d variables found in the docs: is the pattern still right?", len(flags), len(envs))
	}
}

// readCode is the repository's Go code and Makefile, where the settings
// that are not flags (the tests' PGOUTBOX_TEST_* and the like) are read;
// this file, which names them, is left out.
func readCode(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != repoRoot || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".go") || d.Name() == "Makefile") || d.Name() == "docs_test.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		b.Write(src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
