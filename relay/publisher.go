package relay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/schema"
)

// publisher carries a session's rows to Kafka, in order, each through the
// same steps, whichever mode read it:
//
//	bind     the row's relation to the configured columns (once per relation)
//	skip     a row the poll phase before this WAL session published (ledger)
//	hold     an event whose aggregate has an open dead letter waits behind it
//	record   the event record, its envelope and its topic (pipeline.record)
//	check    a refusal that stands for the event or its topic; the size limit
//	replace  under the dead-letter policy, a poison row by its dead letter
//	produce  to the sink, with the row's place in the ledger
//	ack      in the promise: hooks, the broker's health, refusals, then the ledger
//
// The modes differ only in where rows come from and in their ledger, which
// says what an ack lets them confirm: a WAL session's is its delivery's
// (delivery.go: the watermark confirms a transaction's commit LSN once it
// and every transaction before it are acked, or a Kafka transaction's
// commit does); the poll session's marks exactly the acked rows published
// (pollLedger).
//
// One goroutine publishes; promises run on the sink's.
type publisher struct {
	pipe   *pipeline
	broker *brokerHealth
	sink   producer
	dl     *deadLetters // nil under the halt policy
	// ledger is the mode's: the WAL session's for the session, the poll
	// session's for one batch.
	ledger ledger
	meter  meter
	// recordCtx is what records are produced with. It must outlive a
	// failure later in the stream: franz-go fails buffered records whose
	// Produce context ends.
	recordCtx context.Context
	// cols bind each relation (gate.columns).
	cols     schema.Columns
	bindings map[*outbox.Relation]binding
	// eventIDs: the sink reads each record's event id (Broker.EventIDs).
	eventIDs bool
	// historic: rows come with the shape their relation had when they
	// were written (the WAL's Relation messages), which no later change
	// of the table alters; a row that shape cannot be bound for is poison.
	// Rows read from the table (polling, a snapshot) have its shape now:
	// a table that lacks a mapped column stops the session, and its rows
	// wait for the table to be put right.
	historic bool
	// tx follows the stream's transactions for their metadata (txmeta.go);
	// nil without it, and outside a WAL session.
	tx *txMeta
}

// binding is a relation's binding, or why it has none; raw then reads what
// it can (the id and the aggregate id) for a dead letter.
type binding struct {
	b, raw *schema.Binding
	err    error
}

// newPublisher is a session's publisher of mode, producing to k, binding
// with cols.
func (pp *pipeline) newPublisher(k producer, dl *deadLetters, mode Mode, cols schema.Columns) *publisher {
	return &publisher{pipe: pp, broker: pp.ready.broker, sink: k, dl: dl, meter: pp.hooks.meter(mode), cols: cols,
		bindings: make(map[*outbox.Relation]binding)}
}

// streaming makes p a WAL session's: its rows go into led, their records
// are produced with recordCtx, and they come with the shape their
// relation had when they were written.
func (p *publisher) streaming(led ledger, recordCtx context.Context) *publisher {
	p.ledger, p.recordCtx, p.historic = led, recordCtx, true
	if t := p.pipe.cfg.TransactionTopic; t != "" {
		p.tx = &txMeta{topic: t}
	}
	return p
}

// shapeError is a row whose relation, as the stream describes it where
// the row was written, cannot be bound: a mapped column renamed, dropped
// or missing. It is that row's: dead-lettered, with its aggregate held.
type shapeError struct {
	rel *outbox.Relation
	err error
}

func (e *shapeError) Error() string {
	if e.rel.Message {
		return fmt.Sprintf("logical decoding message of prefix %q: %v (its content must be a JSON object holding the fields the event is made of)", e.rel.Name, e.err)
	}
	return fmt.Sprintf("table %s.%s as it was when the row was written: %v (a schema change while rows were written)", e.rel.Schema, e.rel.Name, e.err)
}

func (e *shapeError) Unwrap() error   { return e.err }
func (e *shapeError) Poison() bool    { return true }
func (e *shapeError) Permanent() bool { return true }

// ledger is a mode's bookkeeping of the rows in flight: at-least-once's
// (flow.WALLedger, flow.PollLedger) or exactly-once's (eos.Ledger).
type ledger interface {
	// Skip tells a row that was published before and is not sent again.
	Skip(c *outbox.Change) bool
	// Produce is called for the i-th row of the batch before its record
	// is handed to the sink; what it returns is passed to Ack.
	Produce(i int, c *outbox.Change) flow.Entry
	// Ack takes a produced row's ack (err nil) or its failure, once; from
	// the promise's goroutine.
	Ack(e flow.Entry, err error)
	// Boundary takes a commit or a heartbeat: a position with nothing
	// more to publish.
	Boundary(c *outbox.Change)
	// Where names the i-th row of the batch in an error.
	Where(i int, c *outbox.Change, err error) error
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
			if p.tx != nil {
				if b, ok := p.tx.end(c); ok {
					if err := p.produceTx(ctx, i, c, b); err != nil {
						return err
					}
				}
			}
			p.meter.commit()
			p.ledger.Boundary(c)
		case outbox.KindHeartbeat:
			p.meter.heartbeat()
			if p.historic && p.pipe.cfg.HeartbeatTopic != "" {
				if err := p.heartbeat(ctx, i, c); err != nil {
					return err
				}
				continue
			}
			p.ledger.Boundary(c)
		}
	}
	return nil
}

