package redisstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pending is a record handed over, waiting for its batch's reply.
type pending struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
	id      string // its event id, "" for none
	e       entry
}

// batch is what one MULTI/EXEC writes, and where each of its streams
// stood before it: an entry id no later than its first entry there.
type batch struct {
	items  []pending
	before map[string]string
}

// writer writes batches on one connection at a time, from one goroutine,
// and runs their promises in order.
type writer struct {
	s      *Streams
	client redis.UniversalClient
	// conn is the writing connection to a server (not a cluster); nil
	// until used, and after it broke.
	conn *redis.Conn
	// unsettled: a cluster's client has not yet found out, since it was
	// made or since a batch's reply was lost, what the server kept.
	unsettled bool

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	queue  chan pending
	slots  chan struct{}
	done   chan struct{} // closed when run returns
	// broken is set when a batch failed: what follows could land ahead
	// of it when it is sent again, so nothing is written until Resume.
	broken atomic.Bool

	mu    sync.Mutex
	n     int             // handed over, promise not yet run
	idles []chan struct{} // Flush's waits, closed when n is 0

	// The record checked last and its entry (producer goroutine only).
	checked *kgo.Record
	entry   entry

	// What the producer goroutine learned of the server (check).
	lookups sync.Mutex
	maxBulk int
	seen    map[string]string // stream -> its last entry id when first met ("0-0": none)

	// last is, per stream, the entry this connection wrote last (writer
	// goroutine only).
	last map[string]string
	mem  *throttle
}

func newWriter(s *Streams, client redis.UniversalClient) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{s: s, client: client, ctx: ctx, cancel: cancel, unsettled: s.cfg.Cluster,
		queue: make(chan pending, s.cfg.MaxPending), slots: make(chan struct{}, s.cfg.MaxPending), done: make(chan struct{}),
		seen: map[string]string{}, last: map[string]string{}, mem: newThrottle(s.cfg)}
	go w.run()
	return w
}

// check builds r's entry and checks it against the server: its size, and
// its stream's key, which must hold a stream or nothing.
func (w *writer) check(ctx context.Context, r *kgo.Record) (entry, error) {
	var e entry
	if w.checked == r {
		// The relay asks Fits, then Produce, of the same record.
		e = w.entry
	} else {
		e = entryOf(r, w.s.cfg.Format, w.s.cfg.NullKey, w.s.cfg.NullValue)
		w.checked, w.entry = r, e
	}
	maxBulk, err := w.lookup(ctx, e.stream)
	if err != nil {
		return e, err
	}
	if len(e.stream) > maxBulk {
		return e, &TooLargeError{Stream: e.stream, Part: "the stream's name", Size: len(e.stream), Max: maxBulk}
	}
	for i, f := range e.fields {
		if len(f) > maxBulk {
			part := "a field's name"
			if i%2 == 1 {
				part = "the value of field " + e.fields[i-1][:min(len(e.fields[i-1]), 64)]
			}
			return e, &TooLargeError{Stream: e.stream, Part: part, Size: len(f), Max: maxBulk}
		}
	}
	if m := w.s.cfg.MaxEntryBytes; m > 0 && e.size() > m {
		return e, &TooLargeError{Stream: e.stream, Part: "the entry", Size: e.size(), Max: m}
	}
	return e, nil
}

// lookup returns the server's proto-max-bulk-len and learns stream's last
// entry, once per stream: a key of another type is a *WrongTypeError.
func (w *writer) lookup(ctx context.Context, stream string) (int, error) {
	w.lookups.Lock()
	defer w.lookups.Unlock()
	if w.maxBulk == 0 {
		// A server that refuses CONFIG (an ACL, a managed service) keeps
		// the default.
		v, err := w.client.ConfigGet(ctx, "proto-max-bulk-len").Result()
		if err != nil && !isReplyErr(err) {
			return 0, classify("", err)
		}
		w.maxBulk = defaultMaxBulk
		if n, err := strconv.Atoi(v["proto-max-bulk-len"]); err == nil && n > 0 {
			w.maxBulk = n
		}
	}
	if _, ok := w.seen[stream]; ok {
		return w.maxBulk, nil
	}
	msgs, err := w.client.XRevRangeN(ctx, stream, "+", "-", 1).Result()
	switch c := classify(stream, err); {
	case err == nil:
	case !isReplyErr(err):
		return 0, c
	case errors.As(c, new(*WrongTypeError)):
		return 0, c
	default:
		// A user whose ACL lets it add entries but not read them: a lost
		// reply cannot be looked for, and its batch is sent again.
		w.s.log.Warn("redis: the stream cannot be read; a batch whose reply is lost will be written again", "stream", stream, "err", err)
	}
	w.seen[stream] = "0-0"
	if len(msgs) == 1 {
		w.seen[stream] = msgs[0].ID
	}
	return w.maxBulk, nil
}

