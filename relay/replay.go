package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/store"
)

// Replay publishes the pipeline's open dead letters in the order they were
// recorded, aggregate by aggregate as they came. Each row is read again
// from the outbox table, so a row fixed there is published fixed; a row no
// longer in the table is published from the copy kept with the dead
// letter. An entry that still cannot be published stops the replay there,
// so nothing of its aggregate overtakes it. It returns how many were
// published.
//
// Under exactly-once delivery each dead letter is published in a Kafka
// transaction of its own, with a position record that names it (key
// "<slot>:dlq-replay" on the position topic), and marked replayed after
// the commit. The replay's transactional id is its own, so that it never
// fences the running relay; a second replay fences the first. On start,
// the dead letter the last committed replay transaction names is marked
// replayed before anything is read, so a crash between a commit and its
// mark does not publish it again.
func Replay(ctx context.Context, cfg Config, log *slog.Logger) (int, error) {
	p, err := newPipeline(cfg, log, NewMetrics(nil), new(Stats))
	if err != nil {
		return 0, err
	}
	conn, err := replication.Connect(ctx, p.cfg.Replication.DatabaseURL)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if err := p.readZone(ctx, conn); err != nil { // as run reads the time column
		return 0, err
	}
	open, err := p.own().DeadLetters(ctx, conn, false)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	txn := p.cfg.Delivery == ExactlyOnce
	var use SinkUse
	if txn {
		use = SinkUse{TransactionalID: replayTransactionalID(p.cfg.Replication.Slot), PositionTopic: p.cfg.PositionTopic}
	}
	k, err := p.open(use)
	if err != nil {
		return 0, err
	}
	defer k.Close()
	if err := k.Ping(ctx); err != nil {
		return 0, err
	}
	if txn {
		if err := p.replayRecover(ctx, k, conn, open); err != nil {
			return 0, err
		}
		if open, err = p.own().DeadLetters(ctx, conn, false); err != nil {
			return 0, err
		}
	}
	done := 0
	for _, d := range open {
		rec, err := p.replayRecord(ctx, conn, d)
		if err == nil && rec != nil {
			err = k.Fits(ctx, rec)
		}
		if err != nil {
			return done, fmt.Errorf("dead letter %d (event %s) still cannot be published: %w", d.ID, d.EventID, err)
		}
		if rec != nil && k.EventIDs {
			rec.Context = outbox.WithEventID(rec.Context, d.EventID)
		}
		switch {
		case rec == nil:
			// A transform drops the event: there is nothing to publish.
		case txn:
			if err := p.replayTxn(ctx, k, rec, d.ID); err != nil {
				return done, fmt.Errorf("dead letter %d: %w", d.ID, err)
			}
		default:
			acked := make(chan error, 1)
			if err := k.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked <- err }); err != nil {
				return done, err
			}
			if err := <-acked; err != nil {
				return done, fmt.Errorf("dead letter %d: %w", d.ID, err)
			}
		}
		if err := p.own().MarkReplayed(ctx, conn, d.ID); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// replayRecord builds the record for a dead letter from the row as it is