// row takes one row from its binding to the sink.
func (p *publisher) row(ctx context.Context, i int, c *outbox.Change) error {
	bd, ok := p.bindings[c.Relation]
	if !ok {
		if err := p.pipe.learn(ctx, c.Relation); err != nil {
			return err
		}
		bd = p.bind(c.Relation)
	}
	b := bd.b
	if bd.err != nil {
		if !p.historic || p.dl == nil {
			return bd.err
		}
		b = bd.raw
	}
	if c.Op == schema.OpUpdate && bd.err == nil && p.pipe.cfg.SkipUnchanged && c.OldFull && c.Unchanged == nil &&
		p.pipe.enc.SameRow(b, p.pipe.enc.MapValues(b, c.Old), p.pipe.enc.MapValues(b, c.Values)) {
		p.pipe.stats.Filtered.Add(1)
		return nil // skip.messages.without.change
	}
	if c.Op == schema.OpUpdate && bd.err == nil && p.pipe.enc.KeyChanged(b, c.Old, c.Values) {
		// Debezium writes an update that moves its row to another key
		// as a delete of the old key (and its tombstone) and a create of
		// the new one.
		del, ins := *c, *c
		del.Op, del.Values, del.Moved = schema.OpDelete, c.Old, c.Values
		ins.Op, ins.Moved = schema.OpInsert, c.Old // Old kept: no INSERT wrote it (Change.Inserted)
		if err := p.row(ctx, i, &del); err != nil {
			return err
		}
		return p.row(ctx, i, &ins)
	}
	if p.pipe.skipped[c.Op] && c.Snapshot == 0 {
		return nil // skipped.operations: no event, not counted in its transaction
	}
	var block schema.TxBlock
	if p.tx != nil {
		block = p.tx.row(c)
	}
	if p.ledger.Skip(c) {
		return nil
	}
	if p.tx != nil {
		if tb, ok := p.tx.begin(c); ok {
			if err := p.produceTx(ctx, i, c, tb); err != nil {
				return err
			}
		}
	}
	rec, err := p.prepare(ctx, b, c, block, bd.err)
	if err != nil {
		return p.ledger.Where(i, c, err)
	}
	e := p.ledger.Produce(i, c)
	if rec == nil {
		// A transform dropped it (Kafka Connect's Filter): there is
		// nothing to produce, and it is done.
		p.pipe.stats.Filtered.Add(1)
		p.ledger.Ack(e, nil)
		return nil
	}
	a := p.meter.row(rec.Topic, c.Relation, c.CommitTime)
	values := c.Values
	if err := p.sink.Produce(p.recordCtx, rec, func(rec *kgo.Record, err error) {
		p.acked(b, values, a, e, rec, err)
	}); err != nil {
		err = p.ledger.Where(i, c, err)
		p.ledger.Ack(e, err)
		return err
	}
	if c.Op == schema.OpDelete && !p.pipe.cfg.NoTombstones && bd.err == nil {
		return p.tombstone(ctx, i, b, c, block)
	}
	return nil
}

// tombstone produces the tombstone that follows a delete's change event
// (Debezium's tombstones.on.delete) into the ledger, at the delete.
func (p *publisher) tombstone(ctx context.Context, i int, b *schema.Binding, c *outbox.Change, block schema.TxBlock) error {
	rec, err := p.pipe.tombstoneIn(ctx, b, c, block)
	if err != nil {
		return p.ledger.Where(i, c, err)
	}
	if rec == nil {
		return nil // a transform dropped it
	}
	if p.eventIDs {
		rec.Context = outbox.WithEventID(rec.Context, p.eventID(b, c, "tombstone"))
	}
	return p.produceExtra(i, c, c, rec, "tombstone of "+b.RawID(c.Values))
}

// produceExtra produces rec, a record besides the rows' own (a
// transaction's BEGIN or END, a delete's tombstone, a heartbeat), into the
// ledger as entry (the change c, or what a heartbeat stands for) at the
// batch's change c; id names it when it fails.
func (p *publisher) produceExtra(i int, c, entry *outbox.Change, rec *kgo.Record, id string) error {
	e := p.ledger.Produce(i, entry)
	pp := p.pipe
	if err := p.sink.Produce(p.recordCtx, rec, func(rec *kgo.Record, err error) {
		if err == nil {
			pp.stats.Published.Add(1)
			p.broker.recordAcked(pp.log, rec.Topic)
		} else {
			err = p.broker.recordFailed(pp.log, rec.Topic, id, err)
		}
		p.ledger.Ack(e, err)
	}); err != nil {
		err = p.ledger.Where(i, c, err)
		p.ledger.Ack(e, err)
		return err
	}
	return nil
}