func (w *writer) acquire(ctx context.Context) error {
	select {
	case w.slots <- struct{}{}:
		w.mu.Lock()
		w.n++
		w.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.ctx.Done():
		return errClosed
	}
}

func (w *writer) run() {
	defer close(w.done)
	for {
		select {
		case p := <-w.queue:
			items := []pending{p}
		more:
			for len(items) < w.s.cfg.BatchSize {
				select {
				case p := <-w.queue:
					items = append(items, p)
				default:
					break more
				}
			}
			w.write(items)
		case <-w.ctx.Done():
			for {
				select {
				case p := <-w.queue:
					w.finish(p, errClosed)
				default:
					if w.conn != nil {
						_ = w.conn.Close()
					}
					_ = w.client.Close()
					return
				}
			}
		}
	}
}

// finish runs p's promise and gives its slot back.
func (w *writer) finish(p pending, err error) {
	p.promise(p.rec, err)
	<-w.slots
	w.mu.Lock()
	w.n--
	if w.n == 0 {
		for _, c := range w.idles {
			close(c)
		}
		w.idles = nil
	}
	w.mu.Unlock()
}

// write writes one batch and settles its promises in order: the entries
// recalled as written already are not sent again; after the first
// failure, every later record fails too.
func (w *writer) write(items []pending) {
	if w.broken.Load() || w.s.halted.Load() {
		w.failFrom(items, 0, ErrHalted)
		return
	}
	// A new connection first finds out what the last one wrote.
	if err := w.connect(); err != nil {
		w.failFrom(items, 0, err)
		return
	}
	send, err := w.unwritten(items)
	if err != nil {
		w.failFrom(items, 0, err)
		return
	}
	if len(send) == 0 {
		for _, p := range items {
			w.finish(p, nil)
		}
		return
	}
	w.mem.wait(w.ctx, w.client, send)
	b := &batch{items: send, before: map[string]string{}}
	for _, p := range send {
		s := p.e.stream
		if _, ok := b.before[s]; !ok {
			b.before[s] = w.before(s)
		}
	}
	ids, failed, err := w.exec(b)
	// The outcome of each record sent: ids[i] its entry id, or failed
	// from index failed on with err.
	j := 0
	for i, p := range items {
		if j < len(send) && send[j].rec == p.rec {
			j++
			if j-1 >= failed {
				w.failFrom(items, i, err)
				return
			}
			w.last[p.e.stream] = ids[j-1]
			w.s.recall.wrote(p.id, p.e.stream, ids[j-1])
		}
		w.finish(p, nil)
	}
}

// unwritten returns the items to send: those whose event is not recalled
// as written already, nor sent earlier in the batch. Before it trusts
// what it recalls, it checks that the server still holds the last entry
// written to each stream concerned (a server restarted without its data
// holds none of them).
func (w *writer) unwritten(items []pending) ([]pending, error) {
	var streams []string
	for _, p := range items {
		if w.s.recall.has(p.id) && !slices.Contains(streams, p.e.stream) {
			streams = append(streams, p.e.stream)
		}
	}
	if len(streams) > 0 {
		if err := w.verify(streams); err != nil {
			w.dropConn()
			return nil, err
		}
	}
	send := make([]pending, 0, len(items))
	var ids map[string]bool
	for _, p := range items {
		switch {
		case w.s.recall.has(p.id):
		case p.id != "" && ids[p.id]:
		default:
			if p.id != "" {
				if ids == nil {
					ids = map[string]bool{}
				}
				ids[p.id] = true
			}
			send = append(send, p)
		}
	}
	return send, nil
}

