package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/registry"
	"github.com/pgoutbox/pgoutbox/relay/internal/eos"
	"github.com/pgoutbox/pgoutbox/relay/internal/flow"
	"github.com/pgoutbox/pgoutbox/replication"
	"github.com/pgoutbox/pgoutbox/router"
	"github.com/pgoutbox/pgoutbox/schema"
	"github.com/pgoutbox/pgoutbox/sink"
	"github.com/pgoutbox/pgoutbox/store"
	"github.com/pgoutbox/pgoutbox/transform"
)

// pipeline is what every session of a relay shares: the configuration,
// the outbox tables, the encoder and the router, where sessions report
// (the hooks, readiness, stats) and what Kafka refused. New builds it
// once; its fields never change. Of what it holds, refusals, the hooks,
// readiness and stats guard themselves, and a table's housekeeping is
// used only by the session that holds the table.
type pipeline struct {
	cfg Config
	log *slog.Logger
	// tables are the pipeline's outbox tables, in the order configured.
	tables []*outboxTable
	enc    *schema.Encoder
	// skipped are the operations whose change events are not published
	// (Config.SkippedOperations); a snapshot's reads are not inserts.
	skipped map[schema.Op]bool
	router  *router.Router
	// keySerde and valueSerde frame avro parts with their schemas'
	// registry ids; nil without a registry.
	keySerde, valueSerde *registry.Serde
	// chain are Kafka Connect's transforms after the router, nil for
	// none; encConnect then writes each record with JsonConverter and
	// schemas, which the chain reads, and convs write its result.
	chain      *transform.Chain
	connect    bool // records go through chain and convs, even without a transform (Encoder.ConnectOnly)
	encConnect *schema.Encoder
	convs      transform.Converters
	// encChange writes each row's change event, with schemas, for the
	// chain's transforms before the router; nil when it has none.
	encChange *schema.Encoder
	// database is the database name, for envelopes that carry it.
	database string
	// holder names this relay in the pipeline's lease (lease.go).
	holder  string
	hooks   hooks
	ready   *Readiness
	stats   *Stats
	refused *refusals
	// snapshotted: this process published the rows in the tables
	// (SnapshotAlways takes its snapshot once per process).
	snapshotted bool
	// shaped are the tables the encoders have the shape of: those known
	// at start and those learn added.
	shapeMu sync.Mutex
	shaped  map[outbox.Table]bool
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
	// Filtered counts events a transform dropped (Kafka Connect's
	// Filter), which were not produced and count as done.
	Filtered atomic.Int64
}

// skipped are the counters a ledger counts the rows it skips in.
func (s *Stats) skipped() flow.Skipped {
	return flow.Skipped{Polled: &s.SkippedPolled, BelowFloor: &s.SkippedBelowFloor, Committed: &s.SkippedCommitted}
}

