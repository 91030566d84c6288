package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/transform"
)

// Transaction metadata, as Debezium's provide.transaction.metadata writes
// it: each transaction of the stream that has events gets a BEGIN record
// before its first event and an END record after its last, on the
// transaction topic, and each of its change events a transaction block.
// The records go through the publisher's ledger like the events: a
// transaction's commit is confirmed only once its END and everything
// before it are acked, and under exactly-once delivery they are in the
// Kafka transaction of its events. Rows the ledger skips (a replay of what
// Kafka has) are counted, so that the orders stay the transaction's, but a
// transaction none of whose rows is produced gets neither record again.
// Snapshot rows have no transaction: Debezium gives them no block either.

// txMeta follows the transaction the stream is in; the publisher's
// goroutine only.
type txMeta struct {
	topic string
	// open: a row of the transaction was read; begun: its BEGIN was
	// produced.
	open, begun bool
	xid         uint32
	first       uint64 // the position of its first row: BEGIN's
	total       int64
	counts      []schema.TxCount // in the order their tables came
	// capacity is the size of Debezium's per-table map, which only grows
	// (schema.OrderTxCounts).
	capacity int
}

// txMetaValidate checks the transaction metadata's settings.
func (c Config) txMetaValidate() error {
	if c.TransactionTopic == "" {
		return nil
	}
	if c.Mode != ModeWAL {
		return fmt.Errorf("transaction metadata (provide.transaction.metadata) needs --mode wal, not %s: only the WAL knows transactions, polling reads rows", c.Mode)
	}
	if c.Encoder.Format != schema.Debezium && c.Encoder.Format != schema.DebeziumOutbox {
		return fmt.Errorf("transaction metadata (provide.transaction.metadata) is Debezium's: --format debezium or debezium-outbox, not %s", c.Encoder.Format)
	}
	if err := (router.Config{Topic: c.TransactionTopic}).Validate(); err != nil {
		return fmt.Errorf("transaction topic %q is not a valid topic name", c.TransactionTopic)
	}
	if chain, _ := transform.New(c.Transforms); chain.BeforeRouter() {
		return errors.New("transaction metadata (provide.transaction.metadata) with a transform before the Outbox Event Router is not supported: Kafka Connect runs it on the transaction records too")
	}
	return nil
}

// row counts a row of the stream into its transaction and returns its
// block.
func (t *txMeta) row(c *outbox.Change) schema.TxBlock {
	if !t.open || t.xid != c.XID {
		t.open, t.begun, t.xid, t.first, t.total, t.counts = true, false, c.XID, uint64(c.LSN), 0, t.counts[:0]
	}
	name := c.Relation.Schema + "." + c.Relation.Name
	t.total++
	var n int64 = 1
	found := false
	for i := range t.counts {
		if t.counts[i].Collection == name {
			t.counts[i].Events++
			n, found = t.counts[i].Events, true
			break
		}
	}
	if !found {
		t.counts = append(t.counts, schema.TxCount{Collection: name, Events: 1})
	}
	return schema.TxBlock{ID: schema.TxID(c.XID, uint64(c.LSN)), TotalOrder: t.total, CollectionOrder: n}
}

// begin is the BEGIN record due before the row c is produced, if its
// transaction has none yet.
func (t *txMeta) begin(c *outbox.Change) (schema.TxBoundary, bool) {
	if !t.open || t.begun {
		return schema.TxBoundary{}, false
	}
	t.begun = true
	return schema.TxBoundary{ID: schema.TxID(t.xid, t.first), Time: c.CommitTime}, true
}

// end is the END record due at the commit c, if its transaction's BEGIN
// was produced; the transaction is over either way.
func (t *txMeta) end(c *outbox.Change) (schema.TxBoundary, bool) {
	begun := t.open && t.begun && t.xid == c.XID
	t.open, t.begun = false, false
	if !begun {
		return schema.TxBoundary{}, false
	}
	var counts []schema.TxCount
	counts, t.capacity = schema.OrderTxCounts(t.counts, t.capacity)
	return schema.TxBoundary{End: true, ID: schema.TxID(c.XID, uint64(c.LSN)), Time: c.CommitTime,
		Events: t.total, Collections: counts}, true
}

// produceTx produces a BEGIN or END record into the ledger, at the change
// c (the row it precedes, or the commit).
func (p *publisher) produceTx(ctx context.Context, i int, c *outbox.Change, b schema.TxBoundary) error {
	rec, err := p.pipe.txRecord(ctx, p.tx.topic, b)
	if err != nil {
		return p.ledger.Where(i, c, err)
	}
	if rec == nil {
		// A transform dropped it.
		return nil
	}
	return p.produceExtra(i, c, c, rec, "transaction "+b.ID)
}

// txRecord is the Kafka record of b on topic (ownRecord); nil when a
// transform dropped it.
func (p *pipeline) txRecord(ctx context.Context, topic string, b schema.TxBoundary) (*kgo.Record, error) {
	return p.ownRecord(ctx, topic, b.Message(), "transaction record "+b.ID, b.ID)
}

// ownRecord is the Kafka record of msg, which pgoutbox writes besides the
// events (transaction metadata, heartbeats), on topic: the router passes
// it as it is (it is no change event), Kafka Connect's transforms after
// it run on it, and the configured converters write it. what names it in
// errors, id where it waits for a registry. nil when a transform dropped
// it.
func (p *pipeline) ownRecord(ctx context.Context, topic string, msg schema.Message, what, id string) (*kgo.Record, error) {
	r, err := p.chain.Read(topic, &msg, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	keep, err := p.chain.Apply(&r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !keep {
		return nil, nil
	}
	if err := router.CheckTopic(r.Topic); err != nil {
		return nil, fmt.Errorf("%s: %w", what, &transform.DataError{Reason: "after the transforms, " + err.Error()})
	}
	convs := p.convs
	if !p.connect {
		d := p.enc.Debezium()
		convs = transform.Converters{Key: d.Key, Value: d.Value, Header: d.Header}
	}
	out, err := r.Message(convs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	kr := kafkaRecord(r.Topic, out)
	if out.KeySchema != "" || out.ValueSchema != "" || out.FinishValue != nil {
		if err := p.frameOrWait(ctx, kr, &out, id); err != nil {
			return nil, err
		}
	}
	return kr, nil
}
