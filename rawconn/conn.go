// Package rawconn gives the relay's per-event sockets (the replication
// stream and the Kafka connections) reads and writes that bypass the Go
// scheduler's system-call bookkeeping.
//
// A read or write through net.Conn enters the runtime's syscall path. When
// the process was idle, that wakes the runtime's monitor thread (sysmon),
// which then polls every 20 µs until the process is idle again: at 2,000
// one-event transactions per second that thread alone took a quarter of the
// relay's CPU, one sleep and wake-up after another. Reads and writes on a
// non-blocking socket never block, so they can be made as raw system calls,
// which skip that path; waiting for the socket still goes through the
// runtime's network poller, so deadlines, Close and the scheduler behave as
// for any net.Conn.
package rawconn

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Conn is a net.Conn whose Read and Write are raw system calls on its
// socket. Everything else (addresses, deadlines, Close) is the wrapped
// connection's.
type Conn struct {
	net.Conn
	raw syscall.RawConn
}

// Wrap returns c as a *Conn where c is a socket the runtime polls (TCP or
// Unix), and c unchanged otherwise.
func Wrap(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{Conn: c, raw: raw}
}

// Dial dials like d and wraps the connection: a drop-in for
// net.Dialer.DialContext.
func Dial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Wrap(c), nil
	}
}

// Read reads what the socket holds, up to len(p), waiting in the network
// poller while it holds nothing.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
	if err != nil {
		return 0, c.opError("read", err)
	}
	if errno != 0 {
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, waiting in the network poller while the socket's
// buffer is full.
func (c *Conn) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := c.raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err != nil {
		return n, c.opError("write", err)
	}
	if errno != 0 {
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// opError shapes err as net.Conn's own errors are, so that callers that
// look for a timeout (net.Error) or a closed connection (net.ErrClosed)
// find it. The raw connection already wraps its poller's errors in a
// *net.OpError; it is unwrapped to keep the operation's name.
func (c *Conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Listener wraps every connection ln accepts, for a server whose
// connections carry a message or two per event (the development broker).
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