// newPipeline validates cfg and builds the pipeline, whose sessions report
// to m and count in stats.
func newPipeline(cfg Config, log *slog.Logger, hs hooks, ready *Readiness, stats *Stats) (*pipeline, error) {
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
	var keySerde, valueSerde *registry.Serde
	d := cfg.Encoder.Debezium
	if cfg.Registries.Key != nil {
		rc := *cfg.Registries.Key
		rc.JSON = d.Key == schema.ConvApicurioJSON
		if keySerde, err = registry.New(rc, true); err != nil {
			return nil, err
		}
	}
	if cfg.Registries.Value != nil {
		rc := *cfg.Registries.Value
		rc.JSON = d.Value == schema.ConvApicurioJSON
		if d.Value.IsCloudEvents() {
			// The CloudEventsConverter hands its AvroConverter no headers:
			// the id goes before the datum.
			rc.Headers = false
		}
		if valueSerde, err = registry.New(rc, false); err != nil {
			return nil, err
		}
	}
	var database string
	if pc, err := pgconn.ParseConfig(cfg.Replication.DatabaseURL); err == nil {
		database = pc.Database
	}
	p := &pipeline{cfg: cfg, log: log, enc: enc, router: rt, keySerde: keySerde, valueSerde: valueSerde, database: database, holder: leaseHolder(),
		hooks: hs, ready: ready, stats: stats, refused: newRefusals(log, cfg.DLQTopic)}
	if p.chain, err = transform.New(cfg.Transforms); err != nil {
		return nil, err
	}
	if p.connect = p.chain != nil || enc.ConnectOnly(); p.connect {
		if p.chain == nil {
			p.chain = transform.Passthrough()
		}
		ec := cfg.Encoder
		d := &ec.Debezium
		p.convs = transform.Converters{Key: enc.Debezium().Key, Value: enc.Debezium().Value, Header: enc.Debezium().Header,
			CloudEvents: enc.Debezium().CloudEventsMetadata}
		d.Key, d.Value, d.Header, d.RunID = schema.ConvJSONSchemas, schema.ConvJSONSchemas, schema.ConvJSONSchemas, enc.Debezium().RunID
		d.CloudEventsMetadata = schema.CloudEventsMetadata{}
		if p.encConnect, err = schema.NewEncoder(ec); err != nil {
			return nil, err
		}
		if p.chain.BeforeRouter() {
			// The change event the router would have read; its context
			// headers are the router's record's already.
			ec.Format, d.ContextHeaders = schema.Debezium, false
			if p.encChange, err = schema.NewEncoder(ec); err != nil {
				return nil, err
			}
		}
	}
	p.cfg.Replication.OnUpdate = p.onUpdate
	p.cfg.Replication.ChangeEvents = p.cfg.ChangeEvents()
	p.cfg.Replication.Truncates = p.cfg.Replication.ChangeEvents && !p.cfg.skipped()[schema.OpTruncate]
	p.skipped = p.cfg.skipped()
	up := &upkeep{cfg: p.cfg, log: log, lastPublish: &stats.LastPublish, broker: ready.broker, hooks: hs}
	p.tables = newOutboxTables(p.cfg, tables, up)
	p.shaped = make(map[outbox.Table]bool, len(tables))
	for _, t := range tables {
		p.shaped[t] = true
	}
	return p, nil
}

// learn gives the encoders the shape of the table of rel where it is one
// the stream captured since start (Config.Shape), once, before its first
// row is encoded. An error (the catalog out of reach) ends the session,
// which streams the row again.
func (p *pipeline) learn(ctx context.Context, rel *outbox.Relation) error {
	if p.cfg.Shape == nil {
		return nil
	}
	t := outbox.Table{Schema: rel.Schema, Name: rel.Name}
	p.shapeMu.Lock()
	defer p.shapeMu.Unlock()
	if p.shaped[t] {
		return nil
	}
	sh, err := p.cfg.Shape(ctx, t)
	switch {
	case errors.Is(err, replication.ErrNoTable):
		// Dropped before its first row was read (a staging table
		// created, filled and dropped): the Relation message's replica
		// identity is the key; no column is known NOT NULL.
		sh = schema.TableShape{}
		for _, c := range rel.Columns {
			if c.Key {
				sh.KeyColumns = append(sh.KeyColumns, c.Name)
			}
		}
		sh.NullKey = len(sh.KeyColumns) == 0
		p.log.Warn("a table created since start is gone from the catalog: its change events are keyed by its replica identity, its columns optional", "table", t.String())
	case err != nil:
		return fmt.Errorf("read the key and columns of %s: %w", t, err)
	}
	for _, e := range []*schema.Encoder{p.enc, p.encConnect, p.encChange} {
		if e != nil {
			e.AddTable(t.Schema, t.Name, sh)
		}
	}
	p.shaped[t] = true
	p.log.Info("capturing a table created since start", "table", t.String(), "key", strings.Join(sh.KeyColumns, ","))
	return nil
}

