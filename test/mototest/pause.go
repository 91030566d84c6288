package mototest

import (
	"syscall"
	"testing"
)

// Pause stops the server (SIGSTOP): it takes connections and answers
// nothing until Continue, its streams kept, as a Kinesis that does not
// answer in time.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(s.p.PID(), syscall.SIGSTOP); err != nil {
		t.Fatalf("mototest: pausing moto_server: %v", err)
	}
}

// Continue lets a paused server go on (SIGCONT).
func (s *Server) Continue(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(s.p.PID(), syscall.SIGCONT); err != nil {
		t.Fatalf("mototest: continuing moto_server: %v", err)
	}
}