// now in the outbox table, or from the copy kept with the dead letter;
// nil when a transform drops it.
func (p *pipeline) replayRecord(ctx context.Context, conn *pgx.Conn, d store.DeadLetter) (*kgo.Record, error) {
	idCol := p.cfg.Columns.ID
	if idCol == "" {
		idCol = schema.DefaultColumns().ID
	}
	// The row's own table, of a pipeline of several; the pipeline's when
	// the dead letter does not name one of them.
	table := p.tables[0].name
	for _, t := range p.tables {
		if t.name.String() == d.Table {
			table = t.name
		}
	}
	res := conn.PgConn().ExecParams(ctx, fmt.Sprintf("SELECT * FROM %s WHERE %s::text = $1", table.Quoted(), pgx.Identifier{idCol}.Sanitize()),
		[][]byte{[]byte(d.EventID)}, nil, nil, nil)
	rel := &outbox.Relation{Schema: table.Schema, Name: table.Name}
	for _, f := range res.FieldDescriptions() {
		rel.Columns = append(rel.Columns, schema.Column{Name: f.Name, TypeOID: f.DataTypeOID, TypMod: f.TypeModifier})
	}
	var values [][]byte
	for res.NextRow() {
		for _, v := range res.Values() {
			if v == nil {
				values = append(values, nil)
			} else {
				values = append(values, append([]byte{}, v...))
			}
		}
	}
	if _, err := res.Close(); err != nil {
		return nil, fmt.Errorf("read event %s: %w", d.EventID, err)
	}
	if values == nil { // the row is gone: use the copy
		var stored map[string]*string
		raw, err := p.own().DeadLetterRow(ctx, conn, d.ID)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &stored); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(stored))
		for n := range stored {
			names = append(names, n)
		}
		sort.Strings(names)
		rel.Columns = rel.Columns[:0]
		for _, n := range names {
			rel.Columns = append(rel.Columns, schema.Column{Name: n, TypMod: -1}) // types unknown: text, checked as such
			if v := stored[n]; v != nil {
				values = append(values, []byte(*v))
			} else {
				values = append(values, nil)
			}
		}
	}
	b, err := p.cfg.Columns.Bind(rel.Columns)
	if err != nil {
		return nil, err
	}
	c := outbox.Change{Kind: outbox.KindRow, Relation: rel, Values: values, CommitTime: time.Now()}
	return p.record(ctx, b, &c)
}

// replayTransactionalID is dlq replay's transactional id under exactly-once
// delivery.
func replayTransactionalID(slot string) string { return transactionalID(slot) + ".dlq-replay" }

// replayKey keys dlq replay's position records; a slot name has no colon.
func (p *pipeline) replayKey() []byte { return []byte(p.cfg.Replication.Slot + ":dlq-replay") }

// replayPosition is the value of a replay's position record.
type replayPosition struct {
	Pipeline   string    `json:"pipeline"`
	DeadLetter int64     `json:"dead_letter"`
	Time       time.Time `json:"time"`
}

// replayRecover fences an earlier replay of the pipeline (aborting what it
// left open) and marks replayed the dead letter its last committed Kafka
// transaction carried, if it is still open.
func (p *pipeline) replayRecover(ctx context.Context, k Broker, conn *pgx.Conn, open []store.DeadLetter) error {
	if err := k.Txn.Fence(ctx); err != nil {
		return err
	}
	if err := k.Positions.EnsureCompactedTopic(ctx, p.cfg.PositionTopic); err != nil {
		return err
	}
	rec, err := k.Positions.LastCommitted(ctx, p.cfg.PositionTopic, p.replayKey())
	if err != nil || rec == nil {
		return err
	}
	var v replayPosition
	if err := json.Unmarshal(rec.Value, &v); err != nil {
		return fmt.Errorf("replay position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
	}
	for _, d := range open {
		if d.ID == v.DeadLetter {
			p.log.Info("exactly-once delivery: the dead letter the last replay committed to kafka is marked replayed", "dead_letter", d.ID, "event", d.EventID)
			return p.own().MarkReplayed(ctx, conn, d.ID)
		}
	}
	return nil
}

// replayTxn publishes one replayed event and the position record that
// names its dead letter in one Kafka transaction.
func (p *pipeline) replayTxn(ctx context.Context, k Broker, rec *kgo.Record, id int64) error {
	b, err := json.Marshal(replayPosition{Pipeline: p.cfg.Replication.Slot, DeadLetter: id, Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	pos := &kgo.Record{Topic: p.cfg.PositionTopic, Key: p.replayKey(), Value: b}
	if err := k.Txn.Begin(); err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		errs [2]error
	)
	for i, rec := range []*kgo.Record{rec, pos} {
		wg.Add(1)
		if err := k.Produce(ctx, rec, func(_ *kgo.Record, err error) { errs[i] = err; wg.Done() }); err != nil {
			wg.Done()
			return fmt.Errorf("kafka: %w", err)
		}
	}
	return k.Txn.Commit(ctx, func() error {
		wg.Wait()
		if err := errors.Join(errs[0], errs[1]); err != nil {
			return fmt.Errorf("kafka: %w", k.Txn.Classify(err))
		}
		return nil
	})
}