// sessionUp marks a session of mode holding the pipeline, for readiness
// and the hooks; the returned function marks it gone.
func (p *pipeline) sessionUp(mode Mode) (down func()) {
	down = p.ready.up(mode)
	p.hooks.sessionStart(mode)
	return down
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

// unended is where the pipeline records the Kafka transactions its
// sessions leave open (internal/eos).
func (p *pipeline) unended() eos.Unended {
	return eos.Unended{Own: p.own(), DB: p.cfg.Replication, Log: p.log}
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

// record encodes and routes one row; nil (and no error) when a transform
// dropped it. An avro part is framed with its schema's registry id, which
// may ask the registry (once per schema).
func (p *pipeline) record(ctx context.Context, b *schema.Binding, c *outbox.Change) (*kgo.Record, error) {
	return p.recordIn(ctx, b, c, schema.TxBlock{})
}

// recordIn is record for a row with its transaction block tx (none: the
// zero block).
func (p *pipeline) recordIn(ctx context.Context, b *schema.Binding, c *outbox.Change, tx schema.TxBlock) (*kgo.Record, error) {
	return p.build(ctx, b, c, tx, false)
}

// tombstoneIn is the tombstone that follows a delete's change event c
// (tombstones.on.delete): its record, with a null value.
func (p *pipeline) tombstoneIn(ctx context.Context, b *schema.Binding, c *outbox.Change, tx schema.TxBlock) (*kgo.Record, error) {
	return p.build(ctx, b, c, tx, true)
}

// build is recordIn, or, with tombstone, tombstoneIn.
func (p *pipeline) build(ctx context.Context, b *schema.Binding, c *outbox.Change, tx schema.TxBlock, tombstone bool) (*kgo.Record, error) {
	values := c.Values
	if c.Unchanged != nil {
		// Unchanged TOAST values, which the server did not send, stand
		// as Debezium's placeholder.
		values = append([][]byte(nil), values...)
		for i, u := range c.Unchanged {
			if u && i < len(c.Relation.Columns) {
				values[i] = schema.Unavailable(c.Relation.Columns[i], p.cfg.UnavailablePlaceholder)
			}
		}
	}
	rec, err := b.Record(p.enc.FillDefaults(b, p.enc.MapValues(b, values)), c.CommitTime)
	if err != nil {
		return nil, fmt.Errorf("row at %s in transaction %d: %w", c.LSN, c.XID, err)
	}
	rec.Op, rec.MovedKey = c.Op, c.Moved
	if c.Op != schema.OpInsert && c.Old != nil {
		rec.Before = p.enc.FillDefaults(b, p.enc.MapValues(b, c.Old))
	}
	rec.Origin = schema.Origin{
		Database: p.database, Schema: c.Relation.Schema, Table: c.Relation.Name,
		LSN: uint64(c.LSN), LastCommitLSN: uint64(c.PrevEnd), TxID: uint64(c.XID), CommitTime: c.CommitTime,
		Snapshot: c.Snapshot, Tx: tx,
	}
	rec.Message = c.Relation.Message
	if p.connect {
		return p.transformed(ctx, &rec, tombstone)
	}
	msg, err := p.enc.Encode(&rec)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, err)
	}
	if tombstone {
		msg.Value, msg.ValueSchema = nil, ""
	}
	topic, err := p.router.Topic(&rec)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, err)
	}
	kr := kafkaRecord(topic, msg)
	if msg.KeySchema != "" || msg.ValueSchema != "" {
		if err := p.frameOrWait(ctx, kr, &msg, rec.ID); err != nil {
			return nil, err
		}
	}
	return kr, nil
}

// frameOrWait frames kr's avro parts with their schemas' registry ids.
func (p *pipeline) frameOrWait(ctx context.Context, kr *kgo.Record, msg *schema.Message, id string) error {
	err := p.frame(ctx, kr, msg)
	if err == nil {
		return nil
	}
	var ue *registry.UnreachableError
	if ctx.Err() != nil {
		return ctx.Err() // a stop, not the registry's problem
	}
	if errors.As(err, &ue) {
		// The records wait for the registry as they would for Kafka:
		// readiness, the kafka problem metric and status say so until a
		// record to the topic is acknowledged.
		return p.ready.broker.recordFailed(p.log, kr.Topic, id, err)
	}
	return fmt.Errorf("event %s: %w", id, err)
}

