//go:build unix

package rawconn

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Conn is a net.Conn whose Read and Write are raw system calls on its
// socket. Everything else (addresses, deadlines, Close) is the wrapped
// connection's.
type Conn struct {
	net.Conn
	raw  syscall.RawConn
	r, w op
}

// op is one direction's system call and its outcome. Its function is bound
// once, in Wrap, so that a Read or Write allocates nothing; mu serializes
// the callers of a direction, as the socket's own lock would.
type op struct {
	mu    sync.Mutex
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
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
	rc := &Conn{Conn: c, raw: raw}
	rc.r.fn, rc.w.fn = rc.r.read, rc.w.write
	return rc
}

// read is the raw read: false while the socket holds nothing.
func (o *op) read(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&o.p[0])), uintptr(len(o.p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		o.n, o.errno = int(r), e
		return true
	}
}

// write is the raw write of what is left of o.p: false while the socket's
// buffer is full.
func (o *op) write(fd uintptr) bool {
	for o.n < len(o.p) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&o.p[o.n])), uintptr(len(o.p)-o.n))
		switch e {
		case 0:
			o.n += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			o.errno = e
			return true
		}
	}
	return true
}

// Read reads what the socket holds, up to len(p), waiting in the network
// poller while it holds nothing.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	o := &c.r
	o.mu.Lock()
	o.p, o.n, o.errno = p, 0, 0
	err := c.raw.Read(o.fn)
	n, errno := o.n, o.errno
	o.p = nil // the caller's buffer is not kept
	o.mu.Unlock()
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
	o := &c.w
	o.mu.Lock()
	o.p, o.n, o.errno = p, 0, 0
	err := c.raw.Write(o.fn)
	n, errno := o.n, o.errno
	o.p = nil
	o.mu.Unlock()
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