// eventID is the id a sink that deduplicates by it gets for c's record
// (of names a record besides the row's own: "tombstone"). An outbox
// row's is its event id. A change event's row has no id of its own (the
// key is the row's, which its updates and deletes share, and which an
// insert takes again after a delete): a streamed change is named by its
// transaction's commit LSN and place in it, a snapshot read by its table
// and id column, or none (the sink gives it one) where it has none.
func (p *publisher) eventID(b *schema.Binding, c *outbox.Change, of string) string {
	if p.pipe.cfg.Encoder.Format != schema.Debezium {
		return b.RawID(c.Values)
	}
	if of == "" {
		of = [...]string{schema.OpInsert: "c", schema.OpUpdate: "u", schema.OpDelete: "d", schema.OpTruncate: "t"}[c.Op]
	}
	if c.Snapshot != 0 || c.FinalLSN == 0 {
		id := b.RawID(c.Values)
		if id == "" {
			return ""
		}
		return "r/" + c.Relation.Schema + "." + c.Relation.Name + "/" + id
	}
	return c.FinalLSN.String() + "/" + strconv.FormatUint(uint64(c.Ordinal), 10) + "/" + of
}

// bind binds rel's columns, once: row looks the binding up first.
func (p *publisher) bind(rel *outbox.Relation) binding {
	var bd binding
	b, err := p.cols.BindTable(rel.Schema, rel.Name, p.pipe.enc.MapColumns(rel.Schema, rel.Name, rel.Columns))
	if err != nil {
		bd.err = fmt.Errorf("table %s.%s: %w", rel.Schema, rel.Name, err)
		if p.historic {
			bd.err, bd.raw = &shapeError{rel: rel, err: err}, p.cols.BindAny(p.pipe.enc.MapColumns(rel.Schema, rel.Name, rel.Columns))
		}
	}
	bd.b = b
	p.bindings[rel] = bd
	return bd
}

// prepare turns a row into the record to produce: its event, or, under
// the dead-letter policy, the dead letter that replaces a poison row or an
// event held behind one; nil when a transform dropped the event. block is
// the row's transaction block (zero without transaction metadata). unbound
// is why the row's relation has no binding (b reads only the id and the
// aggregate id then): the row is poison.
func (p *publisher) prepare(ctx context.Context, b *schema.Binding, c *outbox.Change, block schema.TxBlock, unbound error) (*kgo.Record, error) {
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
		if rec, err = p.pipe.recordIn(ctx, b, c, block); err == nil && rec != nil {
			if p.eventIDs {
				rec.Context = outbox.WithEventID(rec.Context, p.eventID(b, c, ""))
			}
			if p.pipe.refused.active() {
				err = p.pipe.refused.check(b.RawID(c.Values), rec.Topic)
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
	rec, err = p.dl.add(ctx, p.sink, b, c, err)
	if err == nil && p.eventIDs {
		rec.Context = outbox.WithEventID(rec.Context, DeadLetterIDPrefix+b.RawID(c.Values))
	}
	return rec, err
}

// acked is a record's promise: it counts the ack or the failure, clears or
// records a Kafka problem, notes refusals (stopping what is buffered after
// the first), and hands the outcome to the ledger.
func (p *publisher) acked(b *schema.Binding, values [][]byte, a ack, e flow.Entry, rec *kgo.Record, err error) {
	a.done(err)
	pp := p.pipe
	if err == nil {
		pp.stats.Published.Add(1)
		pp.stats.LastPublish.Store(time.Now().UnixNano())
		p.broker.recordAcked(pp.log, rec.Topic)
		if pp.refused.active() {
			pp.refused.acked(b.RawID(values), rec)
		}
	} else {
		if pp.refused.failed(b.RawID(values), rec, err) {
			p.sink.AbortBuffered()
		}
		err = p.broker.recordFailed(pp.log, rec.Topic, b.RawID(values), err)
	}
	p.ledger.Ack(e, err)
}

// batch produces one poll's rows in order with its own ledger. It returns
// the ledger, whose wait group ends when every produced row is acked or
// failed; the caller waits, then marks the acked rows published.
func (p *publisher) batch(ctx, recordCtx context.Context, rows []poll.Row) *flow.PollLedger {
	led := flow.NewPollLedger(rows)
	p.ledger, p.recordCtx = led, recordCtx
	changes := make([]outbox.Change, len(rows))
	for i := range rows {
		changes[i] = rows[i].Change
	}
	if err := p.publish(ctx, changes); err != nil {
		led.Fail(err)
	}
	p.meter.commit()
	return led
}
