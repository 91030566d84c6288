package pulsar

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// wire is one connection to a broker (or through a proxy to one). Its
// reader goroutine answers the broker's pings and credentials challenges
// and hands each answer to the request waiting for it and each receipt to
// its producer; Close stops it and waits for it.
type wire struct {
	nc   net.Conn
	auth func() (method string, data []byte, err error)

	wmu sync.Mutex // one frame at a time

	mu        sync.Mutex
	requests  map[uint64]chan *command
	producers map[uint64]*producer
	err       error // why the connection ended; set once

	nextID         atomic.Uint64 // request and producer ids
	maxMessageSize int           // the broker's, from CONNECTED
	done           chan struct{} // closed when the reader returned
}

// errConnClosed is a request or message of a connection closed first.
var errConnClosed = errors.New("pulsar: the connection to the broker closed")

// dialWire connects to addr (host:port), over TLS when tlsCfg is set,
// and says CONNECT; proxyTo names the broker a proxy is to reach.
func dialWire(ctx context.Context, addr string, tlsCfg *tls.Config, auth func() (string, []byte, error), proxyTo string) (*wire, error) {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	var nc net.Conn
	var err error
	if tlsCfg != nil {
		nc, err = (&tls.Dialer{NetDialer: &d, Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("pulsar: connecting to %s: %w", addr, err)
	}
	w := &wire{nc: nc, auth: auth, requests: map[uint64]chan *command{}, producers: map[uint64]*producer{}, done: make(chan struct{})}
	method, data, err := auth()
	if err != nil {
		nc.Close()
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	} else {
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	}
	if _, err := nc.Write(connectCmd(method, data, proxyTo)); err != nil {
		nc.Close()
		return nil, fmt.Errorf("pulsar: connecting to %s: %w", addr, err)
	}
	r := bufio.NewReaderSize(nc, 64<<10)
	for {
		c, err := readCommand(r)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("pulsar: connecting to %s: %w", addr, err)
		}
		switch c.typ {
		case cmdConnected:
			w.maxMessageSize = c.maxMessageSize
			_ = nc.SetDeadline(time.Time{})
			go w.read(r)
			return w, nil
		case cmdError:
			nc.Close()
			return nil, &ConnectError{Addr: addr, Err: c.err()}
		case cmdAuthChallenge:
			if err := w.answerChallenge(); err != nil {
				nc.Close()
				return nil, err
			}
		}
	}
}

// readCommand reads one frame's command (a producer is sent no payload).
func readCommand(r *bufio.Reader) (*command, error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	total, size := binary.BigEndian.Uint32(head[:4]), binary.BigEndian.Uint32(head[4:])
	if total > maxFrame || size > total-4 {
		return nil, errMalformed
	}
	b := make([]byte, total-4)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return parseCommand(b[:size])
}

// read is the reader goroutine.
func (w *wire) read(r *bufio.Reader) {
	defer close(w.done)
	for {
		c, err := readCommand(r)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				err = errConnClosed
			}
			w.fail(err)
			return
		}
		switch c.typ {
		case cmdPing:
			if err := w.write(pongCmd()); err != nil {
				w.fail(err)
				return
			}
		case cmdAuthChallenge:
			if err := w.answerChallenge(); err != nil {
				w.fail(err)
				return
			}
		case cmdSendReceipt, cmdSendError:
			if p := w.producer(c.producerID); p != nil {
				p.settle(c.sequenceID, c.err())
			}
		case cmdCloseProducer:
			if p := w.producer(c.producerID); p != nil {
				p.close(errProducerClosed)
			}
		case cmdProducerSuccess:
			if !c.producerReady {
				continue // the broker answers again when it is
			}
			w.answer(c)
		case cmdSuccess, cmdError, cmdLookupAnswer, cmdPartitionedMetadataAnswer:
			w.answer(c)
		}
	}
}

// answerChallenge sends the credentials again (a token read again from
// its file) when the broker asks.
func (w *wire) answerChallenge() error {
	method, data, err := w.auth()
	if err != nil {
		return err
	}
	return w.write(authResponseCmd(method, data))
}

func (w *wire) answer(c *command) {
	w.mu.Lock()
	ch := w.requests[c.requestID]
	delete(w.requests, c.requestID)
	w.mu.Unlock()
	if ch != nil {
		ch <- c
	}
}

func (w *wire) producer(id uint64) *producer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.producers[id]
}

