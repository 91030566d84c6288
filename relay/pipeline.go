package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/poll"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/store"
)

// pipeline is what every session of a relay shares: the configuration,
// the outbox tables, the encoder and the router, where sessions report
// (the observer, readiness, stats) and what Kafka refused. New builds it
// once; its fields never change. Of what it holds, refusals, the observer,
// readiness and stats guard themselves, and a table's housekeeping is
// used only by the session that holds the table.
type pipeline struct {
	cfg Config
	log *slog.Logger
	// tables are the pipeline's outbox tables, in the order configured.
	tables []*outboxTable
	enc    *schema.Encoder
	router *router.Router
	// database is the database name, for envelopes that carry it.
	database string
	// holder names this relay in the pipeline's lease (lease.go).
	holder  string
	obs     observer
	health  *health
	stats   *Stats
	refused *refusals
}

// observer is what sessions report to (Metrics). The row path's part is
// the meter it hands each session, which costs an atomic add and a
// histogram observation per event.
type observer interface {
	meter(Mode) meter
	sessionUp(Mode) (down func())
	DeadLettered(n int)
	lost(table string, n int64)
	retainedDeleted(n int64)
	txnObserver // exactlyonce.go
}

// Stats are the relay's running totals.
type Stats struct {
	Published   atomic.Int64 // records acked by Kafka
	Sessions    atomic.Int64 // replication sessions started
	LastPublish atomic.Int64 // unix nanoseconds of the last ack
	// SkippedPolled counts rows the WAL replayed after a poll phase had
	// already published them, and were not sent again.
	SkippedPolled atomic.Int64
	// SkippedCommitted counts rows, under exactly-once delivery, that the
	// stream sent again although a committed Kafka transaction had them.
	SkippedCommitted atomic.Int64
	// SkippedBelowFloor counts rows, under at-least-once delivery, that
	// the stream replayed from transactions below the saved floor, which
	// Kafka has, and were not sent again.
	SkippedBelowFloor atomic.Int64
}

// outboxTable is one outbox table of the pipeline. A pipeline of several
// tables streams them all through one slot; polling keeps positions per
// table instead, each in a state row:
//   - the first table's in the pipeline's row, named by the slot, so that
//     a pipeline of one table that later lists more reads its state as
//     before;
//   - every other table's in a row of its own (store.TablePipeline,
//     slot/schema.table).
type outboxTable struct {
	name outbox.Table
	own  store.Pipeline
	// names is what its state row says the pipeline's tables are: all of
	// them in the pipeline's row, the table alone in its own.
	names string
	poll  poll.Config
	// mode is the mode the table is polled in: the pipeline's for the
	// first table, whose poller probes the WAL for all of them in auto
	// mode; poll for the others.
	mode Mode
	// What lasts from one session of the table to the next; only the
	// session that holds the table uses it.
	hk         *housekeeper
	seqWarned  atomic.Bool // the detector's missing sequence was said
	scanWarned atomic.Bool // that every poll reads the whole table was said
	// unmarked are the order values of rows a poll session published
	// but could not mark (the table refused the mark, the connection
	// was lost): the next session marks them before it polls, so they
	// are not sent again while this process runs.
	unmarked []int64
}

// warnSeqOnce tells whether the detector's missing sequence is to be said:
// the first time only.
func (t *outboxTable) warnSeqOnce() bool { return !t.seqWarned.Swap(true) }

// newPipeline validates cfg and builds the pipeline, whose sessions report
// to m and count in stats.
func newPipeline(cfg Config, log *slog.Logger, m *Metrics, stats *Stats) (*pipeline, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tables, err := cfg.Replication.AllTables()
	if err != nil {
		return nil, err
	}
	enc, err := schema.NewEncoder(cfg.Encoder)
	if err != nil {
		return nil, err
	}
	rt, err := router.New(cfg.Router)
	if err != nil {
		return nil, err
	}
	var database string
	if pc, err := pgconn.ParseConfig(cfg.Replication.DatabaseURL); err == nil {
		database = pc.Database
	}
	p := &pipeline{cfg: cfg, log: log, enc: enc, router: rt, database: database, holder: leaseHolder(),
		obs: m, health: m.readiness(), stats: stats, refused: newRefusals(log, cfg.DLQTopic)}
	p.cfg.Replication.OnUpdate = p.onUpdate
	all := tablesOf(tables)
	for i, t := range tables {
		pc := cfg.Poll
		pc.Table = t.String()
		ot := &outboxTable{name: t, own: store.Pipeline{Name: cfg.Replication.Slot}, names: all, poll: pc, mode: cfg.Mode,
			hk: &housekeeper{}}
		if i > 0 {
			ot.own, ot.names, ot.mode = store.TablePipeline(cfg.Replication.Slot, t.String()), t.String(), ModePoll
		}
		p.tables = append(p.tables, ot)
	}
	return p, nil
}

