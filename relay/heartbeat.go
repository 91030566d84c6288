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

// Heartbeat records, as Debezium writes them with heartbeat.interval.ms
// above 0: each heartbeat pgoutbox reads back from the WAL while it
// streams (its own logical message, written every --heartbeat-interval)
// gives a record on the heartbeat topic, keyed by topic.prefix, whose
// ts_ms is the time pgoutbox read the heartbeat back, as Debezium's is the
// time its streaming loop emits it. Snapshots write none, as Debezium's
// write none. The record passes the transforms after the router and the
// converters as Debezium's does, and goes through the ledger as a
// transaction of its own at the heartbeat's position: the slot is
// confirmed past the heartbeat only once its record and everything
// before it are acked, and under exactly-once delivery the record is in
// the Kafka transaction.

// heartbeatValidate checks the heartbeat records' settings.
func (c Config) heartbeatValidate() error {
	if c.HeartbeatTopic == "" {
		return nil
	}
	if c.Encoder.Format != schema.Debezium && c.Encoder.Format != schema.DebeziumOutbox {
		return fmt.Errorf("heartbeat records (--heartbeat-topic, heartbeat.interval.ms) are Debezium's: --format debezium or debezium-outbox, not %s", c.Encoder.Format)
	}
	if err := (router.Config{Topic: c.HeartbeatTopic}).Validate(); err != nil {
		return fmt.Errorf("heartbeat topic %q is not a valid topic name", c.HeartbeatTopic)
	}
	if chain, _ := transform.New(c.Transforms); chain.BeforeRouter() {
		return errors.New("heartbeat records (heartbeat.interval.ms above 0) with a transform before the Outbox Event Router are not supported: Kafka Connect runs it on the heartbeat records too")
	}
	return nil
}

// heartbeat produces the heartbeat c's record into the ledger and closes
// its position. A heartbeat another pgoutbox wrote (its content names its
// slot) only marks the position.
func (p *publisher) heartbeat(ctx context.Context, i int, c *outbox.Change) error {
	if len(c.Values) == 1 && string(c.Values[0]) != p.pipe.cfg.Replication.Slot {
		p.ledger.Boundary(c)
		return nil
	}
	// A non-transactional message's row and its commit, as the decoder
	// makes them (replication/decode.go): a replay of what Kafka has
	// (exactly-once) is skipped.
	row := &outbox.Change{Kind: outbox.KindRow, LSN: c.LSN, FinalLSN: c.LSN - 1, Relation: &outbox.Relation{}}
	commit := &outbox.Change{Kind: outbox.KindCommit, LSN: c.LSN, FinalLSN: c.LSN - 1}
	if p.ledger.Skip(row) {
		p.ledger.Boundary(commit)
		return nil
	}
	hb := schema.Heartbeat{ServerName: p.pipe.enc.Debezium().TopicPrefix, Time: time.Now()}
	rec, err := p.pipe.heartbeatRecord(ctx, p.pipe.cfg.HeartbeatTopic, hb)
	if err != nil {
		return p.ledger.Where(i, c, err)
	}
	if rec != nil {
		if err := p.produceExtra(i, c, row, rec, "heartbeat at "+c.LSN.String()); err != nil {
			return err
		}
	}
	p.ledger.Boundary(commit)
	return nil
}

// heartbeatRecord is the Kafka record of hb on topic (ownRecord); nil
// when a transform dropped it.
func (p *pipeline) heartbeatRecord(ctx context.Context, topic string, hb schema.Heartbeat) (*kgo.Record, error) {
	return p.ownRecord(ctx, topic, hb.Message(), "heartbeat record", "heartbeat")
}
