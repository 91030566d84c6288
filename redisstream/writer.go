package redisstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	s *Streams
	// client is the server's or the cluster's, shared by the parts.
	client  redis.UniversalClient
	checker *checker // the producer goroutine's
	backlog *backlog
	link    *link     // the writer goroutine's
	mem     *throttle // the writer goroutine's

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	queue  chan pending
	done   chan struct{} // closed when run returns
	// broken is set when a batch failed: what follows could land ahead
	// of it when it is sent again, so nothing is written until Resume.
	broken atomic.Bool
}

func newWriter(s *Streams, client redis.UniversalClient) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{s: s, client: client, checker: newChecker(s.cfg, client, s.log), backlog: newBacklog(s.cfg.MaxPending),
		link: newLink(client, s.cfg.Cluster), mem: newThrottle(s.cfg),
		ctx: ctx, cancel: cancel, queue: make(chan pending, s.cfg.MaxPending), done: make(chan struct{})}
	go w.run()
	return w
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
					w.link.close()
					return
				}
			}
		}
	}
}

// finish runs p's promise and gives its place in the backlog back.
func (w *writer) finish(p pending, err error) {
	p.promise(p.rec, err)
	w.backlog.release()
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
	if err := w.link.open(w.settle); err != nil {
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
			w.link.last[p.e.stream] = ids[j-1]
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
			w.link.drop()
			return nil, err
		}
	}
	send := make([]pending, 0, len(items))
	var ids map[string]bool
	for _, p := range items {
		switch {
		case w.s.cfg.SkipPrefix != "" && strings.HasPrefix(p.e.stream, w.s.cfg.SkipPrefix):
			// Acknowledged unwritten, in its turn (write).
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
	if id, ok := w.link.last[stream]; ok {
		return id
	}
	if id := w.s.recall.last(stream); id != "" {
		// Written on an earlier connection: later than what was seen.
		if seen := w.checker.seenID(stream); seen == "" || compareIDs(id, seen) > 0 {
			return id
		}
	}
	if id := w.checker.seenID(stream); id != "" {
		return id
	}
	return "0-0"
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
	pipe := w.link.conn.Pipeline()
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
			w.link.drop()
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
			w.link.last[b.items[i].e.stream] = ids[i]
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
			w.link.drop()
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
		n, err = w.link.conn.Do(w.ctx, "wait", 1, w.s.cfg.WaitTimeout.Milliseconds()).Int64()
	}
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
		w.link.drop()
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
			w.link.last[b.items[i].e.stream] = ids[i]
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

// close fails what still waits, stops the goroutine and closes the
// connections; call it only while nothing is produced.
func (w *writer) close() {
	w.cancel()
	<-w.done
}
