// Command testlog reads go test -json on its input and prints what a
// plain go test prints: the output of the tests that failed, and the
// package's own lines. With a file argument, it also writes there how
// long each top-level test took ("TestName seconds" per line), from which
// .ci/test-shards deals the tests out evenly.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	held := map[string][]string{} // a top-level test's output, until it ends
	took := map[string]float64{}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, in.Text()) // a build error, or anything else not an event
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		switch {
		case e.Test == "":
			if e.Action == "output" {
				out.WriteString(e.Output)
			}
		case e.Action == "output":
			held[top] = append(held[top], e.Output)
		case sub:
		case e.Action == "fail":
			for _, line := range held[top] {
				out.WriteString(line)
			}
			fallthrough
		case e.Action == "pass" || e.Action == "skip":
			delete(held, top)
			took[top] = e.Elapsed
		}
	}
	// A test that never ended (the binary timed out or crashed) shows
	// all it printed.
	for _, lines := range held {
		for _, line := range lines {
			out.WriteString(line)
		}
	}
	out.Flush()
	if len(os.Args) > 1 {
		names := make([]string, 0, len(took))
		for n := range took {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "%s %.1f\n", n, took[n])
		}
		if err := os.WriteFile(os.Args[1], []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testlog:", err)
			os.Exit(1)
		}
	}
}
