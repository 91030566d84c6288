package rocketmq

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// wire is a connection to a name server or a broker: requests written
// under a lock, answers read by its own goroutine and handed to their
// callers by opaque number.
type wire struct {
	addr string
	nc   net.Conn

	mu      sync.Mutex // writing, the calls and the next number
	calls   map[int32]chan *command
	next    int32
	dead    chan struct{} // closed when the reader stopped
	err     error         // why it stopped, set before dead closes
	readers sync.WaitGroup
}

// errWireClosed is a call on a connection that was closed.
var errWireClosed = errors.New("rocketmq: connection closed")

// dialWire connects to addr.
func dialWire(ctx context.Context, addr string) (*wire, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	w := &wire{addr: addr, nc: nc, calls: map[int32]chan *command{}, dead: make(chan struct{})}
	w.readers.Add(1)
	go w.read()
	return w, nil
}

// read hands each answer to its caller until the connection ends.
// Requests from the server (it sends a producer none it needs) are
// dropped.
func (w *wire) read() {
	defer w.readers.Done()
	r := bufio.NewReader(w.nc)
	for {
		c, err := readFrame(r)
		if err != nil {
			w.mu.Lock()
			w.err = fmt.Errorf("rocketmq: connection to %s: %w", w.addr, err)
			w.mu.Unlock()
			close(w.dead)
			return
		}
		if c.Flag&flagResponse == 0 {
			continue
		}
		w.mu.Lock()
		ch := w.calls[c.Opaque]
		delete(w.calls, c.Opaque)
		w.mu.Unlock()
		if ch != nil {
			ch <- c
		}
	}
}

// call sends c and waits for its answer until ctx ends.
func (w *wire) call(ctx context.Context, c *command) (*command, error) {
	ch := make(chan *command, 1)
	w.mu.Lock()
	w.next++
	c.Opaque = w.next
	frame, err := appendFrame(nil, c)
	if err != nil {
		w.mu.Unlock()
		return nil, err
	}
	w.calls[c.Opaque] = ch
	if dl, ok := ctx.Deadline(); ok {
		_ = w.nc.SetWriteDeadline(dl)
	}
	_, err = w.nc.Write(frame)
	w.mu.Unlock()
	if err != nil {
		w.close()
		return nil, fmt.Errorf("rocketmq: writing to %s: %w", w.addr, err)
	}
	select {
	case a := <-ch:
		return a, nil
	case <-w.dead:
		w.mu.Lock()
		defer w.mu.Unlock()
		return nil, w.err
	case <-ctx.Done():
		w.mu.Lock()
		delete(w.calls, c.Opaque)
		w.mu.Unlock()
		return nil, fmt.Errorf("rocketmq: no answer from %s: %w", w.addr, ctx.Err())
	}
}

// alive tells the reader still runs.
func (w *wire) alive() bool {
	select {
	case <-w.dead:
		return false
	default:
		return true
	}
}

// close ends the connection and waits for its reader.
func (w *wire) close() {
	_ = w.nc.Close()
	w.readers.Wait()
}
