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
)

// DeadLetter is one entry of pgoutbox_dead_letter.
type DeadLetter struct {
	ID          int64      `json:"id"`
	EventID     string     `json:"event_id"`
	AggregateID string     `json:"aggregate_id"`
	LSN         string     `json:"lsn,omitempty"`
	Reason      string     `json:"reason"`
	CreatedAt   time.Time  `json:"created_at"`
	ReplayedAt  *time.Time `json:"replayed_at,omitempty"`
	Resolution  string     `json:"resolution,omitempty"`
}

// ListDeadLetters returns the pipeline's dead letters, oldest first; with
// all, those already replayed or skipped too.
func ListDeadLetters(ctx context.Context, conn *pgx.Conn, pipeline string, all bool) ([]DeadLetter, error) {
	rows, err := conn.Query(ctx, `SELECT id, coalesce(event_id, ''), aggregate_id, coalesce(lsn::text, ''), reason, created_at, replayed_at, coalesce(resolution, '')
FROM pgoutbox_dead_letter WHERE pipeline = $1 AND ($2 OR replayed_at IS NULL) ORDER BY id`, pipeline, all)
	if err != nil {
		if isUndefinedTable(err) {
			return nil, fmt.Errorf("%w (pgoutbox_dead_letter): run pgoutbox migrate", ErrNoState)
		}
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		err := row.Scan(&d.ID, &d.EventID, &d.AggregateID, &d.LSN, &d.Reason, &d.CreatedAt, &d.ReplayedAt, &d.Resolution)
		return d, err
	})
}

// SkipDeadLetter resolves a dead letter without publishing it: an explicit
// decision, recorded as such, that releases its aggregate once no earlier
// entry of it is open.
func SkipDeadLetter(ctx context.Context, conn *pgx.Conn, pipeline string, id int64) error {
	tag, err := conn.Exec(ctx, `UPDATE pgoutbox_dead_letter SET replayed_at = now(), resolution = 'skipped'
WHERE pipeline = $1 AND id = $2 AND replayed_at IS NULL`, pipeline, id)
	if err != nil {
		return fmt.Errorf("skip dead letter: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("no open dead letter %d in pipeline %s", id, pipeline)
	}
	return nil
}

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
	open, err := ListDeadLetters(ctx, conn, r.cfg.Replication.Slot, false)
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
		if _, err := conn.Exec(ctx, "UPDATE pgoutbox_dead_letter SET replayed_at = now(), resolution = 'replayed' WHERE id = $1", d.ID); err != nil {
			return done, fmt.Errorf("mark dead letter %d replayed: %w", d.ID, err)
		}
		done++
	}
	return done, nil
}

// replayRecord builds the record for a dead letter from the row as it is
// now in the outbox table, or from the copy kept with the dead letter.
func (r *Relay) replayRecord(ctx context.Context, conn *pgx.Conn, d DeadLetter) (*kgo.Record, error) {
	idCol := r.cfg.Columns.ID
	if idCol == "" {
		idCol = schema.DefaultColumns().ID
	}
	res := conn.PgConn().ExecParams(ctx, fmt.Sprintf("SELECT * FROM %s WHERE %s::text = $1", r.table.Quoted(), pgx.Identifier{idCol}.Sanitize()),
		[][]byte{[]byte(d.EventID)}, nil, nil, nil)
	rel := &replication.Relation{Schema: r.table.Schema, Name: r.table.Name}
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
		var raw []byte
		if err := conn.QueryRow(ctx, "SELECT row_data FROM pgoutbox_dead_letter WHERE id = $1", d.ID).Scan(&raw); err != nil {
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
