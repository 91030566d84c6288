package relay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
)

// Sink is what the row path needs of Kafka; *sink.Kafka is the one the
// relay runs with, the unit tests have a fake.
type Sink interface {
	// Fits returns an error (*sink.TooLargeError) when rec is larger than
	// its topic accepts.
	Fits(ctx context.Context, rec *kgo.Record) error
	// Produce hands rec over; promise is called once, from any goroutine,
	// with its ack or its failure, and in produce order per partition.
	// When Produce returns an error, promise is not called.
	Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) error
	// AbortBuffered fails what is not sent yet, without blocking: for a
	// refusal seen in a promise.
	AbortBuffered()
	// Flush waits until every record handed over is acked or failed.
	Flush(ctx context.Context) error
}

var _ Sink = (*sink.Kafka)(nil)

// publisher carries a session's rows to Kafka, in order, each through the
// same steps, whichever mode read it:
//
//	bind     the row's relation to the configured columns (once per relation)
//	skip     a row the poll phase before this WAL session published (ledger)
//	hold     an event whose aggregate has an open dead letter waits behind it
//	record   the event record, its envelope and its topic (Relay.record)
//	check    a refusal that stands for the event or its topic; the size limit
//	replace  under the dead-letter policy, a poison row by its dead letter
//	produce  to the sink, with the row's place in the ledger
//	ack      in the promise: metrics, Kafka health, refusals, then the ledger
//
// The modes differ only in where rows come from and in their ledger, which
// says what an ack lets them confirm: the WAL session's confirms a
// transaction's commit LSN once it and every transaction before it are
// acked (walLedger); the poll session's marks exactly the acked rows
// published (pollLedger).
//
// One goroutine publishes; promises run on the sink's.
type publisher struct {
	r    *Relay
	sink Sink
	dl   *deadLetters // nil under the halt policy
	// ledger is the mode's: the WAL session's for the session, the poll
	// session's for one batch.
	ledger ledger
	meter  meter
	// recordCtx is what records are produced with. It must outlive a
	// failure later in the stream: franz-go fails buffered records whose
	// Produce context ends.
	recordCtx context.Context
	bindings  map[*outbox.Relation]binding
	// historic: rows come with the shape their relation had when they
	// were written (the WAL's Relation messages), which no later change
	// of the table alters; a row that shape cannot be bound for is poison.
	// Rows read from the table (polling, a snapshot) have its shape now:
	// a table that lacks a mapped column stops the session, and its rows
	// wait for the table to be put right.
	historic bool
}

// binding is a relation's binding, or why it has none; raw then reads what
// it can (the id and the aggregate id) for a dead letter.
type binding struct {
	b, raw *schema.Binding
	err    error
}

func (r *Relay) newPublisher(k Sink, dl *deadLetters, mode Mode) *publisher {
	return &publisher{r: r, sink: k, dl: dl, meter: r.Metrics.meter(mode),
		bindings: make(map[*outbox.Relation]binding)}
}

// shapeError is a row whose relation, as the stream describes it where
// the row was written, cannot be bound: a mapped column renamed, dropped
// or missing. It is that row's: dead-lettered, with its aggregate held.
type shapeError struct {
	rel *outbox.Relation
	err error
}

func (e *shapeError) Error() string {
	return fmt.Sprintf("table %s.%s as it was when the row was written: %v (a schema change while rows were written)", e.rel.Schema, e.rel.Name, e.err)
}

func (e *shapeError) Unwrap() error   { return e.err }
func (e *shapeError) Poison() bool    { return true }
func (e *shapeError) Permanent() bool { return true }

// ledger is a mode's bookkeeping of the rows in flight.
type ledger interface {
	// skip tells a row that was published before and is not sent again.
	skip(c *outbox.Change) bool
	// produce is called for the i-th row of the batch before its record
	// is handed to the sink; what it returns is passed to ack.
	produce(i int, c *outbox.Change) entry
	// ack takes a produced row's ack (err nil) or its failure, once; from
	// the promise's goroutine.
	ack(e entry, err error)
	// boundary takes a commit or a heartbeat: a position with nothing
	// more to publish.
	boundary(c *outbox.Change)
	// where names the i-th row of the batch in an error.
	where(i int, c *outbox.Change, err error) error
}

// entry is a row's place in its ledger: its transaction (WAL) or its index
// in the batch (poll).
type entry struct {
	tx *txn
	i  int
}

// publish publishes a batch of changes in order: rows, and, from the WAL,
// commits and heartbeats. It stops at the first row it cannot produce;
// what it produced before is acked through the ledger.
func (p *publisher) publish(ctx context.Context, batch []outbox.Change) error {
	for i := range batch {
		c := &batch[i]
		switch c.Kind {
		case outbox.KindRow:
			if err := p.row(ctx, i, c); err != nil {
				return err
			}
		case outbox.KindCommit:
			p.meter.commit()
			p.ledger.boundary(c)
		case outbox.KindHeartbeat:
			p.meter.heartbeat()
			p.ledger.boundary(c)
		}
	}
	return nil
}

