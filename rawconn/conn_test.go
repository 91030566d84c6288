//go:build unix

package rawconn

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pair returns a wrapped client and the server side of one connection.
func pair(t *testing.T, network string) (*Conn, net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := Dial(&net.Dialer{})(t.Context(), network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rc, ok := c.(*Conn)
	if !ok {
		t.Fatalf("Dial returned %T, want *Conn", c)
	}
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { rc.Close(); srv.Close() })
	return rc, srv
}

func TestRoundTrip(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			c, srv := pair(t, network)
			// Larger than any socket buffer: Write must wait for room
			// and go on where it stopped, Read must wait for data.
			want := make([]byte, 8<<20)
			rand.Read(want)
			werr := make(chan error, 1)
			go func() {
				n, err := c.Write(want)
				if err == nil && n != len(want) {
					err = io.ErrShortWrite
				}
				werr <- err
			}()
			got := make([]byte, len(want))
			if _, err := io.ReadFull(srv, got); err != nil {
				t.Fatal(err)
			}
			if err := <-werr; err != nil {
				t.Fatalf("write: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("the server read other bytes than were written")
			}

			go func() {
				_, err := srv.Write(want)
				werr <- err
			}()
			got = got[:0]
			buf := make([]byte, 1000) // reads shorter than what waits
			for len(got) < len(want) {
				n, err := c.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, buf[:n]...)
			}
			if err := <-werr; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("Read returned other bytes than the server wrote")
			}
		})
	}
}

func TestReadDeadlineIsATimeout(t *testing.T) {
	c, _ := pair(t, "tcp")
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	start := time.Now()
	_, err := c.Read(make([]byte, 10))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v (%T), want a net.Error timeout", err, err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Read returned after %s", waited)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("error %v: want a *net.OpError for read", err)
	}
	// The connection stays usable after a timeout, as pgconn expects.
	c.SetReadDeadline(time.Time{})
}

func TestWriteDeadlineIsATimeout(t *testing.T) {
	c, _ := pair(t, "tcp") // the server never reads
	buf := make([]byte, 64<<20)
	c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
	n, err := c.Write(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write to a full socket: %v, want a timeout", err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("Write reported %d bytes written before the timeout", n)
	}
}

func TestPeerCloseIsEOF(t *testing.T) {
	c, srv := pair(t, "tcp")
	srv.Write([]byte("last"))
	srv.Close()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last" {
		t.Fatalf("ReadAll = %q, %v; want the last bytes, then EOF", got, err)
	}
}

func TestCloseEndsABlockedRead(t *testing.T) {
	c, _ := pair(t, "tcp")
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a closed connection: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked Read")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on a closed connection: %v, want net.ErrClosed", err)
	}
}

func TestWrapLeavesOtherConnections(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Wrap(a); got != a {
		t.Fatalf("Wrap(net.Pipe) = %T, want it unchanged", got)
	}
}

func TestListenerWrapsAccepted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := Listener(ln)
	defer wl.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := wl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*Conn); !ok {
		t.Fatalf("Accept returned %T, want *Conn", c)
	}
	if got, err := io.ReadAll(c); err != nil || string(got) != "hi" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
}

// Read and Write run on every event: they must not allocate.
func TestReadWriteAllocateNothing(t *testing.T) {
	c, srv := pair(t, "tcp")
	msg, buf, echo := make([]byte, 300), make([]byte, 512), make([]byte, 300)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(srv, echo); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Write(echo); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(msg); {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Fatalf("a round trip through Write and Read allocated %v times", allocs)
	}
}
