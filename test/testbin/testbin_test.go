package testbin

import (
	"os"
	"os/exec"
	"testing"
)

func TestBuildOncePerPackage(t *testing.T) {
	const pkg = "github.com/pgoutbox/pgoutbox/cmd/devbroker"
	first := Build(t, pkg)
	if second := Build(t, pkg); second != first {
		t.Fatalf("second Build returned %s, want the first build %s", second, first)
	}
	if out, err := exec.Command(first, "-h").CombinedOutput(); err != nil {
		t.Fatalf("running the built binary: %v\n%s", err, out)
	}
	if err := Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("binary after Cleanup: %v, want it removed", err)
	}
	// Cleanup forgets the builds, so a later Build builds again.
	if again := Build(t, pkg); again == first {
		t.Fatalf("Build after Cleanup returned the removed path %s", again)
	}
}