// failFrom fails items[from:].
func (w *writer) failFrom(items []pending, from int, err error) {
	w.broken.Store(true)
	for _, p := range items[from:] {
		w.finish(p, err)
	}
}

// before is an entry id of stream no later than what this connection
// writes next there: the last it wrote, else the last it saw.
func (w *writer) before(stream string) string {
	if id, ok := w.last[stream]; ok {
		return id
	}
	if id := w.s.recall.last(stream); id != "" {
		// Written on an earlier connection: later than what was seen.
		if seen := w.seenID(stream); seen == "" || compareIDs(id, seen) > 0 {
			return id
		}
	}
	if id := w.seenID(stream); id != "" {
		return id
	}
	return "0-0"
}

func (w *writer) seenID(stream string) string {
	w.lookups.Lock()
	defer w.lookups.Unlock()
	return w.seen[stream]
}

// exec writes b in one MULTI/EXEC (and WAITs for a replica when asked
// to). It returns the entry ids of the records written, and from which
// record on they failed (len(b.items) when none did) with the error. A
// connection that fails before the reply leaves b unsure: the next
// connection finds out whether it was written.
func (w *writer) exec(b *batch) (ids []string, failed int, err error) {
	if w.s.cfg.Cluster {
		return w.execCluster(b)
	}
	pipe := w.conn.Pipeline()
	pipe.Do(w.ctx, "multi")
	queued := make([]*redis.Cmd, len(b.items))
	for i, p := range b.items {
		queued[i] = pipe.Do(w.ctx, xadd(p.e)...)
	}
	exec := pipe.Do(w.ctx, "exec")
	var wait *redis.Cmd
	if w.s.cfg.Wait {
		wait = pipe.Do(w.ctx, "wait", 1, w.s.cfg.WaitTimeout.Milliseconds())
	}
	_, _ = pipe.Exec(w.ctx)
	first := b.items[0].e.stream
	if err := exec.Err(); err != nil {
		var re redis.Error
		if !errors.As(err, &re) {
			// No reply: written whole or not at all, unknown which.
			w.s.recall.unsure = b
			w.dropConn()
			return nil, 0, fmt.Errorf("redis: connection lost before the reply to %d entries: %w", len(b.items), err)
		}
		// EXECABORT: a command was refused while queued (OOM, READONLY,
		// a wrong argument); nothing was written. The refusal is in the
		// reply to the command itself.
		for i, c := range queued {
			if c.Err() != nil {
				return nil, 0, classify(b.items[i].e.stream, c.Err())
			}
		}
		return nil, 0, classify(first, err)
	}
	replies, _ := exec.Val().([]any)
	if len(replies) != len(b.items) {
		return nil, 0, fmt.Errorf("redis: EXEC answered %d replies for %d entries", len(replies), len(b.items))
	}
	ids = make([]string, len(b.items))
	failed = len(b.items)
	for i, r := range replies {
		switch v := r.(type) {
		case string:
			ids[i] = v
		case error:
			if failed == len(b.items) {
				failed, err = i, classify(b.items[i].e.stream, v)
			}
		}
	}
	if wait != nil {
		if werr := w.awaitReplica(wait); werr != nil {
			// Written, but no replica said so: not recalled, the relay
			// sends it again.
			return nil, 0, werr
		}
	}
	// Entries written after a refused one (in another stream) are
	// recalled, so that sending them again writes nothing.
	for i := failed; i < len(b.items); i++ {
		if ids[i] != "" {
			w.last[b.items[i].e.stream] = ids[i]
			w.s.recall.wrote(b.items[i].id, b.items[i].e.stream, ids[i])
		}
	}
	return ids, failed, err
}