// transformed is record's way through Kafka Connect's transforms: the
// router's record as Connect holds it, the chain, then the converters.
//
// A tombstone is the record of rec with a null value, which the chain
// then takes as Kafka Connect's transforms take Debezium's.
func (p *pipeline) transformed(ctx context.Context, rec *schema.Record, tombstone bool) (*kgo.Record, error) {
	msg, err := p.encConnect.Encode(rec)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, err)
	}
	topic, err := p.router.Routed(rec)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, err)
	}
	r, err := p.chain.Read(topic, &msg, time.Now())
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, &transform.DataError{Reason: err.Error()})
	}
	if tombstone {
		r.ValueSchema, r.Value = nil, nil
	}
	if p.encChange != nil {
		if err := beforeRouter(p.encChange, p.chain, rec, &r); err != nil {
			return nil, fmt.Errorf("event %s: %w", rec.ID, err)
		}
	}
	keep, err := p.chain.Apply(&r)
	if err != nil || !keep {
		if err != nil {
			err = fmt.Errorf("event %s: %w", rec.ID, err)
		}
		return nil, err
	}
	if err := router.CheckTopic(r.Topic); err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, &transform.DataError{Reason: "after the transforms, " + err.Error()})
	}
	out, err := r.Message(p.convs)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", rec.ID, err)
	}
	kr := kafkaRecord(r.Topic, out)
	if out.KeySchema != "" || out.ValueSchema != "" || out.FinishValue != nil {
		if err := p.frameOrWait(ctx, kr, &out, rec.ID); err != nil {
			return nil, err
		}
	}
	return kr, nil
}

// beforeRouter runs chain's transforms before the router on rec's change
// event, which enc writes, on its change-event topic
// (<topic.prefix>.<schema>.<table>), and puts the headers they add on r,
// the router's record, where the router keeps them: after the connector's
// context headers, before its own.
func beforeRouter(enc *schema.Encoder, chain *transform.Chain, rec *schema.Record, r *transform.Record) error {
	msg, err := enc.Encode(rec)
	if err != nil {
		return err
	}
	topic := enc.Debezium().TopicPrefix + "." + rec.Origin.Schema + "." + rec.Origin.Table
	ce, err := chain.Read(topic, &msg, time.Now())
	if err != nil {
		return &transform.DataError{Reason: "the change event: " + err.Error()}
	}
	if err := chain.ApplyBefore(&ce); err != nil {
		return err
	}
	at := 0
	for at < len(r.Headers) && strings.HasPrefix(r.Headers[at].Key, schema.ContextHeaderPrefix) {
		at++
	}
	r.Headers = slices.Insert(r.Headers, at, ce.Headers...)
	return nil
}

// kafkaRecord is the Kafka record of msg, produced to topic.
func kafkaRecord(topic string, msg schema.Message) *kgo.Record {
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
	return kr
}

// frame puts the registry's framing on a record's avro parts: the id
// before the datum, or headers after the record's own (Apicurio's
// converter adds them as Kafka Connect converts the key, then the value).
func (p *pipeline) frame(ctx context.Context, kr *kgo.Record, msg *schema.Message) error {
	for _, part := range []struct {
		serde  *registry.Serde
		schema string
		data   *[]byte
	}{{p.keySerde, msg.KeySchema, &kr.Key}, {p.valueSerde, msg.ValueSchema, &kr.Value}} {
		if part.schema == "" || part.serde == nil {
			continue
		}
		framed, hs, err := part.serde.Frame(ctx, kr.Topic, part.schema, *part.data)
		if err != nil {
			return err
		}
		*part.data = framed
		for _, h := range hs {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
	}
	if msg.FinishValue != nil && p.valueSerde != nil {
		v, err := msg.FinishValue(p.cfg.Registries.Value.URL, func(topic, sch string, datum []byte) ([]byte, error) {
			framed, _, err := p.valueSerde.Frame(ctx, topic, sch, datum)
			return framed, err
		})
		if err != nil {
			return err
		}
		kr.Value = v
	}
	return nil
}
