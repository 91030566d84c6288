package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/store"
)

// Poison policies: what happens to a row that cannot be published.
const (
	// PoisonDeadLetter records the row in the dead-letter table, publishes
	// it to the dead-letter topic, holds its aggregate, and carries on.
	PoisonDeadLetter = "dlq"
	// PoisonHalt stops the relay at the row; nothing after it is confirmed.
	PoisonHalt = "halt"
)

// errHeld marks an event held behind an earlier dead letter of its
// aggregate: publishing it would let it overtake that event.
var errHeld = errors.New("held behind an earlier dead-lettered event of its aggregate")

// deadLetters is one session's dead-letter bookkeeping, on a connection of
// its own (the session's is used by the state saver concurrently).
type deadLetters struct {
	// owner is the pipeline the dead letters are filed under (the slot's,
	// for every table), topic the dead-letter topic.
	owner   store.Pipeline
	topic   string
	counter deadLetterCounter
	log     *slog.Logger

	conn *pgx.Conn
	held map[string]bool // aggregates with an open dead letter
}

// deadLetterCounter counts the events dead-lettered (Metrics).
type deadLetterCounter interface{ DeadLettered(n int) }

// openDeadLetters prepares dead-lettering for cfg's pipeline, or returns
// nil under the halt policy.
func openDeadLetters(ctx context.Context, cfg Config, counter deadLetterCounter, log *slog.Logger) (*deadLetters, error) {
	if cfg.OnPoison != PoisonDeadLetter {
		return nil, nil
	}
	conn, err := cfg.Replication.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	d := &deadLetters{owner: store.Pipeline{Name: cfg.Replication.Slot}, topic: cfg.DLQTopic, counter: counter, log: log,
		conn: conn, held: map[string]bool{}}
	keys, err := d.owner.HeldAggregates(ctx, conn)
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	for _, k := range keys {
		d.held[k] = true
	}
	return d, nil
}

func (d *deadLetters) close() {
	if d != nil {
		d.conn.Close(context.Background())
	}
}

// isHeld tells whether an aggregate must wait behind a dead letter. For a
// held aggregate it asks the table again, so that a replay releases it.
func (d *deadLetters) isHeld(ctx context.Context, key string) (bool, error) {
	if d == nil || !d.held[key] {
		return false, nil
	}
	open, err := d.owner.IsHeld(ctx, d.conn, key)
	if err != nil {
		return false, err
	}
	if !open {
		delete(d.held, key)
	}
	return open, nil
}

// deadLetter is what the dead-letter topic carries and the table keeps.
type deadLetter struct {
	Pipeline    string             `json:"pipeline"`
	Table       string             `json:"table"`
	EventID     string             `json:"event_id"`
	AggregateID string             `json:"aggregate_id"`
	LSN         string             `json:"lsn,omitempty"`
	TxID        uint32             `json:"txid"`
	Reason      string             `json:"reason"`
	Row         map[string]*string `json:"row"`
	Omitted     []string           `json:"omitted,omitempty"`
}

// oneLine puts a reason on one line.
var oneLine = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// add records a poison row and returns its record for the dead-letter
// topic. The table write is synchronous: once it returns, the row is
// durably accounted for, and its aggregate is held.
func (d *deadLetters) add(ctx context.Context, k producer, b *schema.Binding, c *outbox.Change, reason error) (*kgo.Record, error) {
	dl := deadLetter{
		Pipeline: d.owner.Name, Table: outbox.Table{Schema: c.Relation.Schema, Name: c.Relation.Name}.String(),
		EventID: b.RawID(c.Values), AggregateID: b.RawAggregateID(c.Values),
		TxID: c.XID, Reason: reason.Error(), Row: make(map[string]*string, len(c.Values)),
	}
	if c.LSN != 0 {
		dl.LSN = c.LSN.String()
	}
	var re *schema.RowError
	if col := b.DefaultHeaders(); col != "" && errors.As(reason, &re) && re.Column == col {
		// The column was read for its name alone: the table's own
		// headers may be something else.
		dl.Reason += "; a json column named " + col + " is read as CloudEvents extensions unless --column-headers '' is given"
	}
	for i, col := range c.Relation.Columns {
		if i < len(c.Values) && c.Values[i] != nil {
			v := string(c.Values[i])
			dl.Row[col.Name] = &v
		} else {
			dl.Row[col.Name] = nil
		}
	}
	row, err := json.Marshal(dl.Row)
	if err != nil {
		return nil, err
	}
	var lsn *string
	if dl.LSN != "" {
		lsn = &dl.LSN
	}
	// Once per event: a session that failed after this insert meets the
	// event again, and must not record it twice.
	added, err := d.owner.AddDeadLetter(ctx, d.conn, store.NewDeadLetter{
		Table: dl.Table, EventID: dl.EventID, AggregateID: dl.AggregateID,
		LSN: lsn, TxID: fmt.Sprint(dl.TxID), Reason: dl.Reason, Row: row,
	})
	if err != nil {
		return nil, err
	}
	if !b.NullAggregateID(c.Values) {
		// A row without an aggregate id has no aggregate whose order to
		// keep: it holds nothing.
		d.held[dl.AggregateID] = true
	}
	if added {
		d.counter.DeadLettered(1)
		d.log.Warn("event dead-lettered", "event_id", dl.EventID, "aggregate_id", dl.AggregateID, "reason", dl.Reason, "topic", d.topic)
	}

	rec := &kgo.Record{Topic: d.topic, Key: []byte(dl.AggregateID),
		// One line: a header of a NATS message cannot hold a line break.
		Headers: []kgo.RecordHeader{{Key: "pgoutbox-reason", Value: []byte(oneLine.Replace(dl.Reason))}, {Key: "id", Value: []byte(dl.EventID)}}}
	if rec.Value, err = json.Marshal(dl); err != nil {
		return nil, err
	}
	if k.Fits(ctx, rec) != nil {
		// Too large for the topic as it is (an oversized payload): the
		// table has the whole row; the topic gets it without its large
		// values.
		for name, v := range dl.Row {
			if v != nil && len(*v) > 1024 {
				dl.Row[name] = nil
				dl.Omitted = append(dl.Omitted, name)
			}
		}
		if rec.Value, err = json.Marshal(dl); err != nil {
			return nil, err
		}
	}
	return rec, nil
}