// row takes one row from its binding to the sink.
func (p *publisher) row(ctx context.Context, i int, c *outbox.Change) error {
	bd := p.bind(c.Relation)
	b := bd.b
	if bd.err != nil {
		if !p.historic || p.dl == nil {
			return bd.err
		}
		b = bd.raw
	}
	if p.ledger.skip(c) {
		return nil
	}
	rec, err := p.prepare(ctx, b, c, bd.err)
	if err != nil {
		return p.ledger.where(i, c, err)
	}
	e := p.ledger.produce(i, c)
	a := p.meter.row(rec.Topic, c.Relation, c.CommitTime)
	values := c.Values
	if err := p.sink.Produce(p.recordCtx, rec, func(rec *kgo.Record, err error) {
		p.acked(b, values, a, e, rec, err)
	}); err != nil {
		err = p.ledger.where(i, c, err)
		p.ledger.ack(e, err)
		return err
	}
	return nil
}

func (p *publisher) bind(rel *outbox.Relation) binding {
	if b, ok := p.bindings[rel]; ok {
		return b
	}
	var bd binding
	b, err := p.r.cfg.Columns.Bind(rel.Columns)
	if err != nil {
		bd.err = fmt.Errorf("table %s.%s: %w", rel.Schema, rel.Name, err)
		if p.historic {
			bd.err, bd.raw = &shapeError{rel: rel, err: err}, p.r.cfg.Columns.BindAny(rel.Columns)
		}
	}
	bd.b = b
	p.bindings[rel] = bd
	return bd
}

// prepare turns a row into the record to produce: its event, or, under
// the dead-letter policy, the dead letter that replaces a poison row or an
// event held behind one. unbound is why the row's relation has no binding
// (b reads only the id and the aggregate id then): the row is poison.
func (p *publisher) prepare(ctx context.Context, b *schema.Binding, c *outbox.Change, unbound error) (*kgo.Record, error) {
	var (
		rec  *kgo.Record
		held bool
		err  error
	)
	if !b.NullAggregateID(c.Values) {
		held, err = p.dl.isHeld(ctx, b.RawAggregateID(c.Values))
	}
	switch {
	case err != nil:
		return nil, err
	case unbound != nil:
		err = fmt.Errorf("event %s: %w", b.RawID(c.Values), unbound)
	case held:
		err = fmt.Errorf("event %s: %w", b.RawID(c.Values), errHeld)
	default:
		if rec, err = p.r.record(b, c); err == nil {
			if p.r.refused.active() {
				err = p.r.refused.check(b.RawID(c.Values), rec.Topic)
			}
			if err == nil {
				if ferr := p.sink.Fits(ctx, rec); ferr != nil {
					err = fmt.Errorf("event %s: %w", b.RawID(c.Values), ferr)
				}
			}
		}
	}
	if err == nil {
		return rec, nil
	}
	if p.dl == nil || !isPoison(err) {
		return nil, err
	}
	return p.dl.add(ctx, p.sink, b, c, err)
}

// acked is a record's promise: it counts the ack or the failure, clears or
// records a Kafka problem, notes refusals (stopping what is buffered after
// the first), and hands the outcome to the ledger.
func (p *publisher) acked(b *schema.Binding, values [][]byte, a ack, e entry, rec *kgo.Record, err error) {
	a.done(err)
	r := p.r
	if err == nil {
		now := time.Now().UnixNano()
		r.Stats.Published.Add(1)
		r.Stats.LastPublish.Store(now)
		if r.parent != nil { // one table of several: the pipeline's totals too
			r.parent.Stats.Published.Add(1)
			r.parent.Stats.LastPublish.Store(now)
		}
		r.Metrics.readiness().recordAcked(r.log, rec.Topic)
		if r.refused.active() {
			r.refused.acked(b.RawID(values), rec)
		}
	} else {
		if r.refused.failed(b.RawID(values), rec, err) {
			p.sink.AbortBuffered()
		}
		err = r.Metrics.readiness().recordFailed(r.log, rec.Topic, b.RawID(values), err)
	}
	p.ledger.ack(e, err)
}

// record encodes and routes one row.
func (r *Relay) record(b *schema.Binding, c *outbox.Change) (*kgo.Record, error) {
	rec, err := b.Record(c.Values, c.CommitTime)
	if err != nil {
		return nil, fmt.Errorf("row at %s in transaction %d: %w", c.LSN, c.XID, err)
	}
	rec.Origin = schema.Origin{
		Database: r.database, Schema: c.Relation.Schema, Table: c.Relation.Name,
		LSN: uint64(c.LSN), CommitLSN: uint64(c.FinalLSN), TxID: uint64(c.XID), CommitTime: c.CommitTime,
	}
	msg, err := r.enc.Encode(&rec)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, err)
	}
	topic, err := r.router.Topic(&rec)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, err)
	}
	kr := &kgo.Record{Topic: topic, Key: msg.Key, Value: msg.Value, Timestamp: msg.Timestamp}
	if msg.HasPartition {
		sink.SetPartition(kr, msg.Partition)
	}
	if len(msg.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(msg.Headers))
		for i, h := range msg.Headers {
			kr.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return kr, nil
}

