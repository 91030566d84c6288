package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/store"
)

// Replay publishes the pipeline's open dead letters in the order they were
// recorded, aggregate by aggregate as they came. Each row is read again
// from the outbox table, so a row fixed there is published fixed; a row no
// longer in the table is published from the copy kept with the dead
// letter. An entry that still cannot be published stops the replay there,
// so nothing of its aggregate overtakes it. It returns how many were
// published.
func Replay(ctx context.Context, cfg Config, log *slog.Logger) (int, error) {
	r, err := New(cfg, log)
	if err != nil {
		return 0, err
	}
	conn, err := replication.Connect(ctx, r.cfg.Replication.DatabaseURL)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	open, err := r.own().DeadLetters(ctx, conn, false)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	k, err := sink.New(r.cfg.Sink, log)
	if err != nil {
		return 0, err
	}
	defer k.Close()
	if err := k.Ping(ctx); err != nil {
		return 0, err
	}
	done := 0
	for _, d := range open {
		rec, err := r.replayRecord(ctx, conn, d)
		if err == nil {
			err = k.Fits(ctx, rec)
		}
		if err != nil {
			return done, fmt.Errorf("dead letter %d (event %s) still cannot be published: %w", d.ID, d.EventID, err)
		}
		acked := make(chan error, 1)
		if err := k.Produce(ctx, rec, func(_ *kgo.Record, err error) { acked <- err }); err != nil {
			return done, err
		}
		if err := <-acked; err != nil {
			return done, fmt.Errorf("dead letter %d: kafka: %w", d.ID, err)
		}
		if err := r.own().MarkReplayed(ctx, conn, d.ID); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// replayRecord builds the record for a dead letter from the row as it is
// now in the outbox table, or from the copy kept with the dead letter.
func (r *Relay) replayRecord(ctx context.Context, conn *pgx.Conn, d store.DeadLetter) (*kgo.Record, error) {
	idCol := r.cfg.Columns.ID
	if idCol == "" {
		idCol = schema.DefaultColumns().ID
	}
	// The row's own table, of a pipeline of several; the pipeline's when
	// the dead letter does not name one of them.
	table := r.table
	for _, t := range r.tables {
		if t.String() == d.Table {
			table = t
		}
	}
	res := conn.PgConn().ExecParams(ctx, fmt.Sprintf("SELECT * FROM %s WHERE %s::text = $1", table.Quoted(), pgx.Identifier{idCol}.Sanitize()),
		[][]byte{[]byte(d.EventID)}, nil, nil, nil)
	rel := &replication.Relation{Schema: table.Schema, Name: table.Name}
	for _, f := range res.FieldDescriptions() {
		rel.Columns = append(rel.Columns, schema.Column{Name: f.Name, TypeOID: f.DataTypeOID})
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
		raw, err := r.own().DeadLetterRow(ctx, conn, d.ID)
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
			rel.Columns = append(rel.Columns, schema.Column{Name: n}) // types unknown: text, checked as such
			if v := stored[n]; v != nil {
				values = append(values, []byte(*v))
			} else {
				values = append(values, nil)
			}
		}
	}
	b, err := r.cfg.Columns.Bind(rel.Columns)
	if err != nil {
		return nil, err
	}
	c := replication.Change{Kind: replication.KindRow, Relation: rel, Values: values, CommitTime: time.Now()}
	return r.record(b, &c)
}
