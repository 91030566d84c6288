package test

import (
	"strings"
	"testing"
)

// expectOutput checks a run's exit code (want -1: it was stopped while
// running, any code) and its output: every one of wants is in it, no
// secret is.
func expectOutput(t *testing.T, code, want int, out string, wants, secrets []string) {
	t.Helper()
	if want >= 0 && code != want {
		t.Errorf("exit code %d, want %d", code, want)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("output shows the secret %q", s)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