// own is the pipeline's state row, named by the slot: its first table's.
func (p *pipeline) own() store.Pipeline { return p.tables[0].own }

// names names the pipeline's outbox tables, comma-separated, as the
// state table's outbox_table keeps them: one table reads as before.
func (p *pipeline) names() string { return p.tables[0].names }

// tableList is the pipeline's outbox tables.
func (p *pipeline) tableList() []outbox.Table {
	out := make([]outbox.Table, len(p.tables))
	for i, t := range p.tables {
		out[i] = t.name
	}
	return out
}

// hasPollingColumns tells whether every table of the pipeline has the
// polling columns, which auto mode needs to poll any of them.
func (p *pipeline) hasPollingColumns(ctx context.Context, conn *pgx.Conn) (bool, error) {
	for _, t := range p.tables {
		ok, err := t.poll.HasColumns(ctx, conn)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// tablesOf names tables, comma-separated.
func tablesOf(tables []outbox.Table) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	return strings.Join(names, ",")
}

// clusterCheck is the cluster check of table t (cluster.go).
func (p *pipeline) clusterCheck(t *outboxTable) clusterCheck {
	return clusterCheck{own: t.own, table: t.name, poll: t.poll, pipeline: p.cfg.Replication.Slot, log: p.log}
}

// onUpdate handles an UPDATE of an outbox table in the stream, as
// Debezium's router handles one (EventRouterDelegate.handleUnexpectedOperation).
func (p *pipeline) onUpdate(t outbox.Table, lsn pglogrepl.LSN) error {
	if p.cfg.Poll.OwnMark() {
		// The table's own column marks published rows: polling and the
		// WAL sessions update it, as the team's poller did, and a
		// publication of every operation carries those updates back.
		return nil
	}
	switch p.cfg.OnUpdate {
	case UpdateFatal:
		return &UpdateStopError{Table: t.String(), LSN: lsn.String()}
	case UpdateError:
		p.log.Error("an UPDATE of the outbox table was ignored", "table", t.String(), "lsn", lsn.String())
	default:
		p.log.Warn("an UPDATE of the outbox table was ignored", "table", t.String(), "lsn", lsn.String())
	}
	return nil
}

// unrecognised says what to do about a row the stream stopped at.
func (p *pipeline) unrecognised(e *replication.UnrecognisedError) error {
	pub, names := p.cfg.Replication.Publication, p.names()
	return fmt.Errorf("pgoutbox stopped: %w, and it came through publication %s, which should publish only the pipeline's tables (%s). "+
		"Nothing from this row on was confirmed. If %s holds events, add it to the pipeline (--table %s,%s); "+
		"if another pipeline relays it through %s, give each pipeline a publication of its own (--publication); "+
		"if neither, take it out of the publication: ALTER PUBLICATION %s DROP TABLE %s; then start pgoutbox again, "+
		"which skips its rows still in the slot (and says so)",
		e, pub, names, e.Relation, names, e.Relation, pub, pub, e.Relation.Quoted())
}

// record encodes and routes one row.
func (p *pipeline) record(b *schema.Binding, c *outbox.Change) (*kgo.Record, error) {
	rec, err := b.Record(c.Values, c.CommitTime)
	if err != nil {
		return nil, fmt.Errorf("row at %s in transaction %d: %w", c.LSN, c.XID, err)
	}
	rec.Origin = schema.Origin{
		Database: p.database, Schema: c.Relation.Schema, Table: c.Relation.Name,
		LSN: uint64(c.LSN), LastCommitLSN: uint64(c.PrevEnd), TxID: uint64(c.XID), CommitTime: c.CommitTime,
		Snapshot: c.Snapshot,
	}
	msg, err := p.enc.Encode(&rec)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, err)
	}
	topic, err := p.router.Topic(&rec)
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

// seqOf reads a row's order column (seq, or the table's own id), the
// insertion order polling marks rows by.
func seqOf(rel *outbox.Relation, values [][]byte, order string) (int64, bool) {
	for i, col := range rel.Columns {
		if col.Name == order && i < len(values) && values[i] != nil {
			n, err := strconv.ParseInt(string(values[i]), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
