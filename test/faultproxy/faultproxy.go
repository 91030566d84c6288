// Package faultproxy puts a controllable network link between pgoutbox and
// a server, for fault tests: it forwards bytes, delays them (a slow link),
// black-holes them (the connection stays up but nothing crosses, as in a
// partition), or resets every connection. It fronts Postgres as a TCP forwarder and the
// in-process broker as a listener (kfake.ListenFn), so that the address
// the broker advertises is the proxy's.
package faultproxy

import (
	"net"
	"sync"
	"time"
)

// Proxy is one controllable link.
type Proxy struct {
	ln     net.Listener
	target string // dial target for a forwarder; empty for a listener

	mu      sync.Mutex
	cond    *sync.Cond
	blocked bool
	delay   time.Duration // added to each chunk of bytes, each way
	conns   map[net.Conn]struct{}
	accept  chan net.Conn // listener mode: the server's ends
	closed  chan struct{}
	once    sync.Once
}

func newProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, accept: make(chan net.Conn), closed: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	return p, nil
}

// Forward listens on a free loopback port and forwards to target.
func Forward(target string) (*Proxy, error) { return newProxy(target) }

// Listener returns a proxy whose connections are served by whoever calls
// Accept on the returned listener, such as kfake through ListenFn.
func Listener() (*Proxy, net.Listener, error) {
	p, err := newProxy("")
	if err != nil {
		return nil, nil, err
	}
	return p, (*serverListener)(p), nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole stops all bytes in both directions; connections stay open.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.blocked = true
	p.mu.Unlock()
}

// Heal lets bytes cross again; what was held is delivered.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.blocked = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Delay holds each chunk of bytes read from either side for d before it is
// forwarded, in order: a link with d of extra latency each way (a request
// and its answer take 2d more). Zero removes the delay.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = max(d, 0)
	p.mu.Unlock()
}

// Reset closes every open connection with a TCP reset.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.once.Do(func() {
		close(p.closed)
		p.ln.Close()
		p.Heal()
		p.Reset()
	})
}

func (p *Proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	p.mu.Unlock()
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
	p.mu.Unlock()
}

func (p *Proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(client)
	}
}

func (p *Proxy) handle(client net.Conn) {
	var server net.Conn
	if p.target != "" {
		var err error
		if server, err = net.Dial("tcp", p.target); err != nil {
			// The target is down: reset, as a refused connection would
			// end. A graceful close would look like a server that
			// accepted and hung up (a listener that wants TLS, say).
			if tc, ok := client.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			client.Close()
			return
		}
	} else {
		var end net.Conn
		server, end = net.Pipe()
		select {
		case p.accept <- end:
		case <-p.closed:
			client.Close()
			server.Close()
			return
		}
	}
	p.track(client, server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
	p.untrack(client, server)
	<-done
}

// pipe copies src to dst, holding bytes while the proxy is black-holed,
// and for the delay when one is set.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			delay := p.delay
			p.mu.Unlock()
			if delay > 0 {
				time.Sleep(delay)
			}
			p.mu.Lock()
			for p.blocked {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a reset: the other direction ends too
		}
	}
}

// serverListener hands the server ends of proxied connections to Accept.
type serverListener Proxy

func (l *serverListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *serverListener) Close() error { (*Proxy)(l).Close(); return nil }

func (l *serverListener) Addr() net.Addr { return l.ln.Addr() }
