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
// for any net.Conn. A raw system call keeps its P while it runs, which is
// why only reads and writes of a non-blocking socket take this path.
//
// On systems other than Unix, Wrap leaves connections as they are.
package rawconn

import (
	"context"
	"net"
)

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
