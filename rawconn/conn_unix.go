//go:build unix

package rawconn

import (
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
