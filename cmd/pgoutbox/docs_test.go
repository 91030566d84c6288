package main

import (
	"bufio"
	"os"
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