// The WAL session.

// walLedger confirms through the watermark: a transaction's records are
// counted as they are produced, its commit closes it, and the watermark
// confirms its commit LSN once it and every transaction before it are
// acked. A failure stops the watermark for good.
type walLedger struct {
	wm *watermark
	tx *txn // the transaction being read; nil between transactions
	// polled are the rows the poll phase before this session published;
	// the stream replays them until it passes polled.until.
	polled *polledRows
	order  string // the column polling marks rows by
	stats  *Stats // counts the rows not sent again
}

func (l *walLedger) skip(c *outbox.Change) bool {
	set := l.polled.of(c)
	if len(set) == 0 {
		return false
	}
	if seq, ok := seqOf(c.Relation, c.Values, l.order); ok && set.take(seq) {
		l.stats.SkippedPolled.Add(1)
		return true
	}
	return false
}

func (l *walLedger) produce(int, *outbox.Change) entry {
	if l.tx == nil {
		l.tx = l.wm.begin()
	}
	l.wm.add(l.tx)
	return entry{tx: l.tx}
}

func (l *walLedger) ack(e entry, err error) { l.wm.ack(e.tx, err) }

func (l *walLedger) boundary(c *outbox.Change) {
	if c.Kind == outbox.KindCommit && l.polled.pending() && c.LSN > l.polled.until {
		l.polled.forget() // the stream is past what polling published
	}
	if c.Kind != outbox.KindCommit || l.tx == nil {
		l.wm.mark(c.LSN)
		return
	}
	l.wm.commit(l.tx, c.LSN)
	l.tx = nil
}

func (l *walLedger) where(_ int, c *outbox.Change, err error) error {
	return fmt.Errorf("row at %s: %w", c.LSN, err)
}

// stream publishes the changes of a replication stream as they come, a
// batch at a time. It stops taking changes once ctx ends (the session
// failed) or a record failed: nothing after a failed record may be
// confirmed. A batch is released once walked: no change of it is kept.
func (p *publisher) stream(ctx context.Context, batches <-chan *replication.Batch, wm *watermark) error {
	for b := range batches {
		err := p.walk(ctx, b.Changes, wm)
		b.Release()
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (p *publisher) walk(ctx context.Context, changes []outbox.Change, wm *watermark) error {
	for i := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := wm.failed(); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		if err := p.publish(ctx, changes[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

// The poll session.

// pollLedger is one polled batch's: which rows were acked, and the first
// failure. A batch is produced whole; its failures are reported once all
// of it is acked or failed.
type pollLedger struct {
	rows  []poll.Row
	wg    sync.WaitGroup
	acked []bool // each promise writes its own slot
	mu    sync.Mutex
	err   error
}

func newPollLedger(rows []poll.Row) *pollLedger {
	return &pollLedger{rows: rows, acked: make([]bool, len(rows))}
}

func (l *pollLedger) skip(*outbox.Change) bool { return false }

func (l *pollLedger) produce(i int, _ *outbox.Change) entry {
	l.wg.Add(1)
	return entry{i: i}
}

func (l *pollLedger) ack(e entry, err error) {
	if err != nil {
		l.fail(err)
	} else {
		l.acked[e.i] = true
	}
	l.wg.Done()
}

func (l *pollLedger) boundary(*outbox.Change) {}

func (l *pollLedger) where(i int, _ *outbox.Change, err error) error {
	return fmt.Errorf("row seq %d: %w", l.rows[i].Seq, err)
}

func (l *pollLedger) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
}

// failed is the batch's first failure; call it after the wait.
func (l *pollLedger) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// ackedSeqs are the seqs of exactly the acked rows, in batch order; call it
// after the wait. A failed record fails the later records of its partition
// with it, so no later event of its aggregate is among them.
func (l *pollLedger) ackedSeqs() []int64 {
	seqs := make([]int64, 0, len(l.rows))
	for i, ok := range l.acked {
		if ok {
			seqs = append(seqs, l.rows[i].Seq)
		}
	}
	return seqs
}

// batch produces one poll's rows in order with its own ledger. It returns
// the ledger, whose wait group ends when every produced row is acked or
// failed; the caller waits, then marks the acked rows published.
func (p *publisher) batch(ctx, recordCtx context.Context, rows []poll.Row) *pollLedger {
	led := newPollLedger(rows)
	p.ledger, p.recordCtx = led, recordCtx
	changes := make([]outbox.Change, len(rows))
	for i := range rows {
		changes[i] = rows[i].Change
	}
	if err := p.publish(ctx, changes); err != nil {
		led.fail(err)
	}
	p.meter.commit()
	return led
}
