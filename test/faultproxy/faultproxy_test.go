package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// echo serves lines back on a free port until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through the proxy and times its echo.
func roundTrip(t *testing.T, r *bufio.Reader, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// A delay holds each chunk for its length each way, so a round trip takes
// at least twice as long; removing it restores the link.
func TestDelay(t *testing.T) {
	p, err := Forward(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if d := roundTrip(t, r, c); d > 50*time.Millisecond {
		t.Fatalf("round trip without delay took %v", d)
	}
	p.Delay(100 * time.Millisecond)
	if d := roundTrip(t, r, c); d < 200*time.Millisecond {
		t.Fatalf("round trip with 100ms each way took %v", d)
	}
	p.Delay(0)
	if d := roundTrip(t, r, c); d > 150*time.Millisecond {
		t.Fatalf("round trip after the delay was removed took %v", d)
	}
}

// A forwarder whose target is down resets its clients, as a refused
// connection ends, rather than closing as a server that hung up would.
func TestForwardToADownTargetResets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close() // nothing listens there now
	p, err := Forward(target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err == nil {
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("hello\n"))
		_, err = c.Read(make([]byte, 1))
	}
	if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read from a proxy whose target is down: %v, want a connection reset", err)
	}
}