// write sends one frame.
func (w *wire) write(b []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if _, err := w.nc.Write(b); err != nil {
		w.fail(err)
		return fmt.Errorf("pulsar: writing to the broker: %w", err)
	}
	return nil
}

// request sends a request built for a fresh request id and waits for
// its answer, until ctx ends or the connection does.
func (w *wire) request(ctx context.Context, build func(id uint64) []byte) (*command, error) {
	id := w.nextID.Add(1)
	ch := make(chan *command, 1)
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return nil, w.err
	}
	w.requests[id] = ch
	w.mu.Unlock()
	if err := w.write(build(id)); err != nil {
		return nil, err
	}
	select {
	case c := <-ch:
		return c, c.err()
	case <-w.done:
		return nil, w.failure()
	case <-ctx.Done():
		w.mu.Lock()
		delete(w.requests, id)
		w.mu.Unlock()
		return nil, ctx.Err()
	}
}

// fail ends the connection with err: every producer's messages fail.
func (w *wire) fail(err error) {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return
	}
	w.err = err
	producers := w.producers
	w.producers = map[uint64]*producer{}
	w.mu.Unlock()
	w.nc.Close()
	for _, p := range producers {
		p.close(fmt.Errorf("%w: %w", errConnClosed, err))
	}
}

// failure is why the connection ended, nil while it has not.
func (w *wire) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close ends the connection and waits for its reader.
func (w *wire) Close() {
	w.fail(errConnClosed)
	<-w.done
}

// producer is a producer of one topic on a connection; its messages'
// outcomes arrive on the reader's goroutine.
type producer struct {
	w     *wire
	id    uint64
	name  string
	topic string
	// schemaVersion is the version of the producer's schema the broker
	// gave, nil without one: each message names it, as the Java client's.
	schemaVersion []byte
	seq           uint64 // the next sequence id; the producing goroutine's

	mu      sync.Mutex
	waiting map[uint64]func(error) // by sequence id
	err     error                  // set once the producer ended
}

// errProducerClosed is a producer the broker closed (the topic moved to
// another broker, or was unloaded): its messages without a receipt
// fail, and a new producer sends what comes next.
var errProducerClosed = errors.New("pulsar: the broker closed the producer (the topic was unloaded or moved)")

// newProducer creates a producer of topic on w.
func (w *wire) newProducer(ctx context.Context, topic string, text bool) (*producer, error) {
	id := w.nextID.Add(1)
	p := &producer{w: w, id: id, topic: topic, waiting: map[uint64]func(error){}}
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return nil, w.err
	}
	w.producers[id] = p
	w.mu.Unlock()
	c, err := w.request(ctx, func(req uint64) []byte { return producerCmd(topic, id, req, text) })
	if err != nil {
		w.mu.Lock()
		delete(w.producers, id)
		w.mu.Unlock()
		return nil, err
	}
	p.name, p.schemaVersion = c.producerName, c.schemaVersion
	return p, nil
}

// send sends one message; done is called once with the broker's
// receipt or the failure: on the reader's goroutine, or on this one when
// the producer had ended or the write failed.
func (p *producer) send(key string, props [][2]string, value []byte, null bool, done func(error)) {
	seq := p.seq
	p.seq++
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		done(err)
		return
	}
	p.waiting[seq] = done
	p.mu.Unlock()
	md, payload := batchOfOne(p.name, seq, uint64(time.Now().UnixMilli()), p.schemaVersion, props, key, value, null)
	if err := p.w.write(sendFrame(p.id, seq, md, payload)); err != nil {
		p.settle(seq, err) // fail has run done already, unless it raced
	}
}

// settle runs a message's done with the broker's answer.
func (p *producer) settle(seq uint64, err error) {
	p.mu.Lock()
	done := p.waiting[seq]
	delete(p.waiting, seq)
	p.mu.Unlock()
	if done != nil {
		done(err)
	}
}

// close fails every message without a receipt, and what is sent after.
func (p *producer) close(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	waiting := p.waiting
	p.waiting = map[uint64]func(error){}
	p.mu.Unlock()
	for _, done := range waiting {
		done(err)
	}
}

// ended tells a producer the broker or the connection closed.
func (p *producer) ended() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil
}

// ConnectError is a broker that refused the connection (its credentials).
type ConnectError struct {
	Addr string
	Err  error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("pulsar: the broker at %s refused the connection: %v", e.Addr, e.Err)
}

func (e *ConnectError) Unwrap() error { return e.Err }
