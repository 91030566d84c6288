package main

import (
	osexec "os/exec"
	"strings"
	"testing"
)

// The shipped binary links no test code: neither the testing package nor
// anything under test/ (demo and bench start their Postgres through
// pgcluster, which takes a small interface instead of testing.TB).
// go test puts its own go command first on PATH.
func TestBinaryLinksNoTestCode(t *testing.T) {
	out, err := osexec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.Contains(pkg, "/pgoutbox/test/") || strings.HasSuffix(pkg, "/pgoutbox/test") {
			t.Errorf("cmd/pgoutbox links %s", pkg)
		}
	}
}
