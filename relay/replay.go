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
	p, err := newPipeline(cfg, log, hooks(cfg.Hooks), newReadiness(sinkName(cfg.Sink)), new(Stats))
	if err != nil {
		return 0, err
	}
	conn, err := p.cfg.Replication.Connect(ctx)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	cols, err := inServerZone(ctx, conn, p.cfg.Columns, log) // as run reads the time column
	if err != nil {
		return 0, err
	}
	open, err := p.own().DeadLetters(ctx, conn, false)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	txn := p.cfg.Delivery == ExactlyOnce
	var use SinkUse
	if txn {
		use = SinkUse{TransactionalID: replayTransactionalID(p.cfg.Replication.Slot), PositionTopic: p.cfg.Transactions.PositionTopic}
	}
	k, err := p.open(use)
	if err != nil {
		return 0, err
	}
	defer k.Close()
	if err := k.Ping(ctx); err != nil {
		return 0, err
	}
	r := &replayer{p: p, k: k, conn: conn, cols: cols}
	if txn {
		if err := r.recover(ctx, open); err != nil {
			return 0, err
		}
		if open, err = p.own().DeadLetters(ctx, conn, false); err != nil {
			return 0, err
		}
	}
	done := 0
	for _, d := range open {
		if err := r.replay(ctx, d, txn); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// replayer is one dlq replay: the pipeline's broker, the connection the
// dead letters and the rows are read on, and the columns it binds.
type replayer struct {
	p    *pipeline
	k    Broker
	conn *pgx.Conn
	cols schema.Columns
}

// replay publishes dead letter d (in a Kafka transaction of its own, with
// txn) and marks it replayed.
func (r *replayer) replay(ctx context.Context, d store.DeadLetter, txn bool) error {
	k := r.k
	rec, err := r.record(ctx, d)
	if err == nil && rec != nil {
		err = k.Fits(ctx, rec)
	}
	if err != nil {
		return fmt.Errorf("dead letter %d (event %s) still cannot be published: %w", d.ID, d.EventID, err)
	}
	if rec != nil && k.EventIDs {
		rec.Context = outbox.WithEventID(rec.Context, d.EventID)
	}
	switch {
	case rec == nil:
		// A transform drops the event: there is nothing to publish.
	case txn:
		if err := r.txn(ctx, rec, d.ID); err != nil {
			return fmt.Errorf("dead letter %d: %w", d.ID, err)
		}
	default:
		acked := make(chan error, 1)
		if err := k.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked <- err }); err != nil {
			return err
		}
		if err := <-acked; err != nil {
			return fmt.Errorf("dead letter %d: %w", d.ID, err)
		}
	}
	return r.p.own().MarkReplayed(ctx, r.conn, d.ID)
}

// record builds the record for a dead letter from the row as it is now in
// the outbox table, or from the copy kept with the dead letter; nil when a
// transform drops it.
func (r *replayer) record(ctx context.Context, d store.DeadLetter) (*kgo.Record, error) {
	p, conn := r.p, r.conn
	idCol := r.cols.ID
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
		var err error
		if rel.Columns, values, err = r.kept(ctx, d); err != nil {
			return nil, err
		}
	}
	b, err := r.cols.BindTable(rel.Schema, rel.Name, p.enc.MapColumns(rel.Schema, rel.Name, rel.Columns))
	if err != nil {
		return nil, err
	}
	c := outbox.Change{Kind: outbox.KindRow, Relation: rel, Values: values, CommitTime: time.Now()}
	return p.record(ctx, b, &c)
}

// kept is the copy of the row kept with dead letter d: its columns, by
// name, and their values, as text.
func (r *replayer) kept(ctx context.Context, d store.DeadLetter) ([]schema.Column, [][]byte, error) {
	var stored map[string]*string
	raw, err := r.p.own().DeadLetterRow(ctx, r.conn, d.ID)
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(stored))
	for n := range stored {
		names = append(names, n)
	}
	sort.Strings(names)
	var (
		cols   []schema.Column
		values [][]byte
	)
	for _, n := range names {
		cols = append(cols, schema.Column{Name: n, TypMod: -1}) // types unknown: text, checked as such
		if v := stored[n]; v != nil {
			values = append(values, []byte(*v))
		} else {
			values = append(values, nil)
		}
	}
	return cols, values, nil
}

// replayTransactionalID is dlq replay's transactional id under exactly-once
// delivery.
func replayTransactionalID(slot string) string { return transactionalID(slot) + ".dlq-replay" }

// key keys dlq replay's position records; a slot name has no colon.
func (r *replayer) key() []byte { return []byte(r.p.cfg.Replication.Slot + ":dlq-replay") }

// replayPosition is the value of a replay's position record.
type replayPosition struct {
	Pipeline   string    `json:"pipeline"`
	DeadLetter int64     `json:"dead_letter"`
	Time       time.Time `json:"time"`
}

// recover fences an earlier replay of the pipeline (aborting what it left
// open) and marks replayed the dead letter its last committed Kafka
// transaction carried, if it is still open.
func (r *replayer) recover(ctx context.Context, open []store.DeadLetter) error {
	k, topic := r.k, r.p.cfg.Transactions.PositionTopic
	if err := k.Txn.Fence(ctx); err != nil {
		return err
	}
	if err := k.Positions.EnsureCompactedTopic(ctx, topic); err != nil {
		return err
	}
	rec, err := k.Positions.LastCommitted(ctx, topic, r.key())
	if err != nil || rec == nil {
		return err
	}
	var v replayPosition
	if err := json.Unmarshal(rec.Value, &v); err != nil {
		return fmt.Errorf("replay position record at offset %d of %s: %w", rec.Offset, rec.Topic, err)
	}
	for _, d := range open {
		if d.ID == v.DeadLetter {
			r.p.log.Info("exactly-once delivery: the dead letter the last replay committed to kafka is marked replayed", "dead_letter", d.ID, "event", d.EventID)
			return r.p.own().MarkReplayed(ctx, r.conn, d.ID)
		}
	}
	return nil
}

// txn publishes one replayed event and the position record that names its
// dead letter in one Kafka transaction.
func (r *replayer) txn(ctx context.Context, rec *kgo.Record, id int64) error {
	k := r.k
	b, err := json.Marshal(replayPosition{Pipeline: r.p.cfg.Replication.Slot, DeadLetter: id, Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	pos := &kgo.Record{Topic: r.p.cfg.Transactions.PositionTopic, Key: r.key(), Value: b}
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