// awaitReplica waits until a replica acknowledged this connection's
// writes: WAIT again, every WaitRetryDelay, while none did.
func (w *writer) awaitReplica(wait *redis.Cmd) error {
	n, err := wait.Int64()
	for {
		if err != nil {
			w.dropConn()
			return fmt.Errorf("redis: WAIT for a replica: %w", err)
		}
		if n >= 1 {
			return nil
		}
		w.s.log.Warn("redis: no replica acknowledged the entries within wait.timeout.ms; waiting again (nothing is confirmed before one does)",
			"timeout", w.s.cfg.WaitTimeout, "retry_in", w.s.cfg.WaitRetryDelay)
		select {
		case <-time.After(w.s.cfg.WaitRetryDelay):
		case <-w.ctx.Done():
			return errClosed
		}
		n, err = w.conn.Do(w.ctx, "wait", 1, w.s.cfg.WaitTimeout.Milliseconds()).Int64()
	}
}

// target is what batches and lookups of written entries go to: the
// writing connection, or the cluster.
func (w *writer) target() redis.Cmdable {
	if w.s.cfg.Cluster {
		return w.client
	}
	return w.conn
}

// execCluster writes b to a cluster: one MULTI/EXEC per hash slot, each
// written whole or not at all, one after the other. Entries whose reply a
// lost connection took are unsure, and the next batch first looks for
// them.
func (w *writer) execCluster(b *batch) (ids []string, failed int, err error) {
	cc := w.client.(*redis.ClusterClient)
	var order []int
	groups := map[int][]int{}
	for i, p := range b.items {
		s := slot(p.e.stream)
		if _, ok := groups[s]; !ok {
			order = append(order, s)
		}
		groups[s] = append(groups[s], i)
	}
	ids = make([]string, len(b.items))
	errs := make([]error, len(b.items))
	var unsure []pending
	for _, s := range order {
		pipe := cc.TxPipeline()
		cmds := make([]*redis.Cmd, len(groups[s]))
		for k, i := range groups[s] {
			cmds[k] = pipe.Do(w.ctx, xadd(b.items[i].e)...)
		}
		_, _ = pipe.Exec(w.ctx)
		for k, i := range groups[s] {
			v, err := cmds[k].Text()
			switch {
			case err == nil:
				ids[i] = v
			case isReplyErr(err):
				errs[i] = classify(b.items[i].e.stream, err)
			default:
				errs[i] = fmt.Errorf("redis: connection lost before the reply to %d entries: %w", len(groups[s]), err)
				unsure = append(unsure, b.items[i])
			}
		}
	}
	if len(unsure) > 0 {
		w.s.recall.unsure = &batch{items: unsure, before: b.before}
		w.dropConn()
	}
	failed = len(b.items)
	for i, e := range errs {
		if e != nil {
			failed, err = i, e
			break
		}
	}
	for i := failed; i < len(b.items); i++ {
		if ids[i] != "" {
			w.last[b.items[i].e.stream] = ids[i]
			w.s.recall.wrote(b.items[i].id, b.items[i].e.stream, ids[i])
		}
	}
	return ids, failed, err
}

// xadd is the command that appends e.
func xadd(e entry) []any {
	args := make([]any, 0, 3+len(e.fields))
	args = append(args, "xadd", e.stream, "*")
	for _, f := range e.fields {
		args = append(args, f)
	}
	return args
}

// connect opens the writing connection when there is none, and first
// finds out what the server kept of what was written before (settle).
func (w *writer) connect() error {
	if w.s.cfg.Cluster {
		if w.unsettled {
			if err := w.settle(); err != nil {
				return err
			}
			w.unsettled = false
		}
		return nil
	}
	if w.conn != nil {
		return nil
	}
	w.conn = w.client.(*redis.Client).Conn()
	if err := w.settle(); err != nil {
		w.dropConn()
		return err
	}
	return nil
}

func (w *writer) dropConn() {
	w.unsettled = w.s.cfg.Cluster
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
	clear(w.last)
}

func (w *writer) pending() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int64(w.n)
}

// flush waits until no record waits.
func (w *writer) flush(ctx context.Context) error {
	w.mu.Lock()
	if w.n == 0 {
		w.mu.Unlock()
		return nil
	}
	idle := make(chan struct{})
	w.idles = append(w.idles, idle)
	w.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close fails what still waits, stops the goroutine and closes the
// connections; call it only while nothing is produced.
func (w *writer) close() {
	w.cancel()
	<-w.done
}
