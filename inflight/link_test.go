package inflight

import (
	"context"
	"testing"
)

// fakeConn is a connection whose state the test sets.
type fakeConn struct {
	failed, lost, closed bool
	n                    int
}

func (c *fakeConn) Failed() bool               { return c.failed }
func (c *fakeConn) Lost() bool                 { return c.lost }
func (c *fakeConn) Len() int64                 { return 0 }
func (c *fakeConn) Wait(context.Context) error { return nil }
func (c *fakeConn) Close()                     { c.closed = true }
func dialer(n *int) func(context.Context) (*fakeConn, error) {
	return func(context.Context) (*fakeConn, error) {
		*n++
		return &fakeConn{n: *n}, nil
	}
}

// A connection is kept while it lives or once a message failed on it (the
// relay's next session replaces it through Resume); one lost with nothing
// failed is replaced at the next Connect.
func TestLink(t *testing.T) {
	ctx := context.Background()
	var l Link[fakeConn, *fakeConn]
	dials := 0
	c1, _ := l.Connect(ctx, dialer(&dials))
	if c, _ := l.Connect(ctx, dialer(&dials)); c != c1 || dials != 1 {
		t.Fatalf("a live connection was replaced (dials %d)", dials)
	}
	c1.lost = true
	c2, _ := l.Connect(ctx, dialer(&dials))
	if c2 == c1 || !c1.closed || dials != 2 {
		t.Fatalf("a lost idle connection was kept (dials %d, closed %v)", dials, c1.closed)
	}
	c2.failed, c2.lost = true, true
	if c, _ := l.Connect(ctx, dialer(&dials)); c != c2 {
		t.Fatal("a failed connection was replaced before Resume: later messages would overtake the failed one")
	}
	l.AbortBuffered()
	if !l.Halted() {
		t.Fatal("not halted after AbortBuffered")
	}
	l.Resume()
	if l.Halted() || !c2.closed || l.Load() != nil {
		t.Fatalf("Resume: halted %v, failed connection closed %v, kept %v", l.Halted(), c2.closed, l.Load() != nil)
	}
	c3, _ := l.Connect(ctx, dialer(&dials))
	l.Close()
	if !c3.closed || l.Load() != nil {
		t.Fatal("Close left the connection open")
	}
}
